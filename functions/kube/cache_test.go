package kube_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
