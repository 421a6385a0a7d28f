// Command operator is KEDA's operator (keda-operator), built from the KEDA module at the
// version test/keda/go.mod requires: the manager KEDA's cmd/operator/main.go sets up, with its
// ScaledObject, ScaledJob, TriggerAuthentication and ClusterTriggerAuthentication reconcilers
// and the scale handler whose executor scales a target between zero and one replica. KEDA's
// cmd/operator is a main package, which cannot be imported; this is its setup, in its order,
// with KEDA's own packages, leaving out what a test against a bare kube-apiserver has no use
// for:
//
//   - no admission webhooks (KEDA runs them as another binary) and no metrics adapter (the HPA
//     KEDA creates scales beyond one replica only through it and kube-controller-manager);
//   - no gRPC metrics service (the adapter's source) and no certificate rotation (its certs);
//   - no CloudEventSource reconcilers (their CRDs are not installed: housekeeper uses none);
//   - leader election off, the metrics endpoint off unless asked for.
//
// It reads its configuration as KEDA's operator does: the kubeconfig (--kubeconfig or
// KUBECONFIG), WATCH_NAMESPACE (required; empty: every namespace),
// KEDA_CLUSTER_OBJECT_NAMESPACE (where ClusterTriggerAuthentications' Secrets live; in a pod
// the service account's namespace file), KEDA_HTTP_DEFAULT_TIMEOUT and the other KEDA_*
// variables.
//
//	WATCH_NAMESPACE= KEDA_CLUSTER_OBJECT_NAMESPACE=keda operator --kubeconfig kubeconfig --health-probe-bind-address 127.0.0.1:8081
package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/spf13/pflag"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apimachineryruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	kedacontrollers "github.com/kedacore/keda/v2/controllers/keda"
	"github.com/kedacore/keda/v2/pkg/eventemitter"
	"github.com/kedacore/keda/v2/pkg/k8s"
	"github.com/kedacore/keda/v2/pkg/metricscollector"
	"github.com/kedacore/keda/v2/pkg/scalers/authentication"
	"github.com/kedacore/keda/v2/pkg/scaling"
	"github.com/kedacore/keda/v2/pkg/scaling/resolver"
	kedautil "github.com/kedacore/keda/v2/pkg/util"
)

var (
	scheme   = apimachineryruntime.NewScheme()
	setupLog = ctrl.Log.WithName("setup")
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kedav1alpha1.AddToScheme(scheme))
}

func main() {
	if err := run(); err != nil {
		setupLog.Error(err, "keda-operator")
		os.Exit(1)
	}
}

