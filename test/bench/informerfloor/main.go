// Command informerfloor receives what housekeeper's bridge watches, and nothing more: client-go's
// own informers, with client-go's decoding, on BackupBuckets and BackupEntries (JSON, as custom
// resources are served), namespaces and the secrets of --secret-namespace (protobuf, as the
// bridge reads them), each event only counted. BenchmarkCost runs it beside the bridge: its CPU
// over a burst is the floor, the cost of receiving the events, that the bridge's own cost is
// compared with. It serves /readyz (every informer synced) and /metrics
// (informer_events_received_total) on --addr.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	addr := flag.String("addr", "127.0.0.1:0", "address of /readyz and /metrics")
	secretNamespace := flag.String("secret-namespace", "garden", "the namespace whose secrets are watched, as the bridge watches those its objects reference")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, *kubeconfig, *addr, *secretNamespace); err != nil {
		fmt.Fprintln(os.Stderr, "informerfloor:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, addr, secretNamespace string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	extensions, err := extensionsClient(cfg)
	if err != nil {
		return err
	}
	core := rest.CopyConfig(cfg)
	core.ContentType = kruntime.ContentTypeProtobuf
	core.AcceptContentTypes = kruntime.ContentTypeProtobuf + "," + kruntime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(core)
	if err != nil {
		return err
	}
	coreClient := cs.CoreV1().RESTClient()
	informers := []cache.SharedIndexInformer{
		cache.NewSharedIndexInformer(cache.NewListWatchFromClient(extensions, "backupbuckets", metav1.NamespaceAll, fields.Everything()), &extensionsv1alpha1.BackupBucket{}, 0, cache.Indexers{}),
		cache.NewSharedIndexInformer(cache.NewListWatchFromClient(extensions, "backupentries", metav1.NamespaceAll, fields.Everything()), &extensionsv1alpha1.BackupEntry{}, 0, cache.Indexers{}),
		cache.NewSharedIndexInformer(cache.NewListWatchFromClient(coreClient, "namespaces", metav1.NamespaceAll, fields.Everything()), &corev1.Namespace{}, 0, cache.Indexers{}),
		cache.NewSharedIndexInformer(cache.NewListWatchFromClient(coreClient, "secrets", secretNamespace, fields.Everything()), &corev1.Secret{}, 0, cache.Indexers{}),
	}
	var received atomic.Int64
	count := func(any) { received.Add(1) }
	var synced []cache.InformerSynced
	for _, inf := range informers {
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: count, UpdateFunc: func(_, o any) { count(o) }, DeleteFunc: count})
		if err != nil {
			return err
		}
		synced = append(synced, reg.HasSynced)
		go inf.RunWithContext(ctx)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		for _, s := range synced {
			if !s() {
				http.Error(w, "not synced", http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE informer_events_received_total counter\ninformer_events_received_total %d\n", received.Load())
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(l); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// extensionsClient is a REST client of extensions.gardener.cloud/v1alpha1 decoding as client-go
// does for any typed client.
func extensionsClient(cfg *rest.Config) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &extensionsv1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(kube.Scheme).WithoutConversion()
	return rest.RESTClientFor(c)
}
