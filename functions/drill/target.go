package drill

import (
	"context"
	"fmt"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/etcdconn"
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
	// Source is the store drilled where it is not the backups' own: copy/<policy> for a copy
	// a BackupCopyPolicy keeps (CopyTarget); "" for the bucket or destination they are in.
	Source string
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
	buckets := gardener.Buckets{Client: c, Providers: providers}
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

// CopyTarget is the copy of be's etcd backups that the BackupCopyPolicy named policy keeps in
// its BackupDestination, under the same prefix as in be's bucket; opened as the copy function
// opens it, and only read. A policy that does not exist, or does not copy be (its bucket not
// among the policy's, or be not an entry the copy function copies), is ErrNotCopied.
func CopyTarget(c client.Client, providers objectstore.Registry, be *extensionsv1alpha1.BackupEntry, etcd, policy string) Target {
	prefix := gardener.EntryPrefix(be.Name) + etcd + "/"
	return Target{Name: be.Name, Kind: backupv1alpha1.DrilledBackupEntry, Prefix: prefix, Source: CopySource(policy),
		open: func(ctx context.Context) (objectstore.Store, string, error) {
			p, err := copyPolicyOf(ctx, c, be, policy)
			if err != nil {
				return nil, "", err
			}
			store, dest, err := destination.Open(ctx, c, providers, p.Spec.Destination)
			if err != nil {
				return nil, "", fmt.Errorf("the copy of BackupCopyPolicy %s: %w", policy, err) // its errors name the destination
			}
			return store, dest.Spec.Bucket, nil
		},
		// The destination's store and credentials, handed to etcdbrctl.
		etcdbr: func(ctx context.Context) (*EtcdbrStore, error) {
			p, err := copyPolicyOf(ctx, c, be, policy)
			if err != nil {
				return nil, err
			}
			_, w, credentials, err := destination.Read(ctx, c, p.Spec.Destination)
			if err != nil {
				return nil, err
			}
			return NewEtcdbrStore(w, credentials, prefix, providers)
		}}
}

// CopySource is how a result names the copy the BackupCopyPolicy named policy keeps.
func CopySource(policy string) string { return "copy/" + policy }

// copyPolicyOf is the BackupCopyPolicy named policy, checked to copy be's backups as the copy
// function picks them.
func copyPolicyOf(ctx context.Context, c client.Client, be *extensionsv1alpha1.BackupEntry, policy string) (*backupv1alpha1.BackupCopyPolicy, error) {
	p := &backupv1alpha1.BackupCopyPolicy{}
	if err := c.Get(ctx, client.ObjectKey{Name: policy}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: BackupCopyPolicy %s does not exist", ErrNotCopied, policy)
		}
		return nil, fmt.Errorf("reading BackupCopyPolicy %s: %w", policy, err)
	}
	sel, err := destination.Select(p.Spec.Buckets)
	if err != nil {
		return nil, fmt.Errorf("BackupCopyPolicy %s: %w", policy, err)
	}
	bucket := &extensionsv1alpha1.BackupBucket{}
	if err := c.Get(ctx, client.ObjectKey{Name: be.Spec.BucketName}, bucket); err != nil {
		return nil, fmt.Errorf("reading BackupBucket %s: %w", be.Spec.BucketName, err)
	}
	if !sel.SelectsBucket(bucket) || !destination.SelectsEntry(be) {
		return nil, fmt.Errorf("%w: BackupCopyPolicy %s does not copy BackupEntry %s (its bucket %s is not among the policy's buckets)",
			ErrNotCopied, policy, be.Name, be.Spec.BucketName)
	}
	return p, nil
}

// ConfigTarget is cfg's backups in its BackupDestination, opened as the snapshot function
// opens it; the live etcd is cfg's, connected to as the snapshot function connects.
func ConfigTarget(c client.Client, providers objectstore.Registry, cfg *backupv1alpha1.EtcdBackupConfig) Target {
	return Target{Name: cfg.Namespace + "/" + cfg.Name, Kind: backupv1alpha1.DrilledEtcdBackupConfig,
		Prefix: destination.ConfigPrefix(cfg), Layout: LayoutSnapshots,
		open: func(ctx context.Context) (objectstore.Store, string, error) {
			store, dest, err := destination.Open(ctx, c, providers, cfg.Spec.Destination)
			if err != nil {
				return nil, "", err // its errors name the destination
			}
			return store, dest.Spec.Bucket, nil
		},
		live: LiveEtcdFunc(func(ctx context.Context) (*clientv3.Client, string, error) {
			return etcdconn.Connect(ctx, c, cfg, zap.NewNop())
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
