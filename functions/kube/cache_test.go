package kube_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The cache sends nothing until it is told to start (a cold start serves its event first),
// holds nothing meanwhile (NotFound: the caller reads live), and answers from what it listed
// once it has synced.
func TestStartCacheWaitsThenWarms(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := kube.NewClient(env.Kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "warming"}}); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	cfg := kube.OnRequest(rest.CopyConfig(env.Kube.Config), func(*http.Request) { sent.Add(1) })
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	start := make(chan struct{})
	r := kube.StartCache(ctx, cfg, cache.Options{Scheme: kube.Scheme, ByObject: map[client.Object]cache.ByObject{ns: {}}}, start, zaptest.NewLogger(t))

	time.Sleep(300 * time.Millisecond)
	if err := r.Get(ctx, client.ObjectKey{Name: "warming"}, ns); !apierrors.IsNotFound(err) {
		t.Errorf("Get before the start: %v, want NotFound (the cache holds nothing yet)", err)
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("%d requests sent before the start, want none", n)
	}
	close(start)
	testenv.Eventually(t, 30*time.Second, "the cache answers from its list", func() (bool, string) {
		err := r.Get(ctx, client.ObjectKey{Name: "warming"}, ns)
		return err == nil && ns.GetName() == "warming", errString(err)
	})
	if sent.Load() == 0 {
		t.Error("the cache answered without a request: it did not list")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A cache of a kind the API server does not serve (the BackupCopyPolicy CRD not installed)
// answers it with NoMatch, without a request, and the other kinds live (CachedOrLive), never
// disabled; once the CRD is installed it starts, and answers from what it listed.
func TestStartCacheOfAKindNotServed(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	crd := testenv.DeleteCRD(ctx, t, env.Kube.Config, "backupcopypolicies.backup.housekeeper.dev")
	var liveSent atomic.Int64
	live, err := kube.NewClient(kube.OnRequest(rest.CopyConfig(env.Kube.Config), func(*http.Request) { liveSent.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	sent := map[string]int{}
	cfg := kube.OnRequest(rest.CopyConfig(env.Kube.Config), func(r *http.Request) {
		mu.Lock()
		sent[kube.Verb(r)+" "+kube.Resource(r.URL.Path)]++
		mu.Unlock()
	})
	sentTo := func(key string) int {
		mu.Lock()
		defer mu.Unlock()
		return sent[key]
	}
	kube.LookAgainEvery(200 * time.Millisecond)
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	opts := cache.Options{Scheme: kube.Scheme, ByObject: map[client.Object]cache.ByObject{
		&backupv1alpha1.BackupCopyPolicy{}: {}, ns: {},
	}}
	r := kube.CachedOrLive(kube.StartCache(ctx, cfg, opts, nil, zaptest.NewLogger(t)), live)
	testenv.Eventually(t, 30*time.Second, "the cache says the kind is not served, not the API server", func() (bool, string) {
		before := liveSent.Load()
		err := r.List(ctx, &backupv1alpha1.BackupCopyPolicyList{})
		return meta.IsNoMatchError(err) && liveSent.Load() == before, errString(err)
	})
	// Many reads, none sent: the kind's absence is known, not asked again (live, each read
	// would ask the API server's discovery).
	before, liveBefore := sentTo("list backupcopypolicies"), liveSent.Load()
	for range 20 {
		if err := r.List(ctx, &backupv1alpha1.BackupCopyPolicyList{}); !meta.IsNoMatchError(err) {
			t.Fatalf("List of a kind not served: %v, want NoMatch", err)
		}
	}
	if n := sentTo("list backupcopypolicies") - before; n != 0 {
		t.Errorf("%d lists of backupcopypolicies sent for a kind not served, want none", n)
	}
	if n := liveSent.Load() - liveBefore; n != 0 {
		t.Errorf("%d live requests for a kind not served, want none", n)
	}
	// The other kind is read live meanwhile.
	if err := r.Get(ctx, client.ObjectKey{Name: "default"}, ns); err != nil {
		t.Errorf("Get of a served kind while another is not: %v, want it read live", err)
	}

	testenv.RestoreCRD(ctx, t, env.Kube.Config, crd)
	policy := &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: "later"}, Spec: backupv1alpha1.BackupCopyPolicySpec{
		Buckets: backupv1alpha1.BucketSelection{Names: []string{"b"}}, Destination: "d", Schedule: "@daily"}}
	testenv.Eventually(t, 30*time.Second, "the CRD is served again", func() (bool, string) {
		fresh, err := kube.NewClient(env.Kube.Config)
		if err == nil {
			err = fresh.Create(ctx, policy)
		}
		return err == nil, errString(err)
	})
	testenv.Eventually(t, 30*time.Second, "the cache started and holds the policy", func() (bool, string) {
		list := &backupv1alpha1.BackupCopyPolicyList{}
		err := r.List(ctx, list)
		return err == nil && len(list.Items) == 1 && list.Items[0].Name == "later", errString(err)
	})
	before, liveBefore = sentTo("list backupcopypolicies"), liveSent.Load()
	for range 20 {
		if err := r.List(ctx, &backupv1alpha1.BackupCopyPolicyList{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := sentTo("list backupcopypolicies") - before; n != 0 {
		t.Errorf("%d lists of backupcopypolicies sent by a synced cache, want none", n)
	}
	if n := liveSent.Load() - liveBefore; n != 0 {
		t.Errorf("%d live requests with the cache synced, want none", n)
	}
}
