package drill

import (
	"context"
	"fmt"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/etcdbackup"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Target is one set of backups a drill restores: a BackupEntry's etcd backups, or an
// EtcdBackupConfig's in its destination. The drill function and `housekeeper drill` find them
// the same way.
type Target struct {
	// Name is what a result calls it: the BackupEntry's name, the config's namespace/name;
	// Kind is backupv1alpha1.DrilledBackupEntry or DrilledEtcdBackupConfig.
	Name, Kind string
	// Prefix and Layout are where the backups are and how they are named: Run's.
	Prefix string
	Layout Layout
	open   func(ctx context.Context) (objectstore.Store, string, error)
	// etcdbr configures etcdbrctl for the same backups; nil where it does not read them.
	etcdbr func(ctx context.Context) (*EtcdbrStore, error)
	// live is the running etcd the backups are of; nil where the drill knows none.
	live LiveEtcd
}

// EntryTarget is the backups of be's etcd (etcd-druid backs up etcd-main) in its bucket,
// opened as the purge opens it.
func EntryTarget(c client.Client, providers objectstore.Registry, be *extensionsv1alpha1.BackupEntry, etcd string) Target {
	prefix := gardener.EntryPrefix(be.Name) + etcd + "/"
	buckets := entry.Buckets{Client: c, Providers: providers}
	return Target{Name: be.Name, Kind: backupv1alpha1.DrilledBackupEntry, Prefix: prefix,
		open: func(ctx context.Context) (objectstore.Store, string, error) {
			store, err := buckets.Open(ctx, be)
			if err != nil {
				return nil, "", fmt.Errorf("opening the bucket %s: %w", be.Spec.BucketName, err)
			}
			return store, be.Spec.BucketName, nil
		},
		// The bucket and credentials the drill reads with, handed to etcdbrctl.
		etcdbr: func(ctx context.Context) (*EtcdbrStore, error) {
			w, credentials, err := buckets.Credentials(ctx, be)
			if err != nil {
				return nil, fmt.Errorf("the credentials of the bucket %s: %w", be.Spec.BucketName, err)
			}
			return NewEtcdbrStore(w, credentials, prefix, providers)
		}}
}

// ConfigTarget is cfg's backups in its BackupDestination, opened as the snapshot function
// opens it; the live etcd is cfg's, connected to as the snapshot function connects.
func ConfigTarget(c client.Client, providers objectstore.Registry, cfg *backupv1alpha1.EtcdBackupConfig) Target {
	return Target{Name: cfg.Namespace + "/" + cfg.Name, Kind: backupv1alpha1.DrilledEtcdBackupConfig,
		Prefix: etcdbackup.Prefix(cfg), Layout: LayoutSnapshots,
		open: func(ctx context.Context) (objectstore.Store, string, error) {
			store, dest, err := etcdbackup.OpenDestination(ctx, c, providers, cfg.Spec.Destination)
			if err != nil {
				return nil, "", err // its errors name the destination
			}
			return store, dest.Spec.Bucket, nil
		},
		live: LiveEtcdFunc(func(ctx context.Context) (*clientv3.Client, string, error) {
			return etcdbackup.ConnectEtcd(ctx, c, cfg, zap.NewNop())
		})}
}

// WithLive is t compared with live, the running etcd its backups are of.
func (t Target) WithLive(live LiveEtcd) Target {
	t.live = live
	return t
}

// Open opens the store t's backups are in and returns it with its bucket's name.
func (t Target) Open(ctx context.Context) (objectstore.Store, string, error) { return t.open(ctx) }

// Options are opts for drilling t: its Layout, its live etcd where it knows one, and with
// opts.Etcdbrctl set the store etcdbrctl reads t's backups from (none for an EtcdBackupConfig's,
// which etcd-backup-restore does not read: the drill says so in its result).
func (t Target) Options(ctx context.Context, opts Options) (Options, error) {
	opts.Layout = t.Layout
	if t.live != nil {
		opts.Live = t.live
	}
	if opts.Etcdbrctl == nil || t.etcdbr == nil {
		return opts, nil
	}
	store, err := t.etcdbr(ctx)
	if err != nil {
		return opts, &Error{Err: ErrSource, Detail: "configuring etcdbrctl's store", Cause: err}
	}
	opts.EtcdbrStore = store
	return opts, nil
}
