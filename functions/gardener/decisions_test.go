package gardener

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// The decisions of the Reconciler, row by row, against controller-runtime's fake client: which
// actuator method runs, what lastOperation says afterwards, where our finalizer is, whether the
// operation annotation is gone, and the class of the returned error. Expected values come from
// the Gardener extension contract (../shared/upstream-facts.md, gardener's
// extensions/pkg/controller/backup{bucket,entry}/reconciler.go and OperationAnnotationWrapper);
// where housekeeper deliberately does otherwise, the row says so in a comment.

const (
	// The finalizers of the contract (functions/bucket and functions/entry use them).
	decisionsBucketFinalizer = "extensions.gardener.cloud/backupbucket"
	decisionsEntryFinalizer  = "extensions.gardener.cloud/backupentry"
	// Another controller's finalizer: it keeps a deleted object visible after ours is gone.
	otherFinalizer = "example.com/keep"

	decisionsBucket = "bucket-1"
	decisionsEntry  = "shoot--dev--app--6f1c2a"
	decisionsUID    = "uid-1"
	secretNamespace = "garden"
	secretName      = "backup-credentials"
	decisionsGen    = 2
)

var (
	seededAt = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC) // lastUpdateTime of every seeded lastOperation
	runAt    = time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC) // the Reconciler's clock

	errRetryable = Retryable(errors.New("store unavailable"), gardencorev1beta1.ErrorRetryableInfraDependencies)
	errPermanent = Permanent(errors.New("credentials rejected"), gardencorev1beta1.ErrorInfraUnauthenticated)
	errPlain     = errors.New("boom")
)

// decisionRow is one situation and what the contract says comes of it.
type decisionRow struct {
	name string

	// The object before the run.
	bucket   bool                              // a BackupBucket (no migration); else a BackupEntry
	class    extensionsv1alpha1.ExtensionClass // spec.class; "" is unset (shoot)
	typ      string                            // spec.type; "" is local (served)
	ann      string                            // gardener.cloud/operation
	deleting bool                              // deletionTimestamp set
	last     string                            // lastOperation "Type State"; "" none
	lastDesc string                            // its description, if not the default
	stale    bool                              // observedGeneration behind generation (spec changed)
	ours     bool                              // our finalizer on the object and on its secret
	other    bool                              // another controller's finalizer on the object
	noSecret bool                              // spec.secretRef points nowhere
	absent   bool                              // the object does not exist (event rows)

	// The run: Reconcile the live object, or Handle an event of this operation about it.
	event     events.Operation
	eventKind events.Kind // the event's kind, if not the object's
	staleCopy bool        // the event carries an outdated copy (before a claim)

	// The actuator's answers.
	reconcileErr  error
	reconcileDesc string
	deleteErr     error
	pending       string // Delete answers Pending with this description

	want outcome
}

type outcome struct {
	call    string // the actuator method called: "", "Reconcile" or "Delete"
	op      string // lastOperation afterwards, "Type State"; "" none
	written bool   // lastOperation written by this run (lastUpdateTime now); else the status is unchanged
	desc    string // lastOperation description, checked when set
	codes   []gardencorev1beta1.ErrorCode
	// Our finalizer afterwards, on the object and on its secret.
	finalizer, secretFinalizer bool
	annKept                    bool // the operation annotation is still there
	gone                       bool // the object is gone (then only call, claimed, secretFinalizer and err are checked)
	claimed                    bool // Handle claimed the object from the event's copy, without reading it
	err                        runner.Class
}

