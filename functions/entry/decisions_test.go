package entry_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	sec "github.com/gardener/gardener/pkg/apis/security/v1alpha1/constants"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/swift"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// The decisions of the entry Actuator (Reconcile: the etcd-backup secret; Delete: the secret,
// the purge's schedule or the purge now) and of the Purger, row by row, over the fake API
// server, a JetStream that records what is published and a bucket in memory. The generic
// protocol around them (finalizers, lastOperation, migration) is functions/gardener's decision
// table; real stores, the NATS server's scheduler and etcd-backup-restore reading the secret
// are the real-stack tests'.

const (
	fastEntry   = "shoot--dev--app--6f1c"
	fastNS      = "shoot--dev--app"
	fastUID     = "uid-entry"
	fastBucket  = "seed-backups"
	fastHost    = "/var/local-backupbuckets"
	fastRoleARN = "arn:aws:iam::1:role/etcd-backup"
	fastPrefix  = fastEntry + "/"
)

var (
	fastNow   = time.Date(2026, 11, 23, 10, 20, 0, 0, time.UTC)
	deletedAt = fastNow.Add(-10 * time.Minute)
	// ours are the entry's backups; neighbours what no purge of it may touch.
	ours       = []string{fastPrefix + "etcd-main/v2/Full-1", fastPrefix + "etcd-main/v2/Incr-2"}
	neighbours = []string{fastEntry, fastEntry + "0/etcd-main/v2/Full-1", "shoot--dev--other--1/etcd-main/v2/Full-1"}
	conf       = []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorConfigurationProblem}
)

type reconcileRow struct {
	name  string
	world world
	creds map[string][]byte // the spec.secretRef secret's data; nil: {"id": "entry"}
	wi    string            // the credentials are a workload identity's: "ok", "no name", "no config"
	have  string            // etcd-backup before: "" none, "stale", "same", "token" (a workload identity's, with the requestor's token)
	cache string            // a metadata cache: "" none, "empty" (knows the namespace, no secret)
	sync  int               // patches of the secret that conflict first
	purp  bool              // --retention-by-purpose is set and the shoot's Cluster says production

	keys   []string // etcd-backup's data keys afterwards; nil: no secret written (one there is unchanged)
	writes []string
	says   string
	err    runner.Class
	codes  []gardencorev1beta1.ErrorCode
}

