package bucket_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The decisions of the bucket Actuator, row by row, over the fake API server and a bucket in
// memory: whether the bucket is created (or taken as it is), what the generated secret holds
// and where it goes, when a deletion waits, and how each object-store answer is classified
// (runner.ClassOf, and the Gardener codes lastError gets). The generic protocol around the
// actuator (finalizers, lastOperation, annotations) is functions/gardener's decision table; the
// real stores are the real-stack tests' (bucket_test.go, immutability_test.go, provision_test.go).

const (
	fastBucket = "seed-1"
	fastCreds  = "bucket-creds"
	// The generated secret's default place.
	fastGenerated = "garden/" + bucket.GeneratedSecretPrefix + fastBucket
	rotate        = "example.com/rotate-key" // an annotation the provisioner consumes
)

var memCreds = map[string][]byte{"accessKey": []byte("a"), "secretKey": []byte("s")}

type bucketRow struct {
	name string

	// The world before the run.
	typ         string            // "" the mem provider; "local", "azure": a real provider's keys; "provisioner"; "gcp": no provider
	creds       map[string][]byte // the credentials secret's data; nil: memCreds
	noCreds     bool              // no credentials secret
	nsAnno      string            // the generated-secret-namespace annotation
	published   string            // the generated secret at fastGenerated: "" none, "same" (as it would be written), "stale"
	statusRef   bool              // status.generatedSecretRef names fastGenerated
	exists      bool              // the bucket exists (adopted)
	config      string            // spec.providerConfig
	configure   bool              // the store takes settings (CreateWithConfig)
	note        string            // what CreateWithConfig says
	entries     []string          // BackupEntries: "name bucket", or "name bucket deleting"
	annotations map[string]string // the bucket's

	// What the store and the provider answer.
	openErr, createErr, deleteErr, dataErr, provisionErr error

	delete bool // Delete, else Reconcile
	want   bucketWant
}

type bucketWant struct {
	err        runner.Class
	codes      []gardencorev1beta1.ErrorCode
	retryAfter bool     // the error says when to retry
	says       string   // in the error, or else in the description
	calls      []string // the bucket's calls
	writes     []string
	generated  []string // the generated secret's keys at its place afterwards; nil: none there
	at         string   // where the generated secret is, if not fastGenerated
	ref        string   // status.generatedSecretRef afterwards, "namespace/name"; "" none
	anno       []string // the bucket's annotations afterwards
}

