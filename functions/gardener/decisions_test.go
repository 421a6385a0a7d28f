package gardener

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/runtime"
)

// The decisions of the protocol, without an API server: operation annotation × deletion ×
// last operation × migration, for the kind that migrates (BackupEntry) and the one that does
// not (BackupBucket). Expectations follow Gardener's extension contract (upstream-facts.md and
// gardener's extension library): migrate wins over delete, delete over restore; a migrated
// object is left alone except by Migrate and Restore; a reconcile annotation is removed before
// the work and a restore annotation after it; wait-for-state does nothing.

const (
	testFinalizer    = "extensions.gardener.cloud/test"
	otherFinalizer   = "example.com/another-controller"
	secretName       = "backup-credentials"
	secretNamespace  = "garden"
	decisionsObjName = "obj"
)

// recordingActuator records which of its methods ran and answers as told.
type recordingActuator struct {
	calls        []string
	reconcileErr error
	deletion     Deletion
	deleteErr    error
}

func (a *recordingActuator) Reconcile(_ context.Context, _ extensionsv1alpha1.Object, credentials map[string][]byte) (Reconciliation, error) {
	a.calls = append(a.calls, "reconcile")
	if string(credentials["key"]) != "value" {
		return Reconciliation{}, errors.New("reconciled without the secret's data")
	}
	return Reconciliation{}, a.reconcileErr
}

func (a *recordingActuator) Delete(context.Context, extensionsv1alpha1.Object) (Deletion, error) {
	a.calls = append(a.calls, "delete")
	return a.deletion, a.deleteErr
}

type decisionRow struct {
	name string
	// the object before
	bucket     bool // a BackupBucket (does not migrate); else a BackupEntry
	annotation string
	deleting   bool
	ours       bool // our finalizer is on it already
	last       *gardencorev1beta1.LastOperation
	noSecret   bool
	actuator   recordingActuator
	// what must follow
	calls          []string // the actuator methods that ran
	gone           bool     // the object was released while being deleted
	wantType       gardencorev1beta1.LastOperationType
	wantState      gardencorev1beta1.LastOperationState // "" with wantType "": status untouched
	wantOurs       bool                                 // our finalizer on the object afterwards
	wantSecretOurs bool                                 // … and on its secret
	wantAnnotation bool                                 // the operation annotation is still there
	wantClass      runtime.Class                        // of the returned error; "" for none
	wantTask       string                               // lastError.taskID
}