func TestEntryReconcileDecisions(t *testing.T) {
	const create, patch = "create Secret " + fastNS + "/etcd-backup", "patch Secret " + fastNS + "/etcd-backup"
	id := []string{"bucketName", "id"}
	swiftCreds := map[string][]byte{swift.KeyAuthURL: []byte("https://keystone/v3"), swift.KeyDomainName: []byte("d"), swift.KeyTenantName: []byte("t"),
		swift.KeyUsername: []byte("u"), swift.KeyPassword: []byte("p")}
	for _, tc := range []reconcileRow{
		{name: "written: the credentials and bucketName", keys: id, writes: []string{create}},
		{name: "this shoot's namespace", world: world{ns: "ours"}, keys: id, writes: []string{create}},
		{name: "source- entry: source-etcd-backup", world: world{name: gardener.SourcePrefix + fastEntry}, keys: id,
			writes: []string{"create Secret " + fastNS + "/" + entry.SourceSecretName}},
		// The keys etcd-backup-restore reads, per provider type, as upstream's extensions write them.
		{name: "aws: region added", world: world{typ: s3.Type}, creds: map[string][]byte{s3.KeyAccessKeyID: []byte("A"), s3.KeySecretAccessKey: []byte("s")},
			keys: []string{s3.KeyAccessKeyID, "bucketName", s3.KeyRegion, s3.KeySecretAccessKey}, writes: []string{create}},
		{name: "openstack: region added", world: world{typ: swift.Type}, creds: swiftCreds,
			keys: []string{"authURL", "bucketName", "domainName", "password", "region", "tenantName", "username"}, writes: []string{create}},
		{name: "azure: as the generated secret", world: world{typ: azure.Type}, creds: map[string][]byte{azure.KeyStorageAccount: []byte("a"), azure.KeyStorageKey: []byte("a2V5")},
			keys: []string{"bucketName", azure.KeyStorageAccount, azure.KeyStorageKey}, writes: []string{create}},
		{name: "gcp: as the credentials", world: world{typ: gcs.Type}, creds: map[string][]byte{gcs.KeyServiceAccountJSON: []byte(`{"type":"service_account","project_id":"p-1"}`)},
			keys: []string{"bucketName", gcs.KeyServiceAccountJSON}, writes: []string{create}},
		{name: "local: hostPath added to provider-local's empty secret", world: world{typ: local.Type}, creds: map[string][]byte{},
			keys: []string{"bucketName", local.KeyHostPath}, writes: []string{create}},
		// The namespace decides whether the secret is written: a Succeeded that says why not.
		{name: "namespace missing: waits", world: world{ns: "missing"}, says: "namespace shoot--dev--app does not exist"},
		{name: "namespace terminating: waits", world: world{ns: "terminating"}, says: "is terminating"},
		{name: "another shoot's namespace: its secret untouched", world: world{ns: "foreign"}, have: "stale", says: "belongs to shoot b2, not to this entry's shoot 6f1c"},
		{name: "namespace gone since the cache saw it", world: world{ns: "missing"}, cache: "empty", writes: []string{create}, says: "does not exist"},
		{name: "namespace terminating since the cache saw it", world: world{ns: "terminating"}, cache: "empty", writes: []string{create}, says: "is terminating"},
		// The secret is exactly what entry writes, and written only when it differs.
		{name: "stale: data and metadata replaced", have: "stale", keys: id, writes: []string{patch}},
		{name: "as it would be written: nothing written", have: "same", keys: id},
		{name: "unknown to the cache: created without a read, then patched", cache: "empty", have: "stale", keys: id, writes: []string{create, patch}},
		{name: "conflict (the token requestor wrote): read again", have: "stale", sync: 1, keys: id, writes: []string{patch, patch}},
		// Workload identity: config, the marks, and the token its requestor wrote.
		{name: "workload identity: config, roleARN, region, marks", world: world{typ: s3.Type}, wi: "ok",
			keys: []string{"bucketName", "config", "region", "roleARN"}, writes: []string{create}},
		{name: "workload identity: the requestor's token kept", world: world{typ: s3.Type}, wi: "ok", have: "token",
			keys: []string{"bucketName", "config", "region", "roleARN", "token"}, writes: []string{patch}},
		{name: "back to static credentials: token and marks go", world: world{typ: s3.Type}, have: "token",
			creds: map[string][]byte{s3.KeyAccessKeyID: []byte("A"), s3.KeySecretAccessKey: []byte("s")},
			keys:  []string{s3.KeyAccessKeyID, "bucketName", "region", s3.KeySecretAccessKey}, writes: []string{patch}},
		{name: "workload identity without its name: a configuration problem", world: world{typ: s3.Type}, wi: "no name",
			err: runner.ClassPermanent, codes: conf, says: sec.AnnotationWorkloadIdentityName},
		{name: "workload identity without config: a configuration problem", world: world{typ: s3.Type}, wi: "no config",
			err: runner.ClassPermanent, codes: conf, says: `"config"`},
		// What concerns a later purge is told now, without a lastError.
		{name: "malformed retention: written, and said", world: world{ann: map[string]string{entry.AnnotationRetention: "three days"}},
			keys: id, writes: []string{create}, says: "fix it, or the purge waits"},
		{name: "the shoot's purpose recorded for the retention", purp: true, keys: id,
			writes: []string{"status BackupEntry " + fastEntry, create}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t) })
	}
}

