package infra_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/bridge"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The roles of infra/rbac carry the bridge, the schedule and the snapshot function through an
// EtcdBackupConfig's life — a cron schedule installed, backups taken and rotated with a
// destination's credentials read, the config deleted — and the bridge and the schedule
// function through a RestoreDrill's and a BackupCopyPolicy's — its schedule installed, the
// object deleted — each as its own ServiceAccount. Any Forbidden answer fails the test.
func TestRBACIsEnoughForEtcdBackups(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube(), testenv.WithNATS())
	admin := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	applyChartRBAC(ctx, t, admin)
	core, logs := observer.New(zap.InfoLevel)
	log := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) }))
	as := func(component string) *rest.Config { return serviceAccountConfig(env, component) }
	clientAs := func(component string) client.Client { return serviceAccountClient(t, env, component) }
	nc, err := nats.Connect(env.NATS.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if code := cli.Main(ctx, []string{"--nats-url", env.NATS.URL, "setup", "--ack-wait", "3s", "--log-level", "warn"}, os.Stdout, os.Stderr); code != 0 {
		t.Fatalf("housekeeper setup: exit %d", code)
	}
	var wg sync.WaitGroup
	runCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(func() { stop(); wg.Wait() })
	background := func(name string, run func(context.Context) error) {
		wg.Go(func() {
			if err := run(runCtx); err != nil && runCtx.Err() == nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	bridgeCfg := as("bridge")
	b, err := bridge.New(bridgeCfg, js, nil, bridge.Options{Cluster: "rbac-test", Scope: gardener.Scope{Types: []string{local.Type}, Classes: []string{"shoot"}}, Logger: log.Named("bridge")})
	if err != nil {
		t.Fatal(err)
	}
	background("bridge", func(ctx context.Context) error { return runAsLeader(ctx, bridgeCfg, b.Run) })
	root := t.TempDir()
	providers := objectstore.NewRegistry(local.New(root))
	for _, def := range all.EtcdBackup {
		fn, err := def.Build(context.Background(), runner.Deps{Config: as(def.Name), Client: clientAs(def.Name), JetStream: js, Stores: providers, Cluster: "rbac-test", Log: log})
		if err != nil {
			t.Fatal(err)
		}
		w, err := runner.NewWorker(js, fn, prometheus.NewRegistry(), runner.WithLogger(log.Named(fn.Name)),
			runner.WithBackoff(100*time.Millisecond, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		background(fn.Name, w.Run)
	}

	etcdLogs, err := os.Create(filepath.Join(t.TempDir(), "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer etcdLogs.Close()
	br, err := stack.NewEtcdBR(etcdLogs)
	if err != nil {
		t.Fatal(err)
	}
	member, err := stack.NewEtcdMember("rbac", filepath.Join(t.TempDir(), "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := br.StartEtcd(member)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Stop()
	store, err := providers["local"].Open("rbac-backups", nil)
	if err != nil || store.Create(ctx) != nil {
		t.Fatalf("bucket: %v", err)
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}},
		// The snapshot function reads a destination's credentials secret (local needs none,
		// but a referenced secret is read all the same).
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "dest-credentials"}, Data: map[string][]byte{"unused": []byte("x")}},
		&backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: "rbac"}, Spec: backupv1alpha1.BackupDestinationSpec{
			Type: "local", Bucket: "rbac-backups", CredentialsSecretRef: &backupv1alpha1.SecretReference{Namespace: "garden", Name: "dest-credentials"}}},
		&backupv1alpha1.EtcdBackupConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "main"}, Spec: backupv1alpha1.EtcdBackupConfigSpec{
			Etcd:     backupv1alpha1.EtcdReference{Endpoints: []string{etcd.ClientURL}},
			Schedule: "* * * * * *", Keep: 2, Destination: "rbac"}},
		// A yearly drill: scheduled, never fired during the test.
		&backupv1alpha1.RestoreDrill{ObjectMeta: metav1.ObjectMeta{Name: "rbac"}, Spec: backupv1alpha1.RestoreDrillSpec{All: true, Schedule: "@yearly"}},
		// A yearly copy policy, likewise.
		&backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "rbac"}, Spec: backupv1alpha1.BackupCopyPolicySpec{
			Buckets: backupv1alpha1.BucketSelection{Types: []string{"local"}}, Destination: "rbac", Schedule: "@yearly"}},
	} {
		if err := admin.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	wait := func(what string, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok, state := cond()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; last seen: %s%s", what, state, forbidden(logs))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	cfg := &backupv1alpha1.EtcdBackupConfig{}
	key := client.ObjectKey{Namespace: "team", Name: "main"}
	seen := map[string]bool{}
	wait("three backups taken, the first rotated out", func() (bool, string) {
		if err := admin.Get(ctx, key, cfg); err != nil {
			return false, err.Error()
		}
		if cfg.Status.LastBackup != nil {
			seen[cfg.Status.LastBackup.Key] = true
		}
		var keys []string
		_ = store.List(ctx, "team/main/", func(p []string) error { keys = append(keys, p...); return nil })
		return len(seen) >= 3 && cfg.Status.BackupCount == 2 && len(keys) == 2, fmt.Sprintf("seen %d, store %q, status %+v", len(seen), keys, cfg.Status)
	})
	if err := admin.Delete(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	wait("the config released", func() (bool, string) {
		err := admin.Get(ctx, key, cfg)
		return apierrors.IsNotFound(err), fmt.Sprintf("%v", err)
	})
	drill, policy := &backupv1alpha1.RestoreDrill{}, &backupv1alpha1.BackupCopyPolicy{}
	for _, o := range []struct {
		obj        client.Object
		conditions *[]metav1.Condition
	}{{drill, &drill.Status.Conditions}, {policy, &policy.Status.Conditions}} {
		kind := fmt.Sprintf("%T", o.obj)
		wait(kind+" scheduled", func() (bool, string) {
			if err := admin.Get(ctx, client.ObjectKey{Name: "rbac"}, o.obj); err != nil {
				return false, err.Error()
			}
			cond := meta.FindStatusCondition(*o.conditions, backupv1alpha1.ConditionScheduled)
			return cond != nil && cond.Status == metav1.ConditionTrue && controllerutil.ContainsFinalizer(o.obj, backupv1alpha1.Finalizer),
				fmt.Sprintf("finalizers %v, conditions %+v", o.obj.GetFinalizers(), *o.conditions)
		})
		if err := admin.Delete(ctx, o.obj); err != nil {
			t.Fatal(err)
		}
		wait(kind+" released", func() (bool, string) {
			err := admin.Get(ctx, client.ObjectKey{Name: "rbac"}, o.obj)
			return apierrors.IsNotFound(err), fmt.Sprintf("%v", err)
		})
	}
	if f := forbidden(logs); f != "" {
		t.Fatalf("requests were forbidden:%s", f)
	}
}
