package localstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// Each example shoot's etcd is backed up often and changed a little, so that full and delta
// snapshots appear within seconds while six processes stay cheap on two cores.
var snapshotOptions = stack.SnapshotOptions{
	FullSnapshotSchedule: "*/1 * * * *",
	DeltaSnapshotPeriod:  5 * time.Second,
	MaxBackups:           7, // etcd-druid's default
}

const keyWriteInterval = 3 * time.Second

// shoot is one example shoot's etcd-main: a real etcd, with etcd-backup-restore saving its
// snapshots through the shoot's etcd-backup secret, and a writer that changes a key now and
// then.
type shoot struct {
	entry       string
	etcd        *stack.Etcd
	snapshotter *stack.Snapshotter
	logs        *os.File
	// bucket is the entry's bucket opened with the same secret, to count the snapshots.
	bucket     objectstore.Store
	prefix     string
	stopWriter context.CancelFunc
	writerDone chan struct{}
}

// startShoots starts a shoot for every BackupEntry, configured from its etcd-backup secret.
func (s *session) startShoots(ctx context.Context) error {
	entries := &extensionsv1alpha1.BackupEntryList{}
	if err := s.client.List(ctx, entries); err != nil {
		return err
	}
	for i := range entries.Items {
		sh, err := s.startShoot(ctx, &entries.Items[i])
		if err != nil {
			return fmt.Errorf("entry %s: %w", entries.Items[i].Name, err)
		}
		s.shoots[sh.entry] = sh
	}
	return nil
}

func (s *session) startShoot(ctx context.Context, e *extensionsv1alpha1.BackupEntry) (*shoot, error) {
	ref := entry.SecretRef(e)
	secret := &corev1.Secret{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		return nil, fmt.Errorf("reading its %s secret: %w", ref.Name, err)
	}
	dir := filepath.Join(s.etcdRoot, e.Name)
	logs, err := os.Create(filepath.Join(s.opts.Dir, "etcd-"+e.Name+".log"))
	if err != nil {
		return nil, err
	}
	sh := &shoot{entry: e.Name, logs: logs}
	br := *s.etcdbr
	br.Logs = logs
	store, err := br.BackupStore(e.Spec.Type, string(secret.Data[entry.DataKeyBucketName]), gardener.EtcdMainPrefix(e.Name), secret.Data, filepath.Join(dir, "credentials"))
	if err != nil {
		sh.stop()
		return nil, err
	}
	if e.Spec.Type == gcs.Type {
		store.EndpointOverride = s.gcs.Endpoint // etcd-druid's, from provider-gcp's seed webhook
	}
	sh.prefix = store.SnapshotPrefix()
	w := objectstore.Where{Type: e.Spec.Type, Bucket: store.Container, Config: gardener.ProviderConfig(e)}
	if _, sh.bucket, err = s.providers.Open(w, secret.Data); err != nil {
		sh.stop()
		return nil, err
	}
	member, err := stack.NewEtcdMember("etcd-main", filepath.Join(dir, "data", "new.etcd"))
	if err != nil {
		sh.stop()
		return nil, err
	}
	if sh.etcd, err = br.StartEtcd(member); err != nil {
		sh.stop()
		return nil, err
	}
	opts := snapshotOptions
	opts.TempDir = filepath.Join(dir, "data", "temp")
	if sh.snapshotter, err = br.StartSnapshotter(sh.etcd, store, opts); err != nil {
		sh.stop()
		return nil, err
	}
	writerCtx, cancel := context.WithCancel(context.Background())
	sh.stopWriter, sh.writerDone = cancel, make(chan struct{})
	go sh.writeKeys(writerCtx)
	return sh, nil
}

// writeKeys changes a key every few seconds, which the next delta snapshot records.
func (sh *shoot) writeKeys(ctx context.Context) {
	defer close(sh.writerDone)
	for n := 0; ; n++ {
		// A failed write (etcd busy) is retried by the next tick; the logs show etcd's side.
		_, _ = sh.etcd.Put(ctx, fmt.Sprintf("/registry/examples/%s/%d", sh.entry, n%10), time.Now().Format(time.RFC3339))
		select {
		case <-ctx.Done():
			return
		case <-time.After(keyWriteInterval):
		}
	}
}

// stop stops the writer, etcd-backup-restore and etcd, in that order, as a shoot's deletion
// does; what is stopped stays stopped.
func (sh *shoot) stop() {
	if sh.stopWriter != nil {
		sh.stopWriter()
		<-sh.writerDone
		sh.stopWriter = nil
	}
	if sh.snapshotter != nil {
		sh.snapshotter.Stop()
		sh.snapshotter = nil
	}
	if sh.etcd != nil {
		sh.etcd.Stop()
		sh.etcd = nil
	}
	_ = sh.logs.Close()
}

func (s *session) stopShoots() {
	for _, sh := range s.shoots {
		sh.stop()
	}
}

// snapshots counts the full and delta snapshots under the shoot's prefix.
type snapshots struct{ full, delta int }

func (c snapshots) String() string {
	return fmt.Sprintf("%d (%d full, %d delta)", c.full+c.delta, c.full, c.delta)
}

func (sh *shoot) count(ctx context.Context) (snapshots, error) {
	var c snapshots
	err := sh.bucket.List(ctx, sh.prefix, func(keys []string) error {
		for _, k := range keys {
			switch snap, _ := stack.ParseSnapshot(k); snap.Kind {
			case "Full":
				c.full++
			case "Incr":
				c.delta++
			}
		}
		return nil
	})
	return c, err
}

// waitSnapshots waits until every shoot has a full and a delta snapshot in its bucket.
func (s *session) waitSnapshots(ctx context.Context) error {
	for {
		missing := 0
		for _, sh := range s.shoots {
			c, err := sh.count(ctx)
			if err != nil {
				return fmt.Errorf("entry %s: listing its snapshots: %w", sh.entry, err)
			}
			if c.full == 0 || c.delta == 0 {
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