func (tc reconcileRow) run(t *testing.T) {
	ctx := context.Background()
	creds := secret("garden", "entry-creds", tc.creds)
	if tc.creds == nil {
		creds.Data = map[string][]byte{"id": []byte("entry")}
	}
	if tc.wi != "" {
		creds.Labels = map[string]string{sec.LabelPurpose: sec.LabelPurposeWorkloadIdentityTokenRequestor, sec.LabelWorkloadIdentityProvider: "aws"}
		creds.Annotations = map[string]string{sec.AnnotationWorkloadIdentityName: "seed-backup", sec.AnnotationWorkloadIdentityNamespace: "garden"}
		creds.Data = map[string][]byte{entry.KeyConfig: []byte("apiVersion: aws.provider.extensions.gardener.cloud/v1alpha1\nkind: WorkloadIdentityConfig\nroleARN: " + fastRoleARN + "\n"),
			"ignored": []byte("not copied")}
		switch tc.wi {
		case "no name":
			delete(creds.Annotations, sec.AnnotationWorkloadIdentityName)
		case "no config":
			delete(creds.Data, entry.KeyConfig)
		}
	}
	w := tc.world
	ref := corev1.SecretReference{Namespace: fastNS, Name: entry.SecretName}
	if gardener.IsSourceEntry(w.entryName()) {
		ref.Name = entry.SourceSecretName
	}
	have := secret(ref.Namespace, ref.Name, map[string][]byte{"id": []byte("entry"), "bucketName": []byte(fastBucket)})
	have.Labels, have.Annotations = map[string]string{gardener.LabelManagedBy: gardener.ManagedBy}, map[string]string{entry.AnnotationCreatedBy: fastEntry}
	switch tc.have {
	case "stale":
		have.Data = map[string][]byte{"id": []byte("old"), "gone": []byte("x")}
		have.Labels["stranger"], have.Annotations["stranger"] = "x", "y"
	case "token":
		have.Data = map[string][]byte{entry.KeyConfig: []byte("old"), entry.KeyToken: []byte("from the requestor")}
		have.Labels[sec.LabelPurpose] = sec.LabelPurposeWorkloadIdentityTokenRequestor
		have.Annotations[sec.AnnotationWorkloadIdentityTokenRenewTimestamp] = "2026-11-23T11:00:00Z"
	}
	if tc.have != "" {
		w.extra = append(w.extra, have)
	}
	var retention entry.Retention
	if tc.purp {
		retention.ByPurpose = map[string]time.Duration{"production": 720 * time.Hour}
		w.extra = append(w.extra, &extensionsv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: fastNS}, Spec: extensionsv1alpha1.ClusterSpec{
			Shoot: k8sruntime.RawExtension{Raw: []byte(`{"spec":{"purpose":"production"}}`)}}})
	}
	api := &apiServer{conflicts: tc.sync}
	c := api.newEntryClient(w.objects(t)...)
	providers := objectstore.NewRegistry(&memProvider{}, s3.New(), swift.New(), azure.New(), gcs.New(), local.New(t.TempDir(), local.WithHostPath(fastHost)))
	a := &entry.Actuator{Client: c, Providers: providers, Retention: retention, Cluster: "test", Now: func() time.Time { return fastNow }}
	if tc.cache != "" {
		a.Metadata = (&apiServer{}).newEntryClient(namespace(""))
	}
	e := liveEntry(t, c, w.entryName())
	before := &corev1.Secret{}
	_ = c.Get(ctx, client.ObjectKeyFromObject(have), before)
	api.writes.Reset()

	r, err := a.Reconcile(ctx, e, creds)

	checkErr(t, err, tc.err, tc.codes)
	if said := cmpOr(errString(err), r.Description); !strings.Contains(said, tc.says) {
		t.Errorf("says %q, want it to say %q", said, tc.says)
	}
	if got := api.writes.List(); !slices.Equal(got, tc.writes) {
		t.Errorf("writes %q, want %q", got, tc.writes)
	}
	after := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(have), after); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	if tc.keys == nil {
		if after.ResourceVersion != before.ResourceVersion {
			t.Errorf("etcd-backup written (%q), want it untouched", slices.Sorted(maps.Keys(after.Data)))
		}
		return
	}
	if got := slices.Sorted(maps.Keys(after.Data)); !slices.Equal(got, tc.keys) {
		t.Errorf("etcd-backup keys %q, want %q", got, tc.keys)
	}
	wantLabels := map[string]string{gardener.LabelManagedBy: gardener.ManagedBy}
	wantAnnotations := map[string]string{entry.AnnotationCreatedBy: w.entryName()}
	if tc.wi == "ok" {
		wantLabels[sec.LabelPurpose], wantLabels[sec.LabelWorkloadIdentityProvider] = sec.LabelPurposeWorkloadIdentityTokenRequestor, "aws"
		wantAnnotations[sec.AnnotationWorkloadIdentityName], wantAnnotations[sec.AnnotationWorkloadIdentityNamespace] = "seed-backup", "garden"
		if tc.have == "token" {
			wantAnnotations[sec.AnnotationWorkloadIdentityTokenRenewTimestamp] = "2026-11-23T11:00:00Z"
		}
		if string(after.Data["roleARN"]) != fastRoleARN || string(after.Data["token"]) != map[bool]string{true: "from the requestor"}[tc.have == "token"] {
			t.Errorf("roleARN %q, token %q", after.Data["roleARN"], after.Data["token"])
		}
	}
	if !maps.Equal(after.Labels, wantLabels) || !maps.Equal(after.Annotations, wantAnnotations) {
		t.Errorf("etcd-backup labels %v annotations %v, want exactly %v and %v", after.Labels, after.Annotations, wantLabels, wantAnnotations)
	}
	if string(after.Data["bucketName"]) != fastBucket || (w.typ == local.Type && string(after.Data[local.KeyHostPath]) != fastHost) {
		t.Errorf("bucketName %q, hostPath %q", after.Data["bucketName"], after.Data[local.KeyHostPath])
	}
	if tc.purp {
		if got := gardener.RecordedPurpose(liveEntry(t, c, fastEntry)); got != "production" {
			t.Errorf("recorded purpose %q, want production", got)
		}
	}
}

