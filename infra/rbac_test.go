package infra_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/bridge"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The RBAC of infra/rbac is enough, and the API server is asked by the real code: the bridge
// (with leader election) and the three functions run as their ServiceAccounts (impersonated)
// through a BackupBucket's and a BackupEntry's whole life — reconcile, delete, purge, delete
// the bucket. Any request their roles do not allow is answered Forbidden, which the test
// reports from the components' logs.
func TestRBACIsEnough(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube(), testenv.WithNATS())
	admin := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	applyChartRBAC(ctx, t, admin)

	// Everything the components log at warning level or above, to find Forbidden answers.
	core, logs := observer.New(zap.WarnLevel)
	log := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) }))
	as := func(component string) *rest.Config { return serviceAccountConfig(env, component) }
	clientAs := func(component string) client.Client { return serviceAccountClient(t, env, component) }

	nc, err := nats.Connect(env.NATS.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The setup, as the Job of infra/base runs it; a killed worker's event would come back in 3 s.
	var setupOut, setupErr bytes.Buffer
	if code := cli.Main(ctx, []string{"--nats-url", env.NATS.URL, "setup", "--ack-wait", "3s", "--log-level", "warn"}, &setupOut, &setupErr); code != 0 {
		t.Fatalf("housekeeper setup: exit %d: %s", code, setupErr.String())
	}
	const cluster = "rbac-test"
	var wg sync.WaitGroup
	runCtx, stop := context.WithCancel(context.Background())
	background := func(name string, run func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(runCtx); err != nil && runCtx.Err() == nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	t.Cleanup(func() { stop(); wg.Wait() })

	bridgeCfg := as("bridge")
	b, err := bridge.New(bridgeCfg, js, nil, bridge.Options{Cluster: cluster, Scope: gardener.Scope{Types: []string{local.Type}, Classes: []string{"shoot"}}, Logger: log.Named("bridge")})
	if err != nil {
		t.Fatal(err)
	}
	background("bridge", func(ctx context.Context) error { return runAsLeader(ctx, bridgeCfg, b.Run) })
	root := t.TempDir()
	providers := objectstore.NewRegistry(local.New(root))
	// Each function is built as its binary builds it, with its own service account's
	// permissions (the entry function's metadata cache lists and watches with them too).
	for _, def := range all.Gardener {
		fn, err := def.Build(runCtx, runner.Deps{Config: as(def.Name), Client: clientAs(def.Name), JetStream: js, Stores: providers, Cluster: cluster, Log: log},
			gardener.ScopeArgs(def, local.Type)...)
		if err != nil {
			t.Fatal(err)
		}
		w, err := runner.NewWorker(js, fn, prometheus.NewRegistry(), runner.WithLogger(log.Named(fn.Name)),
			runner.WithBackoff(100*time.Millisecond, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		background(fn.Name, w.Run)
	}

	// wait polls until cond holds; on time-out it reports cond's last word and any Forbidden.
	wait := func(what string, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok, state := cond()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; last seen: %s%s", what, state, forbidden(logs))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	describe := func(obj extensionsv1alpha1.Object, name string) (extensionsv1alpha1.Object, string) {
		if err := admin.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return nil, err.Error()
		}
		s := "no lastOperation"
		if op := obj.GetExtensionStatus().GetLastOperation(); op != nil {
			s = fmt.Sprintf("%s/%s %q", op.Type, op.State, op.Description)
		}
		if le := obj.GetExtensionStatus().GetLastError(); le != nil {
			s += fmt.Sprintf(" lastError=%q", le.Description)
		}
		return obj, s
	}
	succeeded := func(obj extensionsv1alpha1.Object, name string) func() (bool, string) {
		return func() (bool, string) {
			got, s := describe(obj, name)
			if got == nil {
				return false, s
			}
			op := got.GetExtensionStatus().GetLastOperation()
			return op != nil && op.State == gardencorev1beta1.LastOperationStateSucceeded, s
		}
	}
	gone := func(obj extensionsv1alpha1.Object, name string) func() (bool, string) {
		return func() (bool, string) {
			err := admin.Get(ctx, client.ObjectKey{Name: name}, obj)
			return apierrors.IsNotFound(err), fmt.Sprintf("%v", err)
		}
	}
	create := func(obj client.Object) {
		t.Helper()
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	secretExists := func(ns, name string) bool {
		err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
		return err == nil
	}

	// A bucket: finalizers, container, generated secret, status.
	const bucketName, entryName, shootNamespace = "rbac-bucket", "shoot--dev--rbac--3c5e9a10", "shoot--dev--rbac"
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}})
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shootNamespace}})
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "local-credentials", Namespace: "garden"}})
	create(&extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: bucketName},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, Region: "local",
			SecretRef: corev1.SecretReference{Name: "local-credentials", Namespace: "garden"},
		},
	})
	wait("the BackupBucket to succeed", succeeded(&extensionsv1alpha1.BackupBucket{}, bucketName))
	if !secretExists("garden", bucket.GeneratedSecretPrefix+bucketName) {
		t.Fatal("no generated bucket secret")
	}

	// An entry: finalizers, etcd-backup secret in the shoot's namespace, status.
	create(&extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: entryName},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: local.Type}, Region: "local", BucketName: bucketName,
			SecretRef: corev1.SecretReference{Name: bucket.GeneratedSecretPrefix + bucketName, Namespace: "garden"},
		},
	})
	wait("the BackupEntry to succeed", succeeded(&extensionsv1alpha1.BackupEntry{}, entryName))
	if !secretExists(shootNamespace, entry.SecretName) {
		t.Fatalf("no %s secret in %s", entry.SecretName, shootNamespace)
	}
	snapshot := filepath.Join(root, bucketName, entryName, "v2", "Full-00000000-00000001-1")
	if err := os.MkdirAll(filepath.Dir(snapshot), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(snapshot, []byte("etcd"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Deleting the entry: secret removed, purge scheduled (retention 0), purged, released.
	if err := admin.Delete(ctx, &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: entryName}}); err != nil {
		t.Fatal(err)
	}
	wait("the BackupEntry to be purged and released", gone(&extensionsv1alpha1.BackupEntry{}, entryName))
	if _, err := os.Stat(snapshot); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the purge left %s: %v", snapshot, err)
	}
	if secretExists(shootNamespace, entry.SecretName) {
		t.Errorf("the %s secret in %s outlived its entry", entry.SecretName, shootNamespace)
	}

	// Deleting the bucket: container and generated secret removed, released.
	if err := admin.Delete(ctx, &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: bucketName}}); err != nil {
		t.Fatal(err)
	}
	wait("the BackupBucket to be deleted and released", gone(&extensionsv1alpha1.BackupBucket{}, bucketName))
	if secretExists("garden", bucket.GeneratedSecretPrefix+bucketName) {
		t.Error("the generated bucket secret outlived its bucket")
	}
	if msg := forbidden(logs); msg != "" {
		t.Errorf("the components were refused requests on the way%s", msg)
	}
}