func lastOp(t gardencorev1beta1.LastOperationType, s gardencorev1beta1.LastOperationState) *gardencorev1beta1.LastOperation {
	return &gardencorev1beta1.LastOperation{Type: t, State: s, Description: "before", LastUpdateTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
}

const (
	tCreate    = gardencorev1beta1.LastOperationTypeCreate
	tReconcile = gardencorev1beta1.LastOperationTypeReconcile
	tDelete    = gardencorev1beta1.LastOperationTypeDelete
	tMigrate   = gardencorev1beta1.LastOperationTypeMigrate
	tRestore   = gardencorev1beta1.LastOperationTypeRestore
	sSucceeded = gardencorev1beta1.LastOperationStateSucceeded
	sError     = gardencorev1beta1.LastOperationStateError
	sPending   = gardencorev1beta1.LastOperationStatePending
)

var decisionRows = []decisionRow{
	// Creation and reconciliation.
	{name: "new object is created", calls: []string{"reconcile"},
		wantType: tCreate, wantState: sSucceeded, wantOurs: true, wantSecretOurs: true},
	{name: "unfinished create stays a create", last: lastOp(tCreate, sError), ours: true, calls: []string{"reconcile"},
		wantType: tCreate, wantState: sSucceeded, wantOurs: true, wantSecretOurs: true},
	{name: "reconcile annotation is removed and reconciled", annotation: OperationReconcile, ours: true, last: lastOp(tCreate, sSucceeded),
		calls: []string{"reconcile"}, wantType: tReconcile, wantState: sSucceeded, wantOurs: true, wantSecretOurs: true},
	{name: "failed reconcile is retried as reconcile", last: lastOp(tReconcile, sError), ours: true,
		calls: []string{"reconcile"}, wantType: tReconcile, wantState: sSucceeded, wantOurs: true, wantSecretOurs: true},
	{name: "actuator error is recorded, finalizer kept", last: lastOp(tCreate, sSucceeded), ours: true,
		actuator: recordingActuator{reconcileErr: runtime.Retryable(errors.New("store unavailable"))},
		calls:    []string{"reconcile"}, wantType: tReconcile, wantState: sError, wantOurs: true, wantSecretOurs: true, wantClass: runtime.ClassRetryable},
	{name: "missing secret waits without the actuator", noSecret: true,
		wantType: tCreate, wantState: sError, wantOurs: true, wantClass: runtime.ClassWaiting, wantTask: TaskWaitForSecret},
	{name: "wait-for-state does nothing", annotation: OperationWaitForState, last: lastOp(tCreate, sSucceeded), ours: true,
		wantOurs: true, wantSecretOurs: true, wantAnnotation: true},
	// Restore.
	{name: "restore annotation restores and is removed after", annotation: OperationRestore,
		calls: []string{"reconcile"}, wantType: tRestore, wantState: sSucceeded, wantOurs: true, wantSecretOurs: true},
	{name: "restore after a migration is done here", annotation: OperationRestore, last: lastOp(tMigrate, sSucceeded),
		calls: []string{"reconcile"}, wantType: tRestore, wantState: sSucceeded, wantOurs: true, wantSecretOurs: true},
	// Deletion.
	{name: "deletion cleans up and releases", deleting: true, ours: true, last: lastOp(tCreate, sSucceeded),
		calls: []string{"delete"}, gone: true},
	{name: "pending deletion keeps the finalizer", deleting: true, ours: true, last: lastOp(tCreate, sSucceeded),
		actuator: recordingActuator{deletion: Deletion{Pending: true, Description: "purge at noon"}},
		calls:    []string{"delete"}, wantType: tDelete, wantState: sPending, wantOurs: true, wantSecretOurs: true},
	{name: "failed deletion is recorded, finalizer kept", deleting: true, ours: true, last: lastOp(tCreate, sSucceeded),
		actuator: recordingActuator{deleteErr: runtime.Permanent(errors.New("object locked"))},
		calls:    []string{"delete"}, wantType: tDelete, wantState: sError, wantOurs: true, wantSecretOurs: true, wantClass: runtime.ClassPermanent},
	{name: "deletion of an object never ours does nothing", deleting: true, last: lastOp(tCreate, sSucceeded)},
	{name: "deletion wins over restore", deleting: true, ours: true, annotation: OperationRestore, last: lastOp(tCreate, sSucceeded),
		calls: []string{"delete"}, gone: true},
	// Migration (BackupEntry).
	{name: "migrate releases without cleanup", annotation: OperationMigrate, ours: true, last: lastOp(tReconcile, sSucceeded),
		wantType: tMigrate, wantState: sSucceeded},
	{name: "migrate wins over deletion", annotation: OperationMigrate, deleting: true, ours: true, last: lastOp(tReconcile, sSucceeded),
		gone: true},
	{name: "migrated away is left alone", last: lastOp(tMigrate, sSucceeded)},
	{name: "migrated away and deleted is released without cleanup", deleting: true, ours: true, last: lastOp(tMigrate, sSucceeded),
		gone: true},
	{name: "reconcile annotation on a migrated object changes nothing", annotation: OperationReconcile, last: lastOp(tMigrate, sSucceeded),
		wantAnnotation: true},
	// A kind that does not migrate (BackupBucket): migrate is just another change.
	{name: "bucket: migrate annotation is reconciled", bucket: true, annotation: OperationMigrate, ours: true, last: lastOp(tCreate, sSucceeded),
		calls: []string{"reconcile"}, wantType: tReconcile, wantState: sSucceeded, wantOurs: true, wantSecretOurs: true, wantAnnotation: true},
	{name: "bucket: migrate annotation while deleting deletes", bucket: true, annotation: OperationMigrate, deleting: true, ours: true,
		last: lastOp(tCreate, sSucceeded), calls: []string{"delete"}, gone: true},
	{name: "bucket: a Migrate last operation is no reason to stop", bucket: true, last: lastOp(tMigrate, sSucceeded),
		calls: []string{"reconcile"}, wantType: tReconcile, wantState: sSucceeded, wantOurs: true, wantSecretOurs: true},
}

func TestDecisions(t *testing.T) {
	for _, row := range decisionRows {
		t.Run(row.name, func(t *testing.T) {
			ctx := context.Background()
			obj := row.object()
			objs := []client.Object{obj}
			if !row.noSecret {
				secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: secretName}, Data: map[string][]byte{"key": []byte("value")}}
				if row.ours {
					secret.Finalizers = []string{testFinalizer}
				}
				objs = append(objs, secret)
			}
			c := fake.NewClientBuilder().WithScheme(kube.Scheme).WithObjects(objs...).
				WithStatusSubresource(&extensionsv1alpha1.BackupEntry{}, &extensionsv1alpha1.BackupBucket{}).Build()
			act := row.actuator
			r := row.reconciler(c, &act)

			live := r.NewObject()
			if err := c.Get(ctx, client.ObjectKey{Name: decisionsObjName}, live); err != nil {
				t.Fatal(err)
			}
			before := live.DeepCopyObject().(extensionsv1alpha1.Object)
			err := r.Reconcile(ctx, live)

			switch {
			case row.wantClass == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case row.wantClass != "" && (err == nil || runtime.ClassOf(err) != row.wantClass):
				t.Errorf("error %v (%s), want a %s one", err, runtime.ClassOf(err), row.wantClass)
			}
			if !slices.Equal(act.calls, row.calls) {
				t.Errorf("actuator calls %v, want %v", act.calls, row.calls)
			}

			after := r.NewObject()
			err = c.Get(ctx, client.ObjectKey{Name: decisionsObjName}, after)
			if row.gone {
				if !apierrors.IsNotFound(err) {
					t.Errorf("the object is still there (finalizers %v), want it released and gone", after.GetFinalizers())
				}
				row.checkSecret(t, c, false)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(after.GetFinalizers(), testFinalizer); got != row.wantOurs {
				t.Errorf("our finalizer on the object: %v, want %v (finalizers %v)", got, row.wantOurs, after.GetFinalizers())
			}
			if row.deleting && !slices.Contains(after.GetFinalizers(), otherFinalizer) {
				t.Errorf("another controller's finalizer is gone: %v", after.GetFinalizers())
			}
			if _, got := after.GetAnnotations()[AnnotationOperation]; got != row.wantAnnotation {
				t.Errorf("operation annotation present: %v, want %v", got, row.wantAnnotation)
			}
			row.checkSecret(t, c, row.wantSecretOurs)
			row.checkStatus(t, before, after)
		})
	}
}