func run() error {
	var (
		metricsAddr, probeAddr, k8sClusterName string
		qps                                    float32
		burst                                  int
		caDirs                                 []string
	)
	// KEDA's flags of the same names and defaults, but for the addresses: nothing listens
	// unless asked to.
	pflag.StringVar(&metricsAddr, "metrics-bind-address", "0", "The address the prometheus metric endpoint binds to (0: none).")
	pflag.StringVar(&probeAddr, "health-probe-bind-address", "0", "The address the probe endpoint (/healthz, /readyz) binds to (0: none).")
	pflag.Float32Var(&qps, "kube-api-qps", 20.0, "Set the QPS rate for throttling requests sent to the apiserver")
	pflag.IntVar(&burst, "kube-api-burst", 30, "Set the burst for throttling requests sent to the apiserver")
	pflag.StringVar(&k8sClusterName, "k8s-cluster-name", "kubernetes-default", "k8s cluster name. Defaults to kubernetes-default")
	pflag.StringArrayVar(&caDirs, "ca-dir", nil, "Directory with CA certificates for scalers to authenticate TLS connections. Can be specified multiple times.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	klog.InitFlags(nil)
	pflag.CommandLine.AddGoFlagSet(flag.CommandLine) // --kubeconfig (controller-runtime), --zap-*, klog's
	pflag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	klog.SetLogger(ctrl.Log.WithName("klog"))
	if err := kedautil.ConfigureHTTPTransport(kedautil.HTTPTransportConfig{MaxIdleConnsPerHost: 1000, IdleConnTimeout: 90 * time.Second}); err != nil {
		return fmt.Errorf("HTTP transport: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()

	namespaces, err := kedautil.GetWatchNamespaces()
	if err != nil {
		return err
	}
	byObject, err := watchLabelSelectorByObject()
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	resolverConfig := &resolver.Config{ServiceAccountTokenMode: "enforce-audience", VaultKubernetesAuthTokenFile: resolver.DefaultVaultKubernetesAuthTokenFile}
	if err := errors.Join(
		resolverConfig.LoadServiceAccountTokenAudiences(os.Getenv(resolver.ServiceAccountTokenAudiencesEnvVar)),
		resolverConfig.LoadOutboundFilter(os.Getenv(resolver.OutboundFilterEnvVar))); err != nil {
		return fmt.Errorf("authentication policy: %w", err)
	}
	resolver.SetConfig(resolverConfig)
	cfg.QPS, cfg.Burst, cfg.DisableCompression = qps, burst, true

	metricscollector.NewMetricsCollectors(metricscollector.Options{EnablePrometheusMetrics: true})

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: server.Options{BindAddress: metricsAddr},
		Cache: ctrlcache.Options{
			DefaultNamespaces: namespaces,
			DefaultTransform:  kedautil.CacheObjectTransform,
			ByObject:          byObject,
		},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         false,
	})
	if err != nil {
		return fmt.Errorf("unable to start manager: %w", err)
	}

	globalHTTPTimeoutMS, err := kedautil.ResolveOsEnvInt("KEDA_HTTP_DEFAULT_TIMEOUT", 3000)
	if err != nil {
		return fmt.Errorf("invalid KEDA_HTTP_DEFAULT_TIMEOUT: %w", err)
	}
	scaledObjectMaxReconciles, err := kedautil.ResolveOsEnvInt("KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES", 5)
	if err != nil {
		return fmt.Errorf("invalid KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES: %w", err)
	}
	scaledJobMaxReconciles, err := kedautil.ResolveOsEnvInt("KEDA_SCALEDJOB_CTRL_MAX_RECONCILES", 1)
	if err != nil {
		return fmt.Errorf("invalid KEDA_SCALEDJOB_CTRL_MAX_RECONCILES: %w", err)
	}
	if _, err := kedautil.GetBoundServiceAccountTokenExpiry(); err != nil {
		return err
	}
	globalHTTPTimeout := time.Duration(globalHTTPTimeoutMS) * time.Millisecond
	kubernetesAPITimeout, err := resolveKubernetesAPITimeout()
	if err != nil {
		return fmt.Errorf("invalid KEDA_KUBERNETES_API_TIMEOUT: %w", err)
	}
	eventRecorder := mgr.GetEventRecorder("keda-operator")

	kubeClientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	objectNamespace, err := kedautil.GetClusterObjectNamespace()
	if err != nil {
		return fmt.Errorf("the cluster object namespace (KEDA_CLUSTER_OBJECT_NAMESPACE): %w", err)
	}
	// As KEDA's: the Secret informer lists the cluster object namespace only.
	kubeInformerFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClientset, time.Hour, kubeinformers.WithNamespace(objectNamespace))
	secretInformer := kubeInformerFactory.Core().V1().Secrets()

	scaleClient, kubeVersion, err := k8s.InitScaleClient(mgr)
	if err != nil {
		return fmt.Errorf("unable to init scale client: %w", err)
	}
	authClientSet := &authentication.AuthClientSet{CoreV1Interface: kubeClientset.CoreV1(), SecretLister: secretInformer.Lister()}
	scaledHandler := scaling.NewScaleHandler(mgr.GetClient(), scaleClient, mgr.GetScheme(), globalHTTPTimeout, kubernetesAPITimeout, eventRecorder, authClientSet)
	eventEmitter := eventemitter.NewEventEmitter(mgr.GetClient(), eventRecorder, k8sClusterName, authClientSet)

	if err := (&kedacontrollers.ScaledObjectReconciler{
		Client:       mgr.GetClient(),
		Scheme:       mgr.GetScheme(),
		ScaleClient:  scaleClient,
		ScaleHandler: scaledHandler,
		EventEmitter: eventEmitter,
	}).SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: scaledObjectMaxReconciles}); err != nil {
		return fmt.Errorf("controller ScaledObject: %w", err)
	}
	if err := (&kedacontrollers.ScaledJobReconciler{
		Client:               mgr.GetClient(),
		Scheme:               mgr.GetScheme(),
		GlobalHTTPTimeout:    globalHTTPTimeout,
		KubernetesAPITimeout: kubernetesAPITimeout,
		EventEmitter:         eventEmitter,
		AuthClientSet:        authClientSet,
	}).SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: scaledJobMaxReconciles}); err != nil {
		return fmt.Errorf("controller ScaledJob: %w", err)
	}
	if err := (&kedacontrollers.TriggerAuthenticationReconciler{Client: mgr.GetClient(), EventHandler: eventEmitter}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("controller TriggerAuthentication: %w", err)
	}
	if err := (&kedacontrollers.ClusterTriggerAuthenticationReconciler{Client: mgr.GetClient(), EventHandler: eventEmitter}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("controller ClusterTriggerAuthentication: %w", err)
	}
	if err := errors.Join(mgr.AddHealthzCheck("healthz", healthz.Ping), mgr.AddReadyzCheck("readyz", healthz.Ping)); err != nil {
		return err
	}
	kedautil.SetCACertDirs(caDirs)

	kedautil.PrintWelcome(setupLog, kubeVersion, "manager")
	kubeInformerFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), secretInformer.Informer().HasSynced) {
		return errors.New("failed to wait Secrets cache synced")
	}
	return mgr.Start(ctx)
}

func resolveKubernetesAPITimeout() (time.Duration, error) {
	timeout, err := kedautil.ResolveOsEnvDuration("KEDA_KUBERNETES_API_TIMEOUT")
	if err != nil || timeout == nil {
		return 0, err
	}
	if *timeout < 0 {
		return 0, errors.New("must not be negative")
	}
	return *timeout, nil
}

// watchLabelSelectorByObject is KEDA's buildWatchLabelSelectorByObjectOrDie: the cache filters
// of WATCH_LABEL_SELECTOR (ScaledObjects, ScaledJobs, HPAs) and
// WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH (trigger authentications).
func watchLabelSelectorByObject() (map[client.Object]ctrlcache.ByObject, error) {
	byObject, err := kedautil.WatchLabelSelectorByObject(&kedav1alpha1.ScaledObject{}, &kedav1alpha1.ScaledJob{}, &autoscalingv2.HorizontalPodAutoscaler{})
	if err != nil {
		return nil, fmt.Errorf("WATCH_LABEL_SELECTOR: %w", err)
	}
	taByObject, err := kedautil.WatchLabelSelectorForTriggerAuthByObject(&kedav1alpha1.TriggerAuthentication{}, &kedav1alpha1.ClusterTriggerAuthentication{})
	if err != nil {
		return nil, fmt.Errorf("WATCH_LABEL_SELECTOR_FOR_TRIGGERAUTH: %w", err)
	}
	if byObject == nil {
		return taByObject, nil
	}
	maps.Copy(byObject, taByObject)
	return byObject, nil
}