// forbidden lists the Forbidden answers the components logged, as text for a failure message.
func forbidden(logs *observer.ObservedLogs) string {
	var lines []string
	for _, e := range logs.All() {
		text := e.Message
		for _, f := range e.Context {
			if f.Interface != nil {
				if err, ok := f.Interface.(error); ok {
					text += ": " + err.Error()
				}
			}
			text += " " + f.String
		}
		if line := e.LoggerName + ": " + text; strings.Contains(strings.ToLower(text), "forbidden") && !slices.Contains(lines, line) {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "\nForbidden:\n  " + strings.Join(lines, "\n  ")
}

// runAsLeader runs run while holding the bridge's Lease, with the lock bridge.RunAsLeader uses
// (a Lease named housekeeper-bridge in the bridge's namespace), as the bridge's ServiceAccount.
// It does not call bridge.RunAsLeader itself: that one reads run's result without waiting for
// run to return, which the race detector reports when the test stops the bridge.
func runAsLeader(ctx context.Context, cfg *rest.Config, run func(context.Context) error) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, "housekeeper-bridge",
		cs.CoreV1(), cs.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: "rbac-test"})
	if err != nil {
		return err
	}
	started, done := make(chan struct{}), make(chan error, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		ReleaseOnCancel: true, Name: "housekeeper-bridge",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { close(started); done <- run(ctx) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return err
	}
	elector.Run(ctx)
	select {
	case <-started:
		return <-done
	default:
		return fmt.Errorf("never acquired the Lease %s/housekeeper-bridge", namespace)
	}
}

// applyChartRBAC creates the release's namespace and the chart's ServiceAccounts, roles and
// bindings (its KEDA rendering) as admin, for a test to act as each workload's account.
// serviceAccountConfig is env's API server as the chart's ServiceAccount of component
// (housekeeper-<component>) sees it.
func serviceAccountConfig(env *testenv.Env, component string) *rest.Config {
	cfg := rest.CopyConfig(env.Kube.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":housekeeper-" + component,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg
}

// serviceAccountClient is a client of env's API server as component's ServiceAccount.
func serviceAccountClient(t *testing.T, env *testenv.Env, component string) client.Client {
	t.Helper()
	c, err := kube.NewClient(serviceAccountConfig(env, component))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func applyChartRBAC(ctx context.Context, t *testing.T, admin client.Client) {
	t.Helper()
	createNamespace(ctx, t, admin, namespace)
	for _, m := range render(t, "keda") {
		switch m.obj.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if err := admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(m.obj.DeepCopy()), fieldOwner); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
		}
	}
}