func (row decisionRow) object() extensionsv1alpha1.Object {
	meta := metav1.ObjectMeta{Name: decisionsObjName, Generation: 1, Annotations: map[string]string{}}
	if row.annotation != "" {
		meta.Annotations[AnnotationOperation] = row.annotation
	}
	if row.ours {
		meta.Finalizers = append(meta.Finalizers, testFinalizer)
	}
	if row.deleting {
		// Another controller's finalizer keeps a deleting object there whatever we do with ours.
		now := metav1.Now()
		meta.DeletionTimestamp = &now
		meta.Finalizers = append(meta.Finalizers, otherFinalizer)
		if row.gone {
			meta.Finalizers = slices.DeleteFunc(meta.Finalizers, func(f string) bool { return f == otherFinalizer })
		}
	}
	status := extensionsv1alpha1.DefaultStatus{LastOperation: row.last}
	ref := corev1.SecretReference{Namespace: secretNamespace, Name: secretName}
	if row.bucket {
		return &extensionsv1alpha1.BackupBucket{ObjectMeta: meta, Spec: extensionsv1alpha1.BackupBucketSpec{SecretRef: ref},
			Status: extensionsv1alpha1.BackupBucketStatus{DefaultStatus: status}}
	}
	return &extensionsv1alpha1.BackupEntry{ObjectMeta: meta, Spec: extensionsv1alpha1.BackupEntrySpec{SecretRef: ref},
		Status: extensionsv1alpha1.BackupEntryStatus{DefaultStatus: status}}
}