func TestBucketDecisions(t *testing.T) {
	var (
		status       = "status BackupBucket " + fastBucket
		create       = "create Secret " + fastGenerated
		patch        = "patch Secret " + fastGenerated
		del          = "delete Secret " + fastGenerated
		memKeys      = []string{"accessKey", "secretKey"}
		conf         = []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorConfigurationProblem}
		infra        = []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorRetryableInfraDependencies}
		unauthn      = []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorInfraUnauthenticated}
		throttled    = []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorInfraRateLimitsExceeded}
		azureCreds   = map[string][]byte{azure.KeyStorageAccount: []byte("acct"), azure.KeyStorageKey: []byte("a2V5"), azure.KeyDomain: []byte("blob.core.windows.net")}
		inAnnotation = "shoot-backups/" + bucket.GeneratedSecretPrefix + fastBucket
	)
	for _, tc := range []bucketRow{
		// --- Reconcile: the bucket, then the generated secret, then the status that names it.
		{name: "new: created, secret written, status names it", want: bucketWant{calls: []string{"Create"},
			writes: []string{create, status}, generated: memKeys, ref: fastGenerated}},
		{name: "adopted: an existing bucket and secret as they are: nothing written", exists: true, published: "same", statusRef: true,
			want: bucketWant{calls: []string{"Create"}, generated: memKeys, ref: fastGenerated}},
		{name: "stale generated secret: patched", published: "stale", statusRef: true,
			want: bucketWant{calls: []string{"Create"}, writes: []string{patch}, generated: memKeys, ref: fastGenerated}},
		{name: "status names no secret yet: recorded", published: "same",
			want: bucketWant{calls: []string{"Create"}, writes: []string{status}, generated: memKeys, ref: fastGenerated}},
		{name: "namespace annotation: the secret goes there", nsAnno: "shoot-backups", want: bucketWant{calls: []string{"Create"},
			writes: []string{"create Secret " + inAnnotation, status}, generated: memKeys, at: inAnnotation, ref: inAnnotation}},
		{name: "namespace annotation changed: written there, the status follows", nsAnno: "shoot-backups", published: "same", statusRef: true,
			want: bucketWant{calls: []string{"Create"}, writes: []string{"create Secret " + inAnnotation, status}, generated: memKeys, at: inAnnotation, ref: inAnnotation}},
		{name: "namespace annotation naming no namespace: a configuration problem", nsAnno: "nowhere", want: bucketWant{err: runner.ClassPermanent, codes: conf,
			says: "namespace nowhere for the generated secret does not exist", calls: []string{"Create"}, writes: []string{"create Secret nowhere/" + bucket.GeneratedSecretPrefix + fastBucket}}},
		// The keys etcd-backup-restore reads, as each type's upstream extension generates them.
		{name: "local: keys of provider-local's generated secret", typ: local.Type, creds: map[string][]byte{},
			want: bucketWant{calls: []string{"Create"}, writes: []string{create, status}, generated: []string{}, ref: fastGenerated}},
		{name: "azure: storageAccount, storageKey, domain", typ: azure.Type, creds: azureCreds, want: bucketWant{calls: []string{"Create"}, writes: []string{create, status},
			generated: []string{azure.KeyDomain, azure.KeyStorageAccount, azure.KeyStorageKey}, ref: fastGenerated}},
		// Bad input is permanent until someone corrects it; nothing is written.
		{name: "azure without storageKey: a configuration problem naming it", typ: azure.Type, creds: map[string][]byte{azure.KeyStorageAccount: []byte("acct")},
			want: bucketWant{err: runner.ClassPermanent, codes: conf, says: azure.KeyStorageKey}},
		{name: "type without provider: a configuration problem", typ: "gcp", want: bucketWant{err: runner.ClassPermanent, codes: conf, says: `"gcp"`}},
		{name: "bucket name refused", openErr: objectstore.ErrInvalidBucketName, want: bucketWant{err: runner.ClassPermanent, codes: conf}},
		{name: "wrong key: unauthenticated", createErr: objectstore.ErrUnauthenticated,
			want: bucketWant{err: runner.ClassPermanent, codes: unauthn, says: "creating bucket seed-1", calls: []string{"Create"}}},
		{name: "not allowed: unauthorized", createErr: objectstore.ErrUnauthorized, want: bucketWant{err: runner.ClassPermanent,
			codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorInfraUnauthorized}, calls: []string{"Create"}}},
		{name: "throttled: unavailable", createErr: objectstore.ErrThrottled, want: bucketWant{err: runner.ClassUnavailable,
			codes: throttled, calls: []string{"Create"}}},
		{name: "store fails: retried", createErr: errors.New("connection reset"), want: bucketWant{err: runner.ClassRetryable, codes: infra, calls: []string{"Create"}}},
		{name: "quota exceeded: retried", createErr: objectstore.ErrQuotaExceeded, want: bucketWant{err: runner.ClassRetryable,
			codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorInfraQuotaExceeded}, calls: []string{"Create"}}},
		{name: "credentials not ready: waits", dataErr: objectstore.ErrNotReady, want: bucketWant{err: runner.ClassWaiting, calls: []string{"Create"}}},
		// Settings of the providerConfig (object lock): the store applies them and says what it kept.
		{name: "immutable: created with the providerConfig, its note told", configure: true, config: `{"immutability":{"retentionPeriod":"96h"}}`,
			note: "retention kept at 168h", want: bucketWant{calls: []string{"CreateWithConfig"}, writes: []string{create, status}, generated: memKeys,
				ref: fastGenerated, says: "Bucket reconciled: retention kept at 168h"}},
		{name: "immutable, refused by the store: a configuration problem", configure: true, config: `{"immutability":{}}`, createErr: objectstore.ErrInvalidConfig,
			want: bucketWant{err: runner.ClassPermanent, codes: conf, calls: []string{"CreateWithConfig"}}},
		// Management credentials: provisioned first, the storage credentials open and are published.
		{name: "provisioner: provisioned, storage keys published, consumed annotation removed", typ: "provisioner", published: "stale", statusRef: true,
			annotations: map[string]string{rotate: "true", "keep": "x"}, configure: true, want: bucketWant{calls: []string{"Create"},
				writes: []string{patch, "patch BackupBucket " + fastBucket}, generated: []string{"storageKey"}, ref: fastGenerated, anno: []string{"keep"}, says: "key rotated"}},
		{name: "provisioner fails: retried, nothing published", typ: "provisioner", annotations: map[string]string{rotate: "true"}, provisionErr: errors.New("ARM: 500"),
			want: bucketWant{err: runner.ClassRetryable, codes: infra, says: "provisioning bucket seed-1", anno: []string{rotate}}},

		// --- Delete: not while an entry names the bucket; then the bucket, then its secret.
		{name: "delete: entries use it: waits, naming them", delete: true, published: "same", statusRef: true,
			entries: []string{"shoot--b--2 " + fastBucket + " deleting", "shoot--a--1 " + fastBucket, "shoot--c--3 other"},
			want:    bucketWant{err: runner.ClassWaiting, codes: infra, says: "shoot--a--1, shoot--b--2", generated: memKeys, ref: fastGenerated}},
		{name: "delete: only other buckets' entries: bucket and secret deleted", delete: true, exists: true, published: "same", statusRef: true,
			entries: []string{"shoot--c--3 other"}, want: bucketWant{calls: []string{"Delete"}, writes: []string{del}, ref: fastGenerated}},
		{name: "delete: secret gone already", delete: true, want: bucketWant{calls: []string{"Delete"}, writes: []string{del}}},
		{name: "delete: the status's secret goes, not the annotation's", delete: true, nsAnno: "shoot-backups", published: "same", statusRef: true,
			want: bucketWant{calls: []string{"Delete"}, writes: []string{del}, ref: fastGenerated}},
		{name: "delete: no credentials: waits for them", delete: true, noCreds: true, published: "same",
			want: bucketWant{err: runner.ClassWaiting, codes: conf, says: "garden/" + fastCreds, generated: memKeys}},
		{name: "delete: locked until a date: retried after it, secret kept", delete: true, published: "same",
			deleteErr: &objectstore.LockedError{Bucket: fastBucket, Count: 2, Until: time.Now().Add(time.Hour)},
			want:      bucketWant{err: runner.ClassRetryable, retryAfter: true, codes: infra, calls: []string{"Delete"}, generated: memKeys}},
		{name: "delete: legal hold: a configuration problem, secret kept", delete: true, published: "same",
			deleteErr: &objectstore.LockedError{Bucket: fastBucket, Count: 2},
			want:      bucketWant{err: runner.ClassPermanent, codes: conf, says: "legal hold", calls: []string{"Delete"}, generated: memKeys}},
		{name: "delete: wrong key: secret kept", delete: true, published: "same", deleteErr: objectstore.ErrUnauthenticated,
			want: bucketWant{err: runner.ClassPermanent, codes: unauthn, calls: []string{"Delete"}, generated: memKeys}},
		{name: "delete: throttled: unavailable, secret kept", delete: true, published: "same", deleteErr: objectstore.ErrThrottled,
			want: bucketWant{err: runner.ClassUnavailable, codes: throttled, calls: []string{"Delete"}, generated: memKeys}},
		{name: "delete: provisioner: deprovisioned, secret deleted", delete: true, typ: "provisioner", published: "same", statusRef: true,
			want: bucketWant{writes: []string{del}, ref: fastGenerated}},
		{name: "delete: provisioner fails: secret kept", delete: true, typ: "provisioner", published: "same", provisionErr: errors.New("ARM: 500"),
			want: bucketWant{err: runner.ClassRetryable, codes: infra, says: "deleting bucket seed-1", generated: memKeys}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t) })
	}
}