func TestDecisions(t *testing.T) {
	const (
		reconcile = "Reconcile"
		del       = "Delete"
	)
	for _, tc := range []decisionRow{
		// --- A new object: Create, or Restore when annotated so.
		{name: "entry/new", want: outcome{call: reconcile, op: "Create Succeeded", written: true, desc: "BackupEntry created",
			finalizer: true, secretFinalizer: true}},
		{name: "entry/new/reconcile annotation removed", ann: OperationReconcile,
			want: outcome{call: reconcile, op: "Create Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		{name: "entry/new/restore", ann: OperationRestore,
			want: outcome{call: reconcile, op: "Restore Succeeded", written: true, desc: "BackupEntry restored", finalizer: true, secretFinalizer: true}},
		{name: "entry/new/wait-for-state does nothing", ann: OperationWaitForState, want: outcome{annKept: true}},
		{name: "entry/new/migrate before any reconcile", ann: OperationMigrate,
			want: outcome{op: "Migrate Succeeded", written: true, desc: "BackupEntry migrated"}},
		{name: "bucket/new", bucket: true, want: outcome{call: reconcile, op: "Create Succeeded", written: true, desc: "BackupBucket created",
			finalizer: true, secretFinalizer: true}},
		{name: "bucket/new/reconcile annotation removed", bucket: true, ann: OperationReconcile,
			want: outcome{call: reconcile, op: "Create Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		{name: "bucket/new/restore", bucket: true, ann: OperationRestore,
			want: outcome{call: reconcile, op: "Restore Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		// The scope (type local, class shoot) is checked on the live object, not only by the
		// bridge: an object of another type or class is never touched, whatever the event says.
		{name: "bucket/new/class garden not served", bucket: true, class: extensionsv1alpha1.ExtensionClassGarden, want: outcome{}},
		{name: "entry/new/class seed not served", class: extensionsv1alpha1.ExtensionClassSeed, want: outcome{}},
		{name: "entry/new/class shoot", class: extensionsv1alpha1.ExtensionClassShoot,
			want: outcome{call: reconcile, op: "Create Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		{name: "entry/new/type not served", typ: "azrue", want: outcome{}},
		{name: "bucket/new/type not served", bucket: true, typ: "aws", want: outcome{}},
		{name: "entry/new/type not served/created event does not claim", typ: "azrue", event: events.OpCreated, want: outcome{}},
		{name: "entry/new/type not served/reconcile annotation kept", typ: "azrue", ann: OperationReconcile, want: outcome{annKept: true}},
		{name: "entry/deleting/type not served keeps every finalizer", typ: "azrue", deleting: true, ours: true, other: true,
			want: outcome{finalizer: true, secretFinalizer: true}},

		// --- After Create Succeeded.
		// Converged (same generation, no annotation): the idempotent work runs, nothing is
		// written. Upstream would write Reconcile Succeeded with a new lastUpdateTime;
		// housekeeper deliberately writes only a changed outcome (gardenlet's forced reconciles
		// carry the reconcile annotation, which does write).
		{name: "entry/created/converged", last: "Create Succeeded", ours: true,
			want: outcome{call: reconcile, op: "Create Succeeded", finalizer: true, secretFinalizer: true}},
		{name: "entry/created/reconcile", last: "Create Succeeded", ours: true, ann: OperationReconcile,
			want: outcome{call: reconcile, op: "Reconcile Succeeded", written: true, desc: "BackupEntry reconciled", finalizer: true, secretFinalizer: true}},
		{name: "entry/created/spec changed", last: "Create Succeeded", ours: true, stale: true,
			want: outcome{call: reconcile, op: "Reconcile Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		{name: "entry/created/restore", last: "Create Succeeded", ours: true, ann: OperationRestore,
			want: outcome{call: reconcile, op: "Restore Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		{name: "entry/created/migrate", last: "Create Succeeded", ours: true, ann: OperationMigrate,
			want: outcome{op: "Migrate Succeeded", written: true, desc: "BackupEntry migrated"}},
		{name: "entry/created/wait-for-state", last: "Create Succeeded", ours: true, ann: OperationWaitForState,
			want: outcome{op: "Create Succeeded", finalizer: true, secretFinalizer: true, annKept: true}},
		{name: "entry/created/converged, now waiting for the namespace", last: "Create Succeeded", ours: true, reconcileDesc: "etcd-backup waits for namespace shoot--dev--app",
			want: outcome{call: reconcile, op: "Reconcile Succeeded", written: true, desc: "etcd-backup waits for namespace shoot--dev--app", finalizer: true, secretFinalizer: true}},
		{name: "entry/reconciled/still waiting for the namespace", last: "Reconcile Succeeded", lastDesc: "etcd-backup waits for namespace shoot--dev--app", ours: true,
			reconcileDesc: "etcd-backup waits for namespace shoot--dev--app",
			want:          outcome{call: reconcile, op: "Reconcile Succeeded", desc: "etcd-backup waits for namespace shoot--dev--app", finalizer: true, secretFinalizer: true}},
		{name: "entry/reconciled/namespace appeared", last: "Reconcile Succeeded", lastDesc: "etcd-backup waits for namespace shoot--dev--app", ours: true,
			want: outcome{call: reconcile, op: "Reconcile Succeeded", written: true, desc: "BackupEntry reconciled", finalizer: true, secretFinalizer: true}},
		{name: "bucket/created/converged", bucket: true, last: "Create Succeeded", ours: true,
			want: outcome{call: reconcile, op: "Create Succeeded", finalizer: true, secretFinalizer: true}},
		{name: "bucket/created/reconcile", bucket: true, last: "Create Succeeded", ours: true, ann: OperationReconcile,
			want: outcome{call: reconcile, op: "Reconcile Succeeded", written: true, desc: "BackupBucket reconciled", finalizer: true, secretFinalizer: true}},
		// A BackupBucket does not migrate: the annotation is reconciled like any change, and stays
		// (upstream's bucket reconciler would record the type Migrate and leave it too; gardenlet
		// never sets migrate on a BackupBucket).
		{name: "bucket/created/migrate is a reconcile", bucket: true, last: "Create Succeeded", ours: true, ann: OperationMigrate,
			want: outcome{call: reconcile, op: "Reconcile Succeeded", written: true, finalizer: true, secretFinalizer: true, annKept: true}},
		{name: "bucket/new/migrate is a reconcile", bucket: true, ann: OperationMigrate,
			want: outcome{call: reconcile, op: "Reconcile Succeeded", written: true, finalizer: true, secretFinalizer: true, annKept: true}},

		// --- After Reconcile Error.
		{name: "entry/reconcile failed/retried", last: "Reconcile Error", ours: true,
			want: outcome{call: reconcile, op: "Reconcile Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		{name: "entry/reconcile failed/reconcile", last: "Reconcile Error", ours: true, ann: OperationReconcile,
			want: outcome{call: reconcile, op: "Reconcile Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		{name: "entry/reconcile failed/migrate", last: "Reconcile Error", ours: true, ann: OperationMigrate,
			want: outcome{op: "Migrate Succeeded", written: true}},
		{name: "bucket/reconcile failed/retried", bucket: true, last: "Reconcile Error", ours: true,
			want: outcome{call: reconcile, op: "Reconcile Succeeded", written: true, finalizer: true, secretFinalizer: true}},

		// --- An unfinished Create, Restore or Migrate is done again.
		{name: "entry/create failed/create again", last: "Create Error", ours: true,
			want: outcome{call: reconcile, op: "Create Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		{name: "entry/restore failed/restore again", last: "Restore Error", ours: true,
			want: outcome{call: reconcile, op: "Restore Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		{name: "entry/migrate failed/migrate again", last: "Migrate Error", ours: true,
			want: outcome{op: "Migrate Succeeded", written: true}},
		{name: "bucket/create failed/create again", bucket: true, last: "Create Error", ours: true,
			want: outcome{call: reconcile, op: "Create Succeeded", written: true, finalizer: true, secretFinalizer: true}},

		// --- After Migrate Succeeded (the destination seed owns the backups): everything but a
		// new migrate or a restore is ignored, deletion included (ShouldSkipOperation).
		{name: "entry/migrated/ignored", last: "Migrate Succeeded", want: outcome{op: "Migrate Succeeded"}},
		// Upstream's OperationAnnotationWrapper removes a reconcile annotation before the skip;
		// housekeeper leaves it. Harmless: gardenlet deletes a migrated object next and does not
		// wait for the annotation on deletion.
		{name: "entry/migrated/reconcile ignored", last: "Migrate Succeeded", ann: OperationReconcile,
			want: outcome{op: "Migrate Succeeded", annKept: true}},
		{name: "entry/migrated/restore", last: "Migrate Succeeded", ann: OperationRestore,
			want: outcome{call: reconcile, op: "Restore Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		{name: "entry/migrated/migrate again", last: "Migrate Succeeded", ann: OperationMigrate,
			want: outcome{op: "Migrate Succeeded", written: true}},
		{name: "entry/migrated/deleted", last: "Migrate Succeeded", deleting: true, other: true,
			want: outcome{op: "Migrate Succeeded"}},
		// A finalizer left behind (by an older housekeeper) is released without any cleanup.
		{name: "entry/migrated/deleted, finalizer left behind", last: "Migrate Succeeded", deleting: true, ours: true,
			want: outcome{gone: true}},
		// A bucket never counts as migrated away.
		{name: "bucket/migrated/reconciled", bucket: true, last: "Migrate Succeeded",
			want: outcome{call: reconcile, op: "Reconcile Succeeded", written: true, finalizer: true, secretFinalizer: true}},

		// --- Deletion.
		// Upstream writes Delete Succeeded and then removes the finalizers; housekeeper only
		// removes them. The object is gone either way when ours was its last finalizer.
		{name: "entry/created/deleted", last: "Create Succeeded", deleting: true, ours: true,
			want: outcome{call: del, gone: true}},
		{name: "entry/delete failed/deleted", last: "Delete Error", deleting: true, ours: true,
			want: outcome{call: del, gone: true}},
		// As upstream: Delete Succeeded, clearing lastError, before the finalizers go, so that
		// gardenlet's deletion of the core BackupEntry does not report an old error for as long
		// as another finalizer keeps the object.
		{name: "entry/delete failed/deleted, another finalizer stays", last: "Delete Error", deleting: true, ours: true, other: true,
			want: outcome{call: del, op: "Delete Succeeded", written: true}},
		{name: "entry/created/delete pending", last: "Create Succeeded", deleting: true, ours: true, pending: "purge scheduled for 2026-01-08T11:00:00Z",
			want: outcome{call: del, op: "Delete Pending", written: true, desc: "purge scheduled for 2026-01-08T11:00:00Z", finalizer: true, secretFinalizer: true}},
		{name: "entry/delete pending/still pending", last: "Delete Pending", lastDesc: "purge scheduled for 2026-01-08T11:00:00Z", deleting: true, ours: true,
			pending: "purge scheduled for 2026-01-08T11:00:00Z",
			want:    outcome{call: del, op: "Delete Pending", finalizer: true, secretFinalizer: true}},
		{name: "entry/delete pending/rescheduled", last: "Delete Pending", lastDesc: "purge scheduled for 2026-01-08T11:00:00Z", deleting: true, ours: true,
			pending: "purge scheduled for 2026-01-09T11:00:00Z",
			want:    outcome{call: del, op: "Delete Pending", written: true, desc: "purge scheduled for 2026-01-09T11:00:00Z", finalizer: true, secretFinalizer: true}},
		{name: "entry/delete pending/purged", last: "Delete Pending", deleting: true, ours: true,
			want: outcome{call: del, gone: true}},
		{name: "entry/delete failed/now pending", last: "Delete Error", deleting: true, ours: true, pending: "purge scheduled",
			want: outcome{call: del, op: "Delete Pending", written: true, finalizer: true, secretFinalizer: true}},
		{name: "entry/deleted/never ours", last: "Create Succeeded", deleting: true, other: true,
			want: outcome{op: "Create Succeeded"}},
		{name: "entry/new/deleted before any reconcile", deleting: true, other: true, want: outcome{}},
		// Deletion wins over restore; neither upstream nor housekeeper removes the annotation then.
		{name: "entry/created/deleted with restore", last: "Create Succeeded", deleting: true, ours: true, ann: OperationRestore, pending: "purge scheduled",
			want: outcome{call: del, op: "Delete Pending", written: true, finalizer: true, secretFinalizer: true, annKept: true}},
		// Upstream's OperationAnnotationWrapper would remove a reconcile annotation before the
		// deletion; housekeeper removes it only on a reconcile. Gardenlet does not wait for it
		// while an object is being deleted.
		{name: "entry/created/deleted with reconcile", last: "Create Succeeded", deleting: true, ours: true, ann: OperationReconcile, pending: "purge scheduled",
			want: outcome{call: del, op: "Delete Pending", written: true, finalizer: true, secretFinalizer: true, annKept: true}},
		{name: "entry/created/deleted with wait-for-state", last: "Create Succeeded", deleting: true, ours: true, ann: OperationWaitForState,
			want: outcome{op: "Create Succeeded", finalizer: true, secretFinalizer: true, annKept: true}},
		// Migrate wins over deletion: no cleanup, finalizers released.
		{name: "entry/created/deleted with migrate", last: "Create Succeeded", deleting: true, ours: true, other: true, ann: OperationMigrate,
			want: outcome{op: "Migrate Succeeded", written: true}},
		// The annotation would be removed after the finalizers, from an object gone by then:
		// nothing is left to do, and no retry follows.
		{name: "entry/created/deleted with migrate, last finalizer", last: "Create Succeeded", deleting: true, ours: true, ann: OperationMigrate,
			want: outcome{gone: true}},
		// Housekeeper purges with the bucket's credentials: a missing secret does not skip the
		// cleanup (upstream skips it, gardener#2557).
		{name: "entry/created/deleted, secret gone", last: "Create Succeeded", deleting: true, ours: true, noSecret: true,
			want: outcome{call: del, gone: true}},
		{name: "bucket/created/deleted", bucket: true, last: "Create Succeeded", deleting: true, ours: true,
			want: outcome{call: del, gone: true}},
		{name: "bucket/created/delete waits for entries", bucket: true, last: "Create Succeeded", deleting: true, ours: true, pending: "waiting for 2 BackupEntries",
			want: outcome{call: del, op: "Delete Pending", written: true, finalizer: true, secretFinalizer: true}},
		{name: "bucket/created/deleted with migrate", bucket: true, last: "Create Succeeded", deleting: true, ours: true, ann: OperationMigrate,
			want: outcome{call: del, gone: true}},
		{name: "bucket/deleted/never ours", bucket: true, deleting: true, other: true, want: outcome{}},

		// --- Actuator errors: recorded as lastError with the operation's type and state Error,
		// progress 50, the error's codes; the finalizers stay.
		{name: "entry/new/actuator fails", reconcileErr: errRetryable,
			want: outcome{call: reconcile, op: "Create Error", written: true, codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorRetryableInfraDependencies},
				finalizer: true, secretFinalizer: true, err: runner.ClassRetryable}},
		{name: "entry/created/reconcile, actuator fails permanently", last: "Create Succeeded", ours: true, ann: OperationReconcile, reconcileErr: errPermanent,
			want: outcome{call: reconcile, op: "Reconcile Error", written: true, codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorInfraUnauthenticated},
				finalizer: true, secretFinalizer: true, err: runner.ClassPermanent}},
		{name: "entry/created/converged, actuator fails", last: "Create Succeeded", ours: true, reconcileErr: errPlain,
			want: outcome{call: reconcile, op: "Reconcile Error", written: true, finalizer: true, secretFinalizer: true, err: runner.ClassRetryable}},
		// The restore annotation goes only after Succeeded is written.
		{name: "entry/migrated/restore, actuator fails", last: "Migrate Succeeded", ann: OperationRestore, reconcileErr: errRetryable,
			want: outcome{call: reconcile, op: "Restore Error", written: true, codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorRetryableInfraDependencies},
				finalizer: true, secretFinalizer: true, annKept: true, err: runner.ClassRetryable}},
		{name: "entry/restore failed/actuator fails again", last: "Restore Error", ours: true, reconcileErr: errRetryable,
			want: outcome{call: reconcile, op: "Restore Error", written: true, codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorRetryableInfraDependencies},
				finalizer: true, secretFinalizer: true, err: runner.ClassRetryable}},
		{name: "entry/created/delete, actuator fails", last: "Create Succeeded", deleting: true, ours: true, deleteErr: errRetryable,
			want: outcome{call: del, op: "Delete Error", written: true, codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorRetryableInfraDependencies},
				finalizer: true, secretFinalizer: true, err: runner.ClassRetryable}},
		// The object changed under the actuator (released and re-created meanwhile): nothing
		// written to the copy, read again by the retry.
		{name: "entry/delete pending/the object changed meanwhile", last: "Delete Pending", deleting: true, ours: true, deleteErr: fmt.Errorf("%w: re-created", ErrObjectChanged),
			want: outcome{call: del, op: "Delete Pending", finalizer: true, secretFinalizer: true, err: runner.ClassRetryable}},
		{name: "entry/delete pending/actuator fails", last: "Delete Pending", deleting: true, ours: true, deleteErr: errPlain,
			want: outcome{call: del, op: "Delete Error", written: true, finalizer: true, secretFinalizer: true, err: runner.ClassRetryable}},
		{name: "bucket/new/actuator fails", bucket: true, reconcileErr: errPlain,
			want: outcome{call: reconcile, op: "Create Error", written: true, finalizer: true, secretFinalizer: true, err: runner.ClassRetryable}},
		{name: "bucket/created/delete, actuator fails permanently", bucket: true, last: "Create Succeeded", deleting: true, ours: true, deleteErr: errPermanent,
			want: outcome{call: del, op: "Delete Error", written: true, codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorInfraUnauthenticated},
				finalizer: true, secretFinalizer: true, err: runner.ClassPermanent}},
		// A missing spec.secretRef secret: no provider work, a configuration problem that waits
		// for the secret; the object's finalizer is already there.
		{name: "entry/new/secret missing", noSecret: true,
			want: outcome{op: "Create Error", written: true, codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorConfigurationProblem},
				finalizer: true, err: runner.ClassWaiting}},
		{name: "bucket/created/reconcile, secret missing", bucket: true, last: "Create Succeeded", ours: true, noSecret: true, ann: OperationReconcile,
			want: outcome{op: "Reconcile Error", written: true, codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorConfigurationProblem},
				finalizer: true, err: runner.ClassWaiting}},

		// --- Handle: events are triggers; the decision is taken on the live object. A new
		// object is claimed (one JSON patch whose tests prove the event's copy).
		{name: "handle/entry/created", event: events.OpCreated,
			want: outcome{claimed: true, call: reconcile, op: "Create Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		{name: "handle/entry/created with reconcile", event: events.OpCreated, ann: OperationReconcile,
			want: outcome{claimed: true, call: reconcile, op: "Create Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		{name: "handle/entry/created with restore", event: events.OpCreated, ann: OperationRestore,
			want: outcome{claimed: true, call: reconcile, op: "Restore Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		{name: "handle/entry/created with wait-for-state", event: events.OpCreated, ann: OperationWaitForState,
			want: outcome{annKept: true}},
		{name: "handle/entry/created with migrate", event: events.OpCreated, ann: OperationMigrate,
			want: outcome{op: "Migrate Succeeded", written: true}},
		// A deleting event is never a claim, whatever its copy says: the live object is read.
		{name: "handle/entry/deleting event with a new object's copy", event: events.OpDeleting,
			want: outcome{call: reconcile, op: "Create Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		{name: "handle/entry/created, outdated copy", event: events.OpCreated, staleCopy: true, last: "Create Succeeded", ours: true,
			want: outcome{call: reconcile, op: "Create Succeeded", finalizer: true, secretFinalizer: true}},
		{name: "handle/entry/created, object gone", event: events.OpCreated, absent: true, want: outcome{gone: true}},
		{name: "handle/entry/created, secret missing", event: events.OpCreated, noSecret: true,
			want: outcome{claimed: true, op: "Create Error", written: true, codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorConfigurationProblem},
				finalizer: true, err: runner.ClassWaiting}},
		{name: "handle/entry/updated, deleting", event: events.OpUpdated, last: "Create Succeeded", deleting: true, ours: true,
			want: outcome{call: del, gone: true}},
		{name: "handle/entry/event of another kind", event: events.OpCreated, eventKind: events.KindBackupBucket,
			want: outcome{err: runner.ClassPermanent}},
		{name: "handle/bucket/created", bucket: true, event: events.OpCreated,
			want: outcome{claimed: true, call: reconcile, op: "Create Succeeded", written: true, finalizer: true, secretFinalizer: true}},
		{name: "handle/bucket/synced, converged", bucket: true, event: events.OpSynced, last: "Create Succeeded", ours: true,
			want: outcome{call: reconcile, op: "Create Succeeded", finalizer: true, secretFinalizer: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t)
		})
	}
}

// decisionsScheme has the types the Reconciler touches.
var decisionsScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := extensionsv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

func (tc decisionRow) kind() events.Kind {
	if tc.bucket {
		return events.KindBackupBucket
	}
	return events.KindBackupEntry
}

func (tc decisionRow) finalizer() string {
	if tc.bucket {
		return decisionsBucketFinalizer
	}
	return decisionsEntryFinalizer
}

// seed is the object before the run.
func (tc decisionRow) seed() extensionsv1alpha1.Object {
	meta := metav1.ObjectMeta{Name: decisionsEntry, UID: decisionsUID, Generation: decisionsGen}
	spec := extensionsv1alpha1.DefaultSpec{Type: "local"}
	if tc.typ != "" {
		spec.Type = tc.typ
	}
	if tc.class != "" {
		spec.Class = &tc.class
	}
	ref := corev1.SecretReference{Namespace: secretNamespace, Name: secretName}
	var obj extensionsv1alpha1.Object
	if tc.bucket {
		meta.Name = decisionsBucket
		obj = &extensionsv1alpha1.BackupBucket{ObjectMeta: meta, Spec: extensionsv1alpha1.BackupBucketSpec{DefaultSpec: spec, Region: "local", SecretRef: ref}}
	} else {
		obj = &extensionsv1alpha1.BackupEntry{ObjectMeta: meta, Spec: extensionsv1alpha1.BackupEntrySpec{DefaultSpec: spec, Region: "local", BucketName: decisionsBucket, SecretRef: ref}}
	}
	if tc.ann != "" {
		obj.SetAnnotations(map[string]string{AnnotationOperation: tc.ann, "example.com/unrelated": "x"})
	}
	var finalizers []string
	if tc.other {
		finalizers = append(finalizers, otherFinalizer)
	}
	if tc.ours {
		finalizers = append(finalizers, tc.finalizer())
	}
	obj.SetFinalizers(finalizers)
	if tc.deleting {
		obj.SetDeletionTimestamp(&metav1.Time{Time: seededAt})
	}
	if tc.last != "" {
		typ, state, _ := strings.Cut(tc.last, " ")
		status := obj.GetExtensionStatus()
		description := tc.lastDesc
		if description == "" {
			description = seededDescription(tc.kind(), gardencorev1beta1.LastOperationType(typ), gardencorev1beta1.LastOperationState(state))
		}
		status.SetLastOperation(&gardencorev1beta1.LastOperation{
			Type: gardencorev1beta1.LastOperationType(typ), State: gardencorev1beta1.LastOperationState(state),
			Progress: seededProgress[gardencorev1beta1.LastOperationState(state)], Description: description, LastUpdateTime: metav1.Time{Time: seededAt},
		})
		if state == string(gardencorev1beta1.LastOperationStateError) {
			status.SetLastError(&gardencorev1beta1.LastError{Description: description, LastUpdateTime: &metav1.Time{Time: seededAt}})
		}
		observed := int64(decisionsGen)
		if tc.stale {
			observed--
		}
		status.SetObservedGeneration(observed)
	}
	return obj
}

// seededProgress and seededDescription are what the Reconciler wrote for an outcome before.
var seededProgress = map[gardencorev1beta1.LastOperationState]int32{
	gardencorev1beta1.LastOperationStateSucceeded: 100, gardencorev1beta1.LastOperationStateError: 50, gardencorev1beta1.LastOperationStatePending: 1,
}

func seededDescription(kind events.Kind, t gardencorev1beta1.LastOperationType, state gardencorev1beta1.LastOperationState) string {
	switch state {
	case gardencorev1beta1.LastOperationStateSucceeded:
		verb := map[gardencorev1beta1.LastOperationType]string{"Create": "created", "Restore": "restored", "Migrate": "migrated"}[t]
		if verb == "" {
			verb = "reconciled"
		}
		return string(kind) + " " + verb
	case gardencorev1beta1.LastOperationStatePending:
		return "purge scheduled"
	}
	return "earlier failure"
}

func (tc decisionRow) run(t *testing.T) {
	if tc.bucket {
		runDecision(t, tc, func() *extensionsv1alpha1.BackupBucket { return &extensionsv1alpha1.BackupBucket{} },
			func(b *extensionsv1alpha1.BackupBucket) corev1.SecretReference { return b.Spec.SecretRef })
		return
	}
	runDecision(t, tc, func() *extensionsv1alpha1.BackupEntry { return &extensionsv1alpha1.BackupEntry{} },
		func(e *extensionsv1alpha1.BackupEntry) corev1.SecretReference { return e.Spec.SecretRef })
}

// runDecision runs the row against the Reconciler of T, a BackupBucket or a BackupEntry.
func runDecision[T extensionsv1alpha1.Object](t *testing.T, tc decisionRow, newObject func() T, secretRef func(T) corev1.SecretReference) {
	ctx := context.Background()
	seeded := tc.seed()
	claims := 0
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: secretName},
		Data:       map[string][]byte{"storageAccount": []byte("account"), "storageKey": []byte("key")},
	}
	if tc.ours {
		secret.Finalizers = []string{tc.finalizer()}
	}
	builder := fake.NewClientBuilder().WithScheme(decisionsScheme).
		WithStatusSubresource(&extensionsv1alpha1.BackupBucket{}, &extensionsv1alpha1.BackupEntry{}).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			err := apiServerJSONPatch(ctx, c, obj, patch, opts...)
			if err == nil && patch.Type() == types.JSONPatchType {
				claims++
			}
			return err
		}})
	if !tc.absent {
		builder = builder.WithObjects(seeded)
	}
	if !tc.noSecret {
		builder = builder.WithObjects(secret)
	}
	c := builder.Build()

	act := &recordingActuator[T]{client: c, newObject: newObject, finalizer: tc.finalizer(), name: seeded.GetName(),
		reconciliation: Reconciliation{Description: tc.reconcileDesc}, reconcileErr: tc.reconcileErr,
		deletion: Deletion{Pending: tc.pending != "", Description: tc.pending}, deleteErr: tc.deleteErr}
	r := &Reconciler[T]{
		StatusWriter: StatusWriter[T]{
			Client:    c,
			Kind:      tc.kind(),
			SecretRef: secretRef,
			Finalizer: tc.finalizer(),
			Log:       zap.NewNop(),
			Now:       func() time.Time { return runAt },
		},
		Scope:     Scope{Types: []string{"local"}, Classes: []string{"shoot"}},
		NewObject: newObject,
		Migrates:  !tc.bucket,
		Actuator:  act,
	}

	before := newObject()
	if tc.absent {
		before = seeded.(T)
		before.SetResourceVersion("7")
	} else if err := c.Get(ctx, client.ObjectKey{Name: seeded.GetName()}, before); err != nil {
		t.Fatal(err)
	}

	var err error
	if tc.event == "" {
		err = r.Reconcile(ctx, before.DeepCopyObject().(T))
	} else {
		err = r.Handle(ctx, tc.newEvent(t, before))
	}

	w := tc.want
	// The error's class.
	if got := errorClass(err); got != w.err {
		t.Errorf("error %v (class %q), want class %q", err, got, w.err)
	}
	if claimed := claims == 1; claimed != w.claimed || claims > 1 {
		t.Errorf("claimed %d times, want %t", claims, w.claimed)
	}
	// The actuator.
	if got := strings.Join(act.calls, ","); got != w.call {
		t.Errorf("actuator calls %q, want %q", got, w.call)
	}
	if w.call == "Reconcile" && len(act.calls) == 1 {
		if act.unguarded != "" {
			t.Errorf("provider work began before the finalizers were in place: %s", act.unguarded)
		}
		if string(act.credentials["storageKey"]) != "key" {
			t.Errorf("actuator got credentials %v, want the data of spec.secretRef", act.credentials)
		}
	}
	// The secret's finalizer.
	liveSecret := &corev1.Secret{}
	switch err := c.Get(ctx, client.ObjectKeyFromObject(secret), liveSecret); {
	case apierrors.IsNotFound(err):
		if w.secretFinalizer {
			t.Error("no secret, want it with our finalizer")
		}
	case err != nil:
		t.Fatal(err)
	default:
		if got := controllerutil.ContainsFinalizer(liveSecret, tc.finalizer()); got != w.secretFinalizer {
			t.Errorf("finalizer on the secret: %t, want %t", got, w.secretFinalizer)
		}
	}

	// The object.
	after := newObject()
	switch err := c.Get(ctx, client.ObjectKey{Name: seeded.GetName()}, after); {
	case apierrors.IsNotFound(err):
		if !w.gone {
			t.Fatal("the object is gone, want it to stay")
		}
		return
	case err != nil:
		t.Fatal(err)
	case w.gone:
		t.Fatalf("the object is still there (finalizers %v), want it gone", after.GetFinalizers())
	}
	if got := controllerutil.ContainsFinalizer(after, tc.finalizer()); got != w.finalizer {
		t.Errorf("finalizer on the object: %t, want %t", got, w.finalizer)
	}
	if tc.other && !controllerutil.ContainsFinalizer(after, otherFinalizer) {
		t.Error("another controller's finalizer was removed")
	}
	if _, got := after.GetAnnotations()[AnnotationOperation]; got != w.annKept {
		t.Errorf("operation annotation kept: %t, want %t (annotations %v)", got, w.annKept, after.GetAnnotations())
	}
	if tc.ann != "" && after.GetAnnotations()["example.com/unrelated"] != "x" {
		t.Errorf("another annotation was lost: %v", after.GetAnnotations())
	}
	tc.checkStatus(t, before, after)
}

// checkStatus checks lastOperation, lastError and observedGeneration as upstream writes them:
// Succeeded with progress 100 and no lastError, Error with progress 50 and lastError, Pending
// (housekeeper's scheduled deletion) with progress 1; observedGeneration and lastUpdateTime
// set on every write.
func (tc decisionRow) checkStatus(t *testing.T, before, after extensionsv1alpha1.Object) {
	t.Helper()
	w := tc.want
	status := after.GetExtensionStatus()
	last := status.GetLastOperation()
	got := ""
	if last != nil {
		got = string(last.Type) + " " + string(last.State)
	}
	if got != w.op {
		t.Errorf("lastOperation %q, want %q (description %q)", got, w.op, description(last))
	}
	if !w.written {
		if b, a := statusJSON(t, before), statusJSON(t, after); b != a {
			t.Errorf("status written, want it unchanged:\nbefore %s\nafter  %s", b, a)
		}
		if w.desc != "" && description(last) != w.desc {
			t.Errorf("lastOperation description %q, want %q", description(last), w.desc)
		}
		return
	}
	if last == nil {
		return
	}
	if !last.LastUpdateTime.Time.Equal(runAt) {
		t.Errorf("lastOperation.lastUpdateTime %s, want now (%s): not written", last.LastUpdateTime.Time, runAt)
	}
	if status.GetObservedGeneration() != decisionsGen {
		t.Errorf("observedGeneration %d, want %d", status.GetObservedGeneration(), decisionsGen)
	}
	if want := seededProgress[last.State]; last.Progress != want {
		t.Errorf("progress %d for state %s, want %d", last.Progress, last.State, want)
	}
	if w.desc != "" && last.Description != w.desc {
		t.Errorf("lastOperation description %q, want %q", last.Description, w.desc)
	}
	lastError := status.GetLastError()
	switch {
	case last.State != gardencorev1beta1.LastOperationStateError && lastError != nil:
		t.Errorf("lastError %q with state %s, want none", lastError.Description, last.State)
	case last.State == gardencorev1beta1.LastOperationStateError && lastError == nil:
		t.Error("state Error without lastError")
	case lastError != nil:
		if !slices.Equal(lastError.Codes, w.codes) {
			t.Errorf("lastError codes %v, want %v", lastError.Codes, w.codes)
		}
		if cause := tc.failure(); !strings.Contains(lastError.Description, cause) || last.Description != lastError.Description {
			t.Errorf("lastError %q, lastOperation %q, want both to say %q", lastError.Description, last.Description, cause)
		}
		if lastError.LastUpdateTime == nil || !lastError.LastUpdateTime.Time.Equal(runAt) {
			t.Errorf("lastError.lastUpdateTime %v, want now", lastError.LastUpdateTime)
		}
	}
}

// failure is what the lastError of a failed run must say.
func (tc decisionRow) failure() string {
	switch {
	case tc.deleting && tc.deleteErr != nil:
		return tc.deleteErr.Error()
	case tc.noSecret:
		return fmt.Sprintf("secret %s/%s referenced by spec.secretRef does not exist", secretNamespace, secretName)
	case tc.reconcileErr != nil:
		return tc.reconcileErr.Error()
	}
	return "<no failure expected>"
}

func (tc decisionRow) newEvent(t *testing.T, live extensionsv1alpha1.Object) cloudevents.Event {
	t.Helper()
	copied := live.DeepCopyObject().(extensionsv1alpha1.Object)
	if tc.staleCopy { // as the object was before it was claimed
		copied = tc.seed()
		copied.SetFinalizers(nil)
		copied.GetExtensionStatus().SetLastOperation(nil)
		copied.GetExtensionStatus().SetObservedGeneration(0)
		copied.SetResourceVersion("1")
	}
	kind := tc.kind()
	if tc.eventKind != "" {
		kind = tc.eventKind
	}
	data, err := json.Marshal(copied)
	if err != nil {
		t.Fatal(err)
	}
	e, err := events.NewObjectEvent("seed-a", tc.event, events.Ref{Kind: kind, Name: copied.GetName(), UID: string(copied.GetUID()),
		ResourceVersion: copied.GetResourceVersion(), Generation: copied.GetGeneration()}, data)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func description(last *gardencorev1beta1.LastOperation) string {
	if last == nil {
		return ""
	}
	return last.Description
}

func statusJSON(t *testing.T, obj extensionsv1alpha1.Object) string {
	t.Helper()
	raw, err := json.Marshal(obj.GetExtensionStatus())
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func errorClass(err error) runner.Class {
	if err == nil {
		return ""
	}
	return runner.ClassOf(err)
}

// recordingActuator answers as told and records what it was asked; on Reconcile it checks that
// the object and its secret carry our finalizer already, as the contract requires before any
// provider work.
type recordingActuator[T extensionsv1alpha1.Object] struct {
	client    client.Client
	newObject func() T
	finalizer string
	name      string

	reconciliation Reconciliation
	reconcileErr   error
	deletion       Deletion
	deleteErr      error

	calls       []string
	credentials map[string][]byte
	unguarded   string
}

func (a *recordingActuator[T]) Reconcile(ctx context.Context, _ T, credentials *corev1.Secret) (Reconciliation, error) {
	a.calls = append(a.calls, "Reconcile")
	a.credentials = credentials.Data
	live := a.newObject()
	if err := a.client.Get(ctx, client.ObjectKey{Name: a.name}, live); err != nil || !controllerutil.ContainsFinalizer(live, a.finalizer) {
		a.unguarded = fmt.Sprintf("object without our finalizer (%v)", err)
	}
	secret := &corev1.Secret{}
	if err := a.client.Get(ctx, client.ObjectKey{Namespace: secretNamespace, Name: secretName}, secret); err != nil || !controllerutil.ContainsFinalizer(secret, a.finalizer) {
		a.unguarded = fmt.Sprintf("secret without our finalizer (%v)", err)
	}
	return a.reconciliation, a.reconcileErr
}

func (a *recordingActuator[T]) Delete(context.Context, T) (Deletion, error) {
	a.calls = append(a.calls, "Delete")
	return a.deletion, a.deleteErr
}

// apiServerJSONPatch applies a JSON patch (the claim) as an API server does where the fake
// client differs: a custom resource whose status was never written has no status member
// (the fake renders a zero struct, which a test against null would fail), and a patch whose
// test fails is rejected with 422 Invalid (the fake returns a plain error).
func apiServerJSONPatch(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if patch.Type() != types.JSONPatchType {
		return c.Patch(ctx, obj, patch, opts...)
	}
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	live := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
		return err
	}
	zero := reflect.New(reflect.TypeOf(obj).Elem()).Interface()
	if liveStatus, zeroStatus := jsonMember(live, "status"), jsonMember(zero, "status"); reflect.DeepEqual(liveStatus, zeroStatus) {
		var ops []map[string]any
		if err := json.Unmarshal(data, &ops); err != nil {
			return err
		}
		for _, op := range ops {
			if op["op"] == "test" && op["path"] == "/status" && op["value"] == nil {
				op["value"] = liveStatus
			}
		}
		if data, err = json.Marshal(ops); err != nil {
			return err
		}
	}
	err = c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, data), opts...)
	var status apierrors.APIStatus
	if err != nil && !errors.As(err, &status) {
		return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", schema.GroupResource{}, obj.GetName(), err.Error(), 0, false)
	}
	return err
}

func jsonMember(obj any, member string) any {
	raw, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		panic(err)
	}
	return m[member]
}