func (row decisionRow) reconciler(c client.Client, a Actuator) *Reconciler {
	r := &Reconciler{StatusWriter: StatusWriter{Client: c, Finalizer: testFinalizer, Log: zap.NewNop(),
		Now: func() time.Time { return time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC) }}, Actuator: a}
	if row.bucket {
		r.Kind, r.NewObject = events.KindBackupBucket, func() extensionsv1alpha1.Object { return &extensionsv1alpha1.BackupBucket{} }
		r.SecretRef = func(o extensionsv1alpha1.Object) corev1.SecretReference {
			return o.(*extensionsv1alpha1.BackupBucket).Spec.SecretRef
		}
	} else {
		r.Kind, r.NewObject, r.Migrates = events.KindBackupEntry, func() extensionsv1alpha1.Object { return &extensionsv1alpha1.BackupEntry{} }, true
		r.SecretRef = func(o extensionsv1alpha1.Object) corev1.SecretReference {
			return o.(*extensionsv1alpha1.BackupEntry).Spec.SecretRef
		}
	}
	return r
}

func (row decisionRow) checkSecret(t *testing.T, c client.Client, want bool) {
	t.Helper()
	if row.noSecret {
		return
	}
	secret := &corev1.Secret{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: secretNamespace, Name: secretName}, secret); err != nil {
		t.Fatal(err)
	}
	if got := slices.Contains(secret.Finalizers, testFinalizer); got != want {
		t.Errorf("our finalizer on the secret: %v, want %v", got, want)
	}
}

func (row decisionRow) checkStatus(t *testing.T, before, after extensionsv1alpha1.Object) {
	t.Helper()
	last := after.GetExtensionStatus().GetLastOperation()
	if row.wantType == "" {
		if !equalLastOp(before.GetExtensionStatus().GetLastOperation(), last) {
			t.Errorf("lastOperation changed to %+v, want it untouched", last)
		}
		return
	}
	if last == nil || last.Type != row.wantType || last.State != row.wantState {
		t.Fatalf("lastOperation %+v, want %s/%s", last, row.wantType, row.wantState)
	}
	lastError := after.GetExtensionStatus().GetLastError()
	switch {
	case row.wantState == sError && (lastError == nil || lastError.Description == ""):
		t.Errorf("state Error without a lastError: %+v", lastError)
	case row.wantState != sError && lastError != nil:
		t.Errorf("state %s with lastError %+v", row.wantState, lastError)
	}
	if row.wantTask != "" && (lastError == nil || lastError.TaskID == nil || *lastError.TaskID != row.wantTask) {
		t.Errorf("lastError %+v, want task %s", lastError, row.wantTask)
	}
	if row.wantState == sSucceeded && after.GetExtensionStatus().GetObservedGeneration() != after.GetGeneration() {
		t.Errorf("observedGeneration %d, generation %d", after.GetExtensionStatus().GetObservedGeneration(), after.GetGeneration())
	}
}

func equalLastOp(a, b *gardencorev1beta1.LastOperation) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Type == b.Type && a.State == b.State && a.Description == b.Description && a.LastUpdateTime.Equal(&b.LastUpdateTime)
}