func (tc bucketRow) run(t *testing.T) {
	ctx := context.Background()
	creds := tc.creds
	if creds == nil {
		creds = memCreds
	}
	mem := &memProvider{typ: memType, bucket: &memBucket{exists: tc.exists, configurable: tc.configure, note: tc.note, createErr: tc.createErr, deleteErr: tc.deleteErr},
		openErr: tc.openErr, dataErr: tc.dataErr}
	if tc.exists {
		mem.bucket.objects = []string{"shoot--a--1/etcd-main/v2/Full"}
	}
	var providers objectstore.Registry
	var pv *provisioner
	switch tc.typ {
	case "":
		providers = objectstore.NewRegistry(mem)
	case local.Type:
		mem.typ = local.Type
		providers = objectstore.NewRegistry(realKeys{mem, local.New(t.TempDir())})
	case azure.Type:
		mem.typ = azure.Type
		providers = objectstore.NewRegistry(realKeys{mem, azure.New()})
	case "provisioner":
		creds = map[string][]byte{"management": []byte("service principal")}
		pv = &provisioner{memProvider: mem, storage: map[string][]byte{"storageKey": []byte("new")}, consumes: []string{rotate},
			description: "key rotated", provisionErr: tc.provisionErr, deprovisionErr: tc.provisionErr}
		providers = objectstore.NewRegistry(pv)
	default:
		providers = objectstore.NewRegistry(mem)
	}
	typ := tc.typ
	if typ == "" || typ == "provisioner" {
		typ = memType
	}

	b := &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: fastBucket, UID: "uid-bucket", Annotations: maps.Clone(tc.annotations)},
		Spec: extensionsv1alpha1.BackupBucketSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: typ}, Region: "region-1",
			SecretRef: corev1.SecretReference{Namespace: "garden", Name: fastCreds}}}
	if tc.config != "" {
		b.Spec.ProviderConfig = &k8sruntime.RawExtension{Raw: []byte(tc.config)}
	}
	if tc.nsAnno != "" {
		metav1.SetMetaDataAnnotation(&b.ObjectMeta, bucket.AnnotationGeneratedSecretNamespace, tc.nsAnno)
	}
	if tc.statusRef {
		b.Status.GeneratedSecretRef = &corev1.SecretReference{Namespace: "garden", Name: bucket.GeneratedSecretPrefix + fastBucket}
	}
	if tc.delete {
		b.Finalizers, b.DeletionTimestamp = []string{bucket.Finalizer}, &metav1.Time{Time: time.Now()}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: fastCreds}, Data: creds}
	objs := []client.Object{b, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot-backups"}}}
	if !tc.noCreds {
		objs = append(objs, secret)
	}
	if tc.published != "" {
		data := map[string][]byte{"accessKey": []byte("a"), "secretKey": []byte("s")}
		if tc.published == "stale" {
			data = map[string][]byte{"accessKey": []byte("old")}
		}
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: bucket.GeneratedSecretPrefix + fastBucket,
			Labels: map[string]string{gardener.LabelManagedBy: gardener.ManagedBy}}, Type: corev1.SecretTypeOpaque, Data: data})
	}
	for _, e := range tc.entries {
		f := strings.Fields(e)
		be := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: f[0]}, Spec: extensionsv1alpha1.BackupEntrySpec{BucketName: f[1]}}
		if len(f) > 2 {
			be.Finalizers, be.DeletionTimestamp = []string{"example.com/keep"}, &metav1.Time{Time: time.Now()}
		}
		objs = append(objs, be)
	}
	w := &testenv.APIWrites{}
	c := newBucketClient(w, objs...)
	live := &extensionsv1alpha1.BackupBucket{}
	if err := c.Get(ctx, client.ObjectKey{Name: fastBucket}, live); err != nil {
		t.Fatal(err)
	}
	w.Reset()
	a := &bucket.Actuator{Client: c, Providers: providers}

	var err error
	var description string
	if tc.delete {
		var d gardener.Deletion
		d, err = a.Delete(ctx, live)
		description = d.Description
	} else {
		var r gardener.Reconciliation
		r, err = a.Reconcile(ctx, live, secret)
		description = r.Description
	}
	err = gardener.Classify(err) // as the status writer records it

	if got := classOf(err); got != tc.want.err {
		t.Errorf("error %v: class %q, want %q", err, got, tc.want.err)
	}
	if got := gardener.CodesOf(err); !slices.Equal(got, tc.want.codes) {
		t.Errorf("codes %q, want %q", got, tc.want.codes)
	}
	var re *runner.Error
	if got := errors.As(err, &re) && re.RetryAfter > 0; got != tc.want.retryAfter {
		t.Errorf("retry after a delay: %v, want %v (%v)", got, tc.want.retryAfter, err)
	}
	said := description
	if err != nil {
		said = err.Error()
	}
	if !strings.Contains(said, tc.want.says) {
		t.Errorf("says %q, want it to say %q", said, tc.want.says)
	}
	if got := mem.bucket.calls; !slices.Equal(got, tc.want.calls) {
		t.Errorf("the bucket's calls %q, want %q", got, tc.want.calls)
	}
	if got := w.List(); !slices.Equal(got, tc.want.writes) {
		t.Errorf("writes %q, want %q", got, tc.want.writes)
	}
	at := tc.want.at
	if at == "" {
		at = fastGenerated
	}
	ns, name, _ := strings.Cut(at, "/")
	gen := &corev1.Secret{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, gen); {
	case client.IgnoreNotFound(err) != nil:
		t.Fatal(err)
	case err != nil && tc.want.generated != nil:
		t.Errorf("no generated secret at %s, want one with %q", at, tc.want.generated)
	case err == nil && tc.want.generated == nil:
		t.Errorf("a generated secret at %s with %q, want none", at, slices.Sorted(maps.Keys(gen.Data)))
	case err == nil:
		if got := slices.Sorted(maps.Keys(gen.Data)); !slices.Equal(got, tc.want.generated) {
			t.Errorf("generated secret keys %q, want %q", got, tc.want.generated)
		}
		if gen.Labels[gardener.LabelManagedBy] != gardener.ManagedBy {
			t.Errorf("generated secret labels %v, want %s=%s", gen.Labels, gardener.LabelManagedBy, gardener.ManagedBy)
		}
		if tc.typ == "" && string(gen.Data["accessKey"]) != "a" {
			t.Errorf("generated secret accessKey %q, want the credentials'", gen.Data["accessKey"])
		}
	}
	after := &extensionsv1alpha1.BackupBucket{}
	if err := c.Get(ctx, client.ObjectKey{Name: fastBucket}, after); err != nil {
		t.Fatal(err)
	}
	ref := ""
	if r := after.Status.GeneratedSecretRef; r != nil {
		ref = r.Namespace + "/" + r.Name
	}
	if ref != tc.want.ref {
		t.Errorf("status.generatedSecretRef %q, want %q", ref, tc.want.ref)
	}
	var anno []string
	for k := range after.Annotations {
		if k != bucket.AnnotationGeneratedSecretNamespace {
			anno = append(anno, k)
		}
	}
	if slices.Sort(anno); !slices.Equal(anno, tc.want.anno) {
		t.Errorf("annotations %q, want %q", anno, tc.want.anno)
	}
	if pv != nil {
		tc.checkProvisioner(t, pv)
	} else if len(tc.want.calls) > 0 && (mem.name != fastBucket || !maps.EqualFunc(mem.opened, creds, func(a, b []byte) bool { return string(a) == string(b) })) {
		t.Errorf("opened bucket %q with %q, want %s with the credentials", mem.name, slices.Sorted(maps.Keys(mem.opened)), fastBucket)
	}
	if tc.typ == "" && len(tc.want.calls) > 0 && tc.want.err == "" && !tc.delete != mem.bucket.exists {
		t.Errorf("the bucket exists: %v after %s", mem.bucket.exists, tc.name)
	}
	if tc.exists && !tc.delete && len(mem.bucket.objects) != 1 {
		t.Errorf("an existing bucket's objects are gone: %q", mem.bucket.objects)
	}
	if tc.config != "" && tc.configure && tc.typ == "" && string(mem.bucket.config) != tc.config {
		t.Errorf("CreateWithConfig got %q, want the providerConfig %q", mem.bucket.config, tc.config)
	}
}