type deleteRow struct {
	name      string
	world     world
	secret    string // etcd-backup before: "" this entry's, "another entry's", "unnamed", "none"
	cache     bool   // a metadata cache whose copy of etcd-backup is an older secret's (another uid)
	retention time.Duration
	purger    bool // the entry function purges what is due itself
	pubErr    error
	storeErr  error
	replaced  bool // released and replaced by a namesake while the prefix is listed (replaceEntry)

	secretKept bool
	deletes    int      // deletes of etcd-backup asked for, if not 1 (0 with secretKept)
	purged     bool     // the store holds only the neighbours afterwards
	opened     []string // the credentials the store was opened with
	published  []string
	pending    bool
	says       string
	err        runner.Class
	codes      []gardencorev1beta1.ErrorCode
}

func TestEntryDeleteDecisions(t *testing.T) {
	scheduled := func(due time.Time) []string { return []string{"schedule due " + at(due), "scheduled"} }
	source := gardener.SourcePrefix + fastEntry
	for _, tc := range []deleteRow{
		{name: "its secret deleted, purge scheduled at deletion + retention, announced", retention: 72 * time.Hour,
			published: scheduled(deletedAt.Add(72 * time.Hour)), pending: true, says: "purged at 2026-11-26T10:10:00Z (retention 72h0m0s)"},
		{name: "retention annotation: its time", retention: 72 * time.Hour, world: world{ann: map[string]string{entry.AnnotationRetention: "1h"}},
			published: scheduled(deletedAt.Add(time.Hour)), pending: true},
		{name: "another entry's secret kept", secret: "another entry's", secretKept: true, retention: time.Hour, published: scheduled(deletedAt.Add(time.Hour)), pending: true},
		{name: "unnamed secret in another shoot's namespace kept", secret: "unnamed", world: world{ns: "foreign"}, secretKept: true, retention: time.Hour,
			published: scheduled(deletedAt.Add(time.Hour)), pending: true},
		{name: "unnamed secret in its namespace deleted", secret: "unnamed", retention: time.Hour, published: scheduled(deletedAt.Add(time.Hour)), pending: true},
		{name: "no secret", secret: "none", retention: time.Hour, published: scheduled(deletedAt.Add(time.Hour)), pending: true},
		{name: "the cache's copy is an older secret's: read live, deleted", cache: true, deletes: 2, retention: time.Hour,
			published: scheduled(deletedAt.Add(time.Hour)), pending: true},
		{name: "malformed retention: a configuration problem, nothing scheduled", world: world{ann: map[string]string{entry.AnnotationRetention: "soon"}},
			err: runner.ClassPermanent, codes: conf, says: "soon"},
		{name: "due, no purger: scheduled for now", published: scheduled(fastNow), pending: true},
		{name: "due (force-deletion): purged now, exactly the prefix", purger: true, retention: 72 * time.Hour,
			world: world{ann: map[string]string{entry.AnnotationForceDeletion: "true"}}, purged: true, opened: []string{"bucket"}, published: []string{"completed"}},
		{name: "due, released and re-created while the prefix was listed: the namesake's backups untouched, read again", purger: true, replaced: true,
			world: world{ann: map[string]string{entry.AnnotationForceDeletion: "true"}}, retention: time.Hour, opened: []string{"bucket"},
			err: runner.ClassRetryable, says: "re-created since this purge was scheduled (live uid uid-namesake)"},
		{name: "due source- entry: purged now with its own credentials", purger: true, world: world{name: source, noBucket: true},
			purged: true, opened: []string{"entry"}, published: []string{"completed"}},
		{name: "due source- entry whose live namesake uses the bucket: nothing purged", purger: true,
			world: world{name: source, extra: []client.Object{&extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: fastEntry},
				Spec: extensionsv1alpha1.BackupEntrySpec{BucketName: fastBucket}}}}},
		{name: "due, a type this process cannot open: scheduled", purger: true, world: world{typ: s3.Type}, published: scheduled(fastNow), pending: true},
		{name: "NATS does not answer: unavailable", pubErr: nats.ErrTimeout, published: []string{"schedule due " + at(fastNow)}, err: runner.ClassUnavailable},
		{name: "due, the store throttles: unavailable, nothing purged", purger: true, storeErr: objectstore.ErrThrottled, opened: []string{"bucket"},
			err: runner.ClassUnavailable, codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorInfraRateLimitsExceeded}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t) })
	}
}

