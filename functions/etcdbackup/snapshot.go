package etcdbackup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/etcdconn"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// SnapshotDefinition declares the snapshot function.
var SnapshotDefinition = runner.Definition{
	Name: "snapshot",
	// It writes a local BackupDestination's backups too.
	Needs: runner.Needs{APIServer: true, Stores: true, Feature: "etcdBackupConfig"},
	// Fired schedules.
	Types: []string{events.TypeEtcdBackupDue},
	Bind: runner.NoFlags(func(_ context.Context, d runner.Deps) (runner.Handler, error) {
		return &Snapshotter{Client: d.Client, Providers: d.Stores, Log: d.Log, Now: time.Now}, nil
	}),
}

// Snapshotter takes one backup per fire of a config's schedule.
type Snapshotter struct {
	Client    client.Client
	Providers objectstore.Registry
	Log       *zap.Logger
	Now       func() time.Time
}

// Handle takes the backup for the fire that produced e: the key derives from the fire time,
// so a fire delivered twice makes one backup.
func (s *Snapshotter) Handle(ctx context.Context, e cloudevents.Event) error {
	ref, err := events.RefOf(e)
	if err != nil {
		return err
	}
	namespace, name := events.SplitObjectName(ref.Name)
	key := client.ObjectKey{Namespace: namespace, Name: name}
	cfg := &backupv1alpha1.EtcdBackupConfig{}
	if err := s.Client.Get(ctx, key, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // gone: its schedule goes with it
		}
		return err
	}
	if cfg.DeletionTimestamp != nil || (ref.UID != "" && string(cfg.UID) != ref.UID) {
		return nil // deleting, or a new config of the same name with a schedule of its own
	}
	// A backup named after a future time would sort as the newest and make the rotation
	// delete a real one: a fire ahead is refused, nothing written.
	fire, err := runner.DatedFire(ctx, s.Now(), "backup-due event for "+ref.Name)
	if err != nil {
		return err
	}
	log := s.Log.With(zap.String("config", ref.Name), zap.Time("fire", fire.At))

	backup, kept, err := s.backup(ctx, cfg, fire.At, log)
	var p *destination.Problem
	switch {
	case errors.As(err, &p):
		log.Warn("backup not taken", zap.String("reason", p.Reason), zap.String("message", p.Message))
		return kube.UpdateStatus(ctx, s.Client, key, newConfig, func(c *backupv1alpha1.EtcdBackupConfig) {
			kube.SetCondition(&c.Status.Conditions, c.Generation, backupv1alpha1.ConditionBackupSucceeded, false, p.Reason, p.Message)
			setNextRun(c, fire)
		})
	case err != nil:
		if ctx.Err() == nil {
			_ = kube.UpdateStatus(ctx, s.Client, key, newConfig, func(c *backupv1alpha1.EtcdBackupConfig) {
				kube.SetCondition(&c.Status.Conditions, c.Generation, backupv1alpha1.ConditionBackupSucceeded, false, reasonOf(err), err.Error())
			})
		}
		return err // retried with backoff: the store or etcd may recover
	}
	return kube.UpdateStatus(ctx, s.Client, key, newConfig, func(c *backupv1alpha1.EtcdBackupConfig) {
		if c.Status.LastBackup == nil || !c.Status.LastBackup.Time.After(backup.Time.Time) {
			c.Status.LastBackup = backup
		}
		c.Status.Backups, c.Status.BackupCount = kept, int32(len(kept))
		kube.SetCondition(&c.Status.Conditions, c.Generation, backupv1alpha1.ConditionBackupSucceeded, true, backupv1alpha1.ReasonBackupTaken,
			fmt.Sprintf("Backup %s: %d bytes; %d kept", backup.Key, backup.Size, len(kept)))
		setNextRun(c, fire)
	})
}

func setNextRun(c *backupv1alpha1.EtcdBackupConfig, fire runner.Fire) {
	kube.SetNextRun(&c.Status.NextRun, fire.Next)
	if fire.Next.IsZero() && c.Spec.Schedule == "" {
		c.Status.NextRun = nil
	}
}

// stepError says which step of a backup failed, for the condition's reason.
type stepError struct {
	reason string
	err    error
}