// checkProvisioner checks what the provisioner was given: the management credentials, the
// generated secret as published; and that the storage credentials it handed back were opened.
func (tc bucketRow) checkProvisioner(t *testing.T, pv *provisioner) {
	t.Helper()
	if pv.got == nil || string(pv.got.Credentials["management"]) == "" || pv.got.Bucket != fastBucket || pv.got.Region != "region-1" {
		t.Fatalf("provisioner given %+v, want the bucket's management credentials", pv.got)
	}
	if want := tc.published == "stale"; want != (string(pv.got.Published["accessKey"]) == "old") {
		t.Errorf("provisioner given the published secret %q", pv.got.Published)
	}
	if tc.delete {
		if pv.deprovisioned == (tc.provisionErr != nil) || pv.name != "" {
			t.Errorf("deprovisioned %v, opened %q: want deprovisioned, not opened", pv.deprovisioned, pv.name)
		}
	} else if tc.provisionErr == nil && string(pv.opened["storageKey"]) != "new" {
		t.Errorf("opened with %q, want the provisioned storage credentials", slices.Sorted(maps.Keys(pv.opened)))
	}
}

// classOf is the class of an actuator's error, "" for none.
func classOf(err error) runner.Class {
	if err == nil {
		return ""
	}
	return runner.ClassOf(err)
}
