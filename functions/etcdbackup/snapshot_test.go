package etcdbackup_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"go.uber.org/zap/zaptest"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/etcdbackup"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

func newConfig(namespace, name, destination string, keep int32, endpoints ...string) *backupv1alpha1.EtcdBackupConfig {
	return &backupv1alpha1.EtcdBackupConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: backupv1alpha1.EtcdBackupConfigSpec{
			Etcd:     backupv1alpha1.EtcdReference{Endpoints: endpoints},
			Schedule: "0 */5 * * * *", Keep: keep, Destination: destination,
		},
	}
}

func dueEvent(t testing.TB, cfg *backupv1alpha1.EtcdBackupConfig) cloudevents.Event {
	t.Helper()
	e, err := events.NewEtcdBackupDueEvent("test", kube.Ref(events.KindEtcdBackupConfig, cfg), cfg.Spec.Schedule, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func condition(t testing.TB, c client.Client, cfg *backupv1alpha1.EtcdBackupConfig, typ string) (*backupv1alpha1.EtcdBackupConfig, *metav1.Condition) {
	t.Helper()
	live := &backupv1alpha1.EtcdBackupConfig{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(cfg), live); err != nil {
		t.Fatal(err)
	}
	return live, meta.FindStatusCondition(live.Status.Conditions, typ)
}

// On each provider: fires stream snapshots under <namespace>/<name>/, a fire delivered twice
// makes one backup, the oldest beyond keep are deleted, nothing else under or beside the
// prefix is touched, and the status tells it all.
func TestSnapshotToEveryProvider(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube(), testenv.WithAzurite(), testenv.WithS3())
	c := env.Client(t)
	createNamespaces(t, c, "garden", "team")
	etcd := testenv.StartEtcd(t, 50)
	reg, _ := providers(t)
	snap := &etcdbackup.Snapshotter{Client: c, Providers: reg, Log: zaptest.NewLogger(t), Now: time.Now}

	for _, typ := range []string{local.Type, azure.Type, s3.Type} {
		t.Run(typ, func(t *testing.T) {
			ctx := context.Background()
			dest := newDestination(t, env, c, reg, typ, "etcd-"+typ)
			cfg := newConfig("team", "main-"+typ, dest.obj.Name, 3, etcd.ClientURL)
			if err := c.Create(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			// Objects that are not this config's backups: never deleted.
			prefix := "team/main-" + typ + "/"
			bystanders := []string{prefix + "notes.txt", prefix + "20200101T000000Z.db.partial", "team/main-" + typ + "-2/20200101T000000Z.db"}
			for _, k := range bystanders {
				if err := objectstore.PutBytes(ctx, dest.store, k, []byte("keep me")); err != nil {
					t.Fatal(err)
				}
			}
			base := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
			fires := []time.Time{base, base, base.Add(5 * time.Minute), base.Add(10 * time.Minute), base.Add(15 * time.Minute)}
			for i, at := range fires {
				fctx := runner.WithFire(ctx, runner.Fire{At: at, Next: at.Add(5 * time.Minute)})
				if err := snap.Handle(fctx, dueEvent(t, cfg)); err != nil {
					t.Fatalf("fire %d at %s: %v", i, at, err)
				}
				if i == 1 {
					keys := listAll(t, dest.store, prefix+"2026")
					if len(keys) != 1 {
						t.Fatalf("a fire delivered twice made %d backups: %q", len(keys), keys)
					}
				}
			}
			want := []string{prefix + "20261123T100500Z.db", prefix + "20261123T101000Z.db", prefix + "20261123T101500Z.db"}
			got := listAll(t, dest.store, prefix+"2026")
			if !slices.Equal(got, want) {
				t.Fatalf("backups %q, want the newest three %q", got, want)
			}
			all := listAll(t, dest.store, "team/")
			for _, k := range bystanders {
				if !slices.Contains(all, k) {
					t.Errorf("%s was deleted: it is not a backup of this config", k)
				}
			}
			live, cond := condition(t, c, cfg, backupv1alpha1.ConditionBackupSucceeded)
			if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != backupv1alpha1.ReasonBackupTaken {
				t.Fatalf("condition %+v", cond)
			}
			last := live.Status.LastBackup
			info, err := dest.store.Stat(ctx, want[2])
			if err != nil {
				t.Fatal(err)
			}
			if last == nil || last.Key != want[2] || last.Size != info.Size || len(last.SHA256) != 64 || !last.Time.Time.Equal(fires[4]) {
				t.Fatalf("lastBackup %+v, want %s of %d bytes", last, want[2], info.Size)
			}
			if live.Status.BackupCount != 3 || live.Status.Backups[0].Key != want[2] || live.Status.Backups[2].Key != want[0] {
				t.Fatalf("backups in status: %+v", live.Status.Backups)
			}
			if live.Status.NextRun == nil || !live.Status.NextRun.Time.Equal(fires[4].Add(5*time.Minute)) {
				t.Fatalf("nextRun %v", live.Status.NextRun)
			}
			t.Logf("%s: %d bytes per backup", typ, last.Size)
		})
	}
}

// Bad input becomes a condition, and the handler settles the event (no retry storm).
func TestSnapshotBadInput(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	c := env.Client(t)
	createNamespaces(t, c, "garden", "team")
	reg, _ := providers(t)
	snap := &etcdbackup.Snapshotter{Client: c, Providers: reg, Log: zaptest.NewLogger(t), Now: time.Now}
	ctx := context.Background()
	dest := newDestination(t, env, c, reg, local.Type, "bad-input")
	etcd := testenv.StartEtcd(t, 1)

	cases := []struct {
		name, reason, says string
		cfg                func() *backupv1alpha1.EtcdBackupConfig
		before             func()
	}{
		{"unknown destination", backupv1alpha1.ReasonUnknownDestination, `BackupDestination "nowhere" does not exist`,
			func() *backupv1alpha1.EtcdBackupConfig {
				return newConfig("team", "unknown-dest", "nowhere", 3, etcd.ClientURL)
			}, nil},
		{"unreachable etcd", backupv1alpha1.ReasonEtcdUnreachable, "no etcd endpoint answered",
			func() *backupv1alpha1.EtcdBackupConfig {
				return newConfig("team", "unreachable", dest.obj.Name, 3, "http://127.0.0.1:1")
			}, nil},
		{"missing TLS secret", backupv1alpha1.ReasonInvalidTLS, "TLS secret team/etcd-client does not exist",
			func() *backupv1alpha1.EtcdBackupConfig {
				cfg := newConfig("team", "no-tls-secret", dest.obj.Name, 3, etcd.ClientURL)
				cfg.Spec.Etcd.TLSSecretRef = &backupv1alpha1.LocalObjectReference{Name: "etcd-client"}
				return cfg
			}, nil},
		{"bad TLS material", backupv1alpha1.ReasonInvalidTLS, "are not a usable certificate and key",
			func() *backupv1alpha1.EtcdBackupConfig {
				cfg := newConfig("team", "bad-tls", dest.obj.Name, 3, etcd.ClientURL)
				cfg.Spec.Etcd.TLSSecretRef = &backupv1alpha1.LocalObjectReference{Name: "garbage-tls"}
				return cfg
			}, func() {
				createSecret(t, c, "team", "garbage-tls", map[string][]byte{"tls.crt": []byte("not a cert"), "tls.key": []byte("SECRET-KEY-MATERIAL")})
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
			}
			cfg := tc.cfg()
			if err := c.Create(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			fctx := runner.WithFire(ctx, runner.Fire{At: time.Now().Truncate(time.Second)})
			if err := snap.Handle(fctx, dueEvent(t, cfg)); err != nil {
				t.Fatalf("bad input is settled with a condition, not retried: %v", err)
			}
			_, cond := condition(t, c, cfg, backupv1alpha1.ConditionBackupSucceeded)
			if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != tc.reason || !strings.Contains(cond.Message, tc.says) {
				t.Fatalf("condition %+v, want False %s saying %q", cond, tc.reason, tc.says)
			}
			if strings.Contains(cond.Message, "SECRET-KEY-MATERIAL") {
				t.Fatalf("the condition quotes the key: %s", cond.Message)
			}
		})
	}
}