func (e *stepError) Error() string { return e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

func reasonOf(err error) string {
	var se *stepError
	if errors.As(err, &se) {
		return se.reason
	}
	return backupv1alpha1.ReasonStoreFailed
}

// backup makes sure the backup for the fire at t exists, then rotates. It returns the backup
// and the backups kept.
func (s *Snapshotter) backup(ctx context.Context, cfg *backupv1alpha1.EtcdBackupConfig, at time.Time, log *zap.Logger) (*backupv1alpha1.Backup, []backupv1alpha1.BackupReference, error) {
	if cfg.Spec.Keep < 1 {
		// The CRD defaults and bounds keep; a config from elsewhere may still lack it.
		return nil, nil, destination.Problemf(backupv1alpha1.ReasonInvalidConfig, "spec.keep is %d: at least 1", cfg.Spec.Keep)
	}
	store, _, err := destination.Open(ctx, s.Client, s.Providers, cfg.Spec.Destination)
	if err != nil {
		return nil, nil, err
	}
	key := destination.ConfigKey(cfg, at)
	backup, err := s.existing(ctx, store, cfg, key)
	if err != nil {
		return nil, nil, err
	}
	if backup == nil {
		if backup, err = s.stream(ctx, store, cfg, key, at, log); err != nil {
			return nil, nil, err
		}
	} else {
		log.Info("backup exists already: not taken again", zap.String("key", key))
	}
	kept, err := rotate(ctx, store, cfg, log)
	if err != nil {
		return nil, nil, &stepError{backupv1alpha1.ReasonRotationFailed, err}
	}
	return backup, kept, nil
}

// existing returns the backup at key if the store has it, as the status knows it if it does.
func (s *Snapshotter) existing(ctx context.Context, store objectstore.Store, cfg *backupv1alpha1.EtcdBackupConfig, key string) (*backupv1alpha1.Backup, error) {
	info, err := store.Stat(ctx, key)
	switch {
	case errors.Is(err, objectstore.ErrObjectNotFound):
		return nil, nil
	case err != nil:
		return nil, storeError(err)
	}
	if last := cfg.Status.LastBackup; last != nil && last.Key == key {
		return last.DeepCopy(), nil
	}
	t, _ := destination.ConfigBackupTime(destination.ConfigPrefix(cfg), key)
	return &backupv1alpha1.Backup{Key: key, Time: kube.Time(t), Size: info.Size}, nil
}

// stream pipes etcd's snapshot into the store, hashing on the way, and checks what arrived.
func (s *Snapshotter) stream(ctx context.Context, store objectstore.Store, cfg *backupv1alpha1.EtcdBackupConfig, key string, at time.Time, log *zap.Logger) (*backupv1alpha1.Backup, error) {
	cli, _, err := etcdconn.Connect(ctx, s.Client, cfg, log)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	start := s.Now()
	snapshotCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	rc, err := cli.Snapshot(snapshotCtx)
	if err != nil {
		return nil, &stepError{backupv1alpha1.ReasonSnapshotFailed, fmt.Errorf("starting the snapshot: %w", err)}
	}
	defer rc.Close()
	h := newSnapshotHash()
	n, err := store.Upload(ctx, key, io.TeeReader(rc, h))
	if err != nil {
		return nil, storeError(fmt.Errorf("streaming the snapshot to %s: %w", key, err))
	}
	took := s.Now().Sub(start)
	if !h.intact() {
		// etcd's trailer does not match: what was stored is not a whole snapshot.
		s.discard(ctx, store, key, log)
		return nil, &stepError{backupv1alpha1.ReasonVerificationFailed, fmt.Errorf("snapshot of %d bytes does not end with the SHA-256 of its database: discarded", n)}
	}
	info, err := store.Stat(ctx, key)
	if err != nil {
		return nil, storeError(fmt.Errorf("reading back %s: %w", key, err))
	}
	if info.Size != n {
		s.discard(ctx, store, key, log)
		return nil, &stepError{backupv1alpha1.ReasonVerificationFailed, fmt.Errorf("%s: the store holds %d bytes, %d were sent: discarded", key, info.Size, n)}
	}
	log.Info("backup taken", zap.String("key", key), zap.Int64("bytes", n), zap.Duration("took", took))
	return &backupv1alpha1.Backup{Key: key, Time: kube.Time(at), Size: n, SHA256: h.objectSHA256(),
		Duration: metav1.Duration{Duration: took.Round(time.Millisecond)}}, nil
}

func (s *Snapshotter) discard(ctx context.Context, store objectstore.Store, key string, log *zap.Logger) {
	if failed, err := store.DeleteKeys(ctx, []string{key}); err != nil || len(failed) > 0 {
		log.Warn("cannot delete a backup that failed verification", zap.String("key", key), zap.Error(errors.Join(err, failed[key])))
	}
}

// storeError makes a store's verdict on the credentials a problem (retrying cannot help)
// and leaves the rest to retry.
func storeError(err error) error {
	switch {
	case errors.Is(err, objectstore.ErrUnauthenticated), errors.Is(err, objectstore.ErrUnauthorized),
		errors.Is(err, objectstore.ErrBucketNotFound), errors.Is(err, objectstore.ErrInvalidBucketName):
		return destination.Problemf(backupv1alpha1.ReasonInvalidDestination, "%v", err)
	}
	return &stepError{backupv1alpha1.ReasonStoreFailed, err}
}

// rotate deletes the backups beyond spec.keep under the config's prefix, oldest first, and
// returns those kept. Only keys that are exactly backups of this config are considered.
func rotate(ctx context.Context, store objectstore.Store, cfg *backupv1alpha1.EtcdBackupConfig, log *zap.Logger) ([]backupv1alpha1.BackupReference, error) {
	prefix := destination.ConfigPrefix(cfg)
	var keys []string
	if err := store.List(ctx, prefix, func(page []string) error {
		keys = append(keys, page...)
		return nil
	}); err != nil {
		return nil, err
	}
	remove, kept, err := expired(prefix, keys, int(cfg.Spec.Keep))
	if err != nil || len(remove) == 0 {
		return kept, err
	}
	failed, err := store.DeleteKeys(ctx, remove)
	if err != nil {
		return nil, err
	}
	if len(failed) > 0 {
		errs := make([]error, 0, len(failed))
		for _, e := range failed {
			errs = append(errs, e)
		}
		return nil, fmt.Errorf("deleting %d of %d old backups failed: %w", len(failed), len(remove), errors.Join(errs...))
	}
	log.Info("old backups deleted", zap.Strings("keys", remove), zap.Int("kept", len(kept)))
	return kept, nil
}