func (tc deleteRow) run(t *testing.T) {
	ctx := context.Background()
	w := tc.world
	w.deleting, w.ours = true, true
	e := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: w.entryName()}}
	ref := entry.SecretRef(e)
	have := secret(ref.Namespace, ref.Name, map[string][]byte{"id": []byte("entry")})
	switch tc.secret {
	case "":
		have.Annotations = map[string]string{entry.AnnotationCreatedBy: w.entryName()}
	case "another entry's":
		have.Annotations = map[string]string{entry.AnnotationCreatedBy: fastNS + "--b2"}
	}
	if tc.secret != "none" {
		have.UID = "uid-secret"
		w.extra = append(w.extra, have)
	}
	api := &apiServer{}
	c := api.newEntryClient(w.objects(t)...)
	js := &recordingJetStream{err: tc.pubErr}
	store := newMemStore(slices.Concat(ours, neighbours)...)
	store.listErr = tc.storeErr
	if tc.replaced {
		store.beforeList = func() { replaceEntry(t, c, w.entryName()) }
	}
	mem := &memProvider{store: store}
	retention := entry.Retention{Default: tc.retention}
	a := &entry.Actuator{Client: c, JetStream: js, Providers: objectstore.NewRegistry(mem, s3.New()), Retention: retention, Cluster: "test",
		Now: func() time.Time { return fastNow }}
	if tc.purger {
		a.Purger = &entry.Purger{Client: c, Providers: objectstore.NewRegistry(mem), Retention: retention, JetStream: js, Cluster: "test",
			Scope: gardener.Scope{Types: []string{memType}, Classes: []string{"shoot"}}, Entries: entry.StatusWriter(c, zaptest.NewLogger(t)),
			Log: zaptest.NewLogger(t), Now: func() time.Time { return fastNow }, ProgressInterval: time.Hour}
	}
	if tc.cache {
		older := have.DeepCopy()
		older.UID = "uid-older"
		a.Metadata = (&apiServer{}).newEntryClient(namespace(""), older)
	}
	api.writes.Reset()

	d, err := a.Delete(ctx, liveEntry(t, c, w.entryName()))

	checkErr(t, err, tc.err, tc.codes)
	if said := cmpOr(errString(err), d.Description); !strings.Contains(said, tc.says) {
		t.Errorf("says %q, want it to say %q", said, tc.says)
	}
	if d.Pending != tc.pending {
		t.Errorf("pending %v, want %v", d.Pending, tc.pending)
	}
	err = c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &corev1.Secret{})
	if kept := err == nil; kept != tc.secretKept {
		t.Errorf("etcd-backup kept: %v, want %v", kept, tc.secretKept)
	}
	deletes := 0
	for _, wr := range api.writes.List() {
		if wr == "delete Secret "+ref.Namespace+"/"+ref.Name {
			deletes++
		}
	}
	if want := map[bool]int{false: max(tc.deletes, 1)}[tc.secretKept || tc.secret == "none"]; deletes != want {
		t.Errorf("%d deletes of etcd-backup, want %d", deletes, want)
	}
	var got []string
	for _, m := range js.msgs {
		got = append(got, publishedAs(t, w.entryName(), m))
	}
	if !slices.Equal(got, tc.published) {
		t.Errorf("published %q, want %q", got, tc.published)
	}
	checkStore(t, store, tc.purged)
	if !slices.Equal(mem.opened, tc.opened) {
		t.Errorf("store opened with the credentials of %q, want %q", mem.opened, tc.opened)
	}
}

// checkStore checks that the store holds only the neighbours if purged, else all it held.
func checkStore(t *testing.T, store *memStore, purged bool) {
	t.Helper()
	want := slices.Sorted(slices.Values(slices.Concat(ours, neighbours)))
	if purged {
		want = slices.Sorted(slices.Values(neighbours))
	}
	if got := store.keys(); !slices.Equal(got, want) {
		t.Errorf("the store holds %q, want %q", got, want)
	}
}
