package seed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	hkcli "github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/images"
	"github.com/housekeeper-dev/housekeeper/scripts/release"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

const (
	// newTag is the images' tag a chart upgrade moves to.
	newTag = "v0.1.1-seed"
	// The namespaces of NATS, KEDA and housekeeper, as an operator installs them by hand.
	natsNamespace = "nats"
	kedaNamespace = "keda"
	hkNamespace   = "housekeeper"
	// The image of KEDA's operator: KEDA's own name for it, built here from the KEDA module.
	kedaImage = "ghcr.io/kedacore/keda:2.21.0"
	// fieldOwner applies the objects, as an operator's kubectl would.
	fieldOwner = client.FieldOwner("seed-test")
)

// seed is a cluster with one real node, NATS and KEDA's operator as pods, and housekeeper's
// chart installed from the images `make release` published to a registry on loopback.
type seed struct {
	t    testing.TB
	kube *stack.Kube
	node *stack.Node
	c    client.Client
	cs   kubernetes.Interface
	// root is the host directory of the local provider's buckets (the chart's local.hostPath).
	root string
	// values are the chart's values as installed: by hand, then in the ControllerDeployment.
	values map[string]any
	// namespace is the namespace of housekeeper's release: hkNamespace installed by hand,
	// extension-<installation> installed by gardenlet.
	namespace string
	// issued are the NATS identities `housekeeper nats-auth` issued (installNATS).
	issued natsconn.Issued
	// logFile is the writer of a component's log in the directory kept when the test fails.
	logFile func(name string) io.Writer
	// release is what `make release` published to the registry on loopback the node pulls from.
	release *release.Result
	// registry is that registry's host and path, as REGISTRY was given.
	registry string
}

// startSeed starts it all and waits until housekeeper is installed: the setup Job complete,
// the bridge ready.
func startSeed(t testing.TB) *seed {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the node needs root (network and mount namespaces, cgroups, iptables): run the tests as root")
	}
	logDir, err := os.MkdirTemp("", "housekeeper-seed-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("component logs kept in %s", logDir)
			return
		}
		_ = os.RemoveAll(logDir)
	})
	logFile := func(name string) io.Writer {
		f, err := os.Create(filepath.Join(logDir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		return f
	}
	// The release and the images are built before the clock starts: compiling them from a cold
	// build cache on two busy cores takes minutes, bounded by go test's -timeout alone.
	start := time.Now()
	registry, registryPort := startRegistry(t)
	published := publishRelease(t, registry)
	t.Logf("housekeeper released to %s (make release) in %s", registry, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	tarballs := thirdPartyImages(t, context.Background())
	t.Logf("NATS's and KEDA's images built in %s", time.Since(start).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// envtest and gardenlet's controllers log through controller-runtime's logger: into a file of
	// their own, not a "SetLogger was never called" stack trace in the test's output.
	ctrllog.SetLogger(ctrlzap.New(ctrlzap.WriteTo(logFile("controller-runtime"))))
	k, err := stack.StartKube(logFile("kube-apiserver"), stack.ForNode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.Stop(); err != nil {
			t.Errorf("stopping kube-apiserver: %v", err)
		}
	})
	start = time.Now()
	// NetworkPolicies enforced: the chart's default policies and NATS's stay on throughout.
	node, err := stack.StartNode(k, stack.NodeOptions{Dir: t.TempDir(), Logs: logFile, Images: tarballs, NetworkPolicies: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := node.Stop(); err != nil {
			t.Errorf("stopping the node: %v", err)
		}
	})
	t.Logf("node started with the images in %s", time.Since(start).Round(time.Millisecond))
	if err := node.PullFromHostRegistry(registryPort); err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewClient(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	s := &seed{t: t, kube: k, node: node, c: c, cs: node.Client(), root: t.TempDir(), namespace: hkNamespace, logFile: logFile,
		release: published, registry: registry}
	// Registered after the node's Stop, so it runs before it: the pods' logs while they exist.
	t.Cleanup(func() {
		if t.Failed() {
			s.savePodLogs(logDir)
		}
	})
	// The buckets' directory belongs to the functions' user, as a seed's volume would.
	if err := os.Chown(s.root, 65532, 65532); err != nil {
		t.Fatal(err)
	}

	start = time.Now()
	s.issued = s.installNATS(ctx)
	t.Logf("NATS: 3 pods ready in %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	s.installKEDA(ctx)
	t.Logf("KEDA's operator ready in %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	s.installHousekeeper(ctx, s.issued)
	t.Logf("housekeeper installed (setup Job complete, bridge ready) in %s", time.Since(start).Round(time.Millisecond))
	return s
}

// startRegistry serves an OCI registry (go-containerregistry's, in memory) on loopback, where
// the release is pushed, and returns its host and path (REGISTRY of `make release`) and port. It
// listens on every address, so that the node's containerd reaches it as well, at the host's
// end of its link (stack.Node.PullFromHostRegistry).
func startRegistry(t testing.TB) (string, int) {
	t.Helper()
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewUnstartedServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	server.Listener = l
	server.Start()
	t.Cleanup(server.Close)
	port := l.Addr().(*net.TCPAddr).Port
	return fmt.Sprintf("127.0.0.1:%d/housekeeper-dev", port), port
}

// publishRelease runs `make release` as infra/docs/upgrading.md's Releasing says, to registry, with the images
// the seed runs (housekeeper: every provider and local) and those the shipped registration's
// chart runs (housekeeper-azure, which make release requires), and returns what it published.
func publishRelease(t testing.TB, registry string) *release.Result {
	t.Helper()
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "release", "VERSION="+chartAppVersion(t), "REGISTRY="+registry,
		"RELEASE_DIR="+out, "ONLY=housekeeper,housekeeper-azure,housekeeper-bridge", "ALLOW_DIRTY=1")
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, output)
	}
	data, err := os.ReadFile(filepath.Join(out, release.ResultName))
	if err != nil {
		t.Fatal(err)
	}
	var published release.Result
	if err := json.Unmarshal(data, &published); err != nil {
		t.Fatalf("%s: %v", release.ResultName, err)
	}
	return &published
}

// tagRelease tags the release's images in the registry with tag too: the upgrade's images, the
// release's content under a new name (a rollout is what the upgrade scenario is about).
func (s *seed) tagRelease(tag string) {
	s.t.Helper()
	for _, img := range s.release.Images {
		ref, err := name.ParseReference(img.Ref)
		if err != nil {
			s.t.Fatal(err)
		}
		desc, err := remote.Get(ref)
		if err != nil {
			s.t.Fatalf("%s: %v", img.Ref, err)
		}
		if err := remote.Tag(ref.Context().Tag(tag), desc); err != nil {
			s.t.Fatalf("tagging %s as %s: %v", img.Ref, tag, err)
		}
	}
}

// thirdPartyImages builds the images no registry here serves, from the same binaries the rest
// of the tests run: nats-server (as the NATS project's image, the server at /nats-server) and
// KEDA's operator (as KEDA's, at /keda), into a tarball the node imports, cached by what it is
// built from (compressing them takes minutes on two busy cores).
func thirdPartyImages(t testing.TB, ctx context.Context) []string {
	t.Helper()
	natsBin, err := stack.NATSServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	kedaBin, err := stack.KEDAOperatorBinary()
	if err != nil {
		t.Fatal(err)
	}
	etcdbrDir, err := stack.EtcdBRDir()
	if err != nil {
		t.Fatal(err)
	}
	etcdbrctl := filepath.Join(etcdbrDir, "etcdbrctl")
	specs := map[string]images.Spec{
		"nats:" + natsVersion(t): {Binary: natsBin, Path: "/nats-server", Ports: []string{"4222", "6222", "8222"}},
		kedaImage:                {Binary: kedaBin, Path: "/keda"},
		// As etcd-backup-restore's image: distroless, etcdbrctl at /etcdbrctl, no shell.
		etcdBackupRestoreImage(t): {Binary: etcdbrctl, Path: "/etcdbrctl"},
	}
	in := stack.Inputs{Text: []string{runtime.GOARCH}, Sources: []string{"scripts/images/*.go"}, Installed: []string{natsBin, kedaBin, etcdbrctl}}
	for ref, spec := range specs {
		in.Text = append(in.Text, fmt.Sprintf("%s %+v", ref, spec))
	}
	slices.Sort(in.Text)
	tarball, _, err := stack.Cached("seed-third-party-images", in, func(out string) error {
		theirs := map[name.Reference]v1.Image{}
		for ref, spec := range specs {
			r, err := images.ParseReference(ref)
			if err != nil {
				return err
			}
			img, err := images.Binary(ctx, spec)
			if err != nil {
				return fmt.Errorf("image %s: %w", ref, err)
			}
			theirs[r] = img
		}
		return images.WriteTarball(ctx, out, theirs)
	})
	if err != nil {
		t.Fatal(err)
	}
	return []string{tarball}
}

// etcdBackupRestoreImage is gardener's image of etcd-backup-restore at the pinned version
// (gardener's image vector, imagevector/containers.yaml: etcd-backup-restore).
func etcdBackupRestoreImage(t testing.TB) string {
	t.Helper()
	v, err := stack.Versions()
	if err != nil {
		t.Fatal(err)
	}
	return "europe-docker.pkg.dev/gardener-project/releases/gardener/etcdbrctl:" + v["ETCDBR_VERSION"]
}

// chartAppVersion is infra/chart/Chart.yaml's appVersion: the images' default tag is v<it>.
func chartAppVersion(t testing.TB) string {
	t.Helper()
	data, err := chart.FS.ReadFile("Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^appVersion:\s*"?([^"\s]+)"?`).FindSubmatch(data)
	if m == nil {
		t.Fatal("infra/chart/Chart.yaml has no appVersion")
	}
	return string(m[1])
}

// natsVersion is the nats-server version go.mod pins, without its v: the NATS image's tag.
func natsVersion(t testing.TB) string {
	t.Helper()
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-C", root, "-m", "-f", "{{.Version}}", "github.com/nats-io/nats-server/v2").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
}

// installNATS installs NATS as infra/docs/deploy.md tells operators to: the Secrets of its accounts
// (`housekeeper nats-auth`, config form) and its TLS certificate, then infra/nats/nats.yaml as
// it is. The volumes its StatefulSet claims are static PersistentVolumes on the node, of a
// default StorageClass without a provisioner, owned by NATS's user as a provisioner would hand
// them over.
func (s *seed) installNATS(ctx context.Context) natsconn.Issued {
	t := s.t
	dir := t.TempDir()
	if err := natsconn.Issue(dir, natsconn.FormConfig, "", hkcli.Permissions()); err != nil {
		t.Fatal(err)
	}
	hosts := []string{"nats." + natsNamespace + ".svc.cluster.local", "*.nats-headless." + natsNamespace + ".svc.cluster.local",
		"nats." + natsNamespace + ".svc", "*.nats-headless." + natsNamespace + ".svc"}
	tls, err := natsconn.WriteTLS(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	s.create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: natsNamespace}})
	s.create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "nats-accounts", Namespace: natsNamespace},
		Data: map[string][]byte{"accounts.conf": s.read(filepath.Join(dir, "accounts.conf"))}})
	s.create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "nats-tls", Namespace: natsNamespace},
		Data: map[string][]byte{"tls.crt": s.read(tls.ServerCert), "tls.key": s.read(tls.ServerKey), "ca.crt": s.read(tls.CA)}})

	s.staticVolumes(ctx, 3)
	root, _ := stack.RepoRoot()
	for _, obj := range decodeYAML(t, s.read(filepath.Join(root, "infra/nats/nats.yaml"))) {
		obj.SetNamespace(natsNamespace)
		s.apply(ctx, obj)
	}
	s.awaitPods(ctx, natsNamespace, "app.kubernetes.io/name=nats", 3, 5*time.Minute)
	return natsconn.Issued{Dir: dir, Form: natsconn.FormConfig, CA: tls.CA}
}

// staticVolumes creates the default StorageClass "local" (no provisioner: volumes are bound to
// claims as their pods are scheduled) and n hostPath PersistentVolumes of 10 GiB on the node,
// each a directory NATS's user (65532) owns.
func (s *seed) staticVolumes(ctx context.Context, n int) {
	t := s.t
	sc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
		"metadata":          map[string]any{"name": "local", "annotations": map[string]any{"storageclass.kubernetes.io/is-default-class": "true"}},
		"provisioner":       "kubernetes.io/no-provisioner",
		"volumeBindingMode": "WaitForFirstConsumer",
	}}
	s.apply(ctx, sc)
	for i := range n {
		path := filepath.Join(t.TempDir(), "pv")
		if err := os.Mkdir(path, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, 65532, 65532); err != nil {
			t.Fatal(err)
		}
		s.create(ctx, &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("local-%d", i)},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName:              "local",
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}},
			},
		})
	}
}

// installKEDA installs KEDA's operator as KEDA deploys it: its CRDs, its namespace, a
// ServiceAccount with KEDA's own ClusterRole (config/rbac of the KEDA module), and a Deployment
// of its image. Without the admission webhooks and the metrics adapter (KEDA's other two
// Deployments): scaling between zero and one is the operator's alone.
func (s *seed) installKEDA(ctx context.Context) {
	t := s.t
	if err := stack.InstallKEDACRDs(s.kube); err != nil {
		t.Fatal(err)
	}
	s.create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kedaNamespace}})
	s.create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "keda-operator", Namespace: kedaNamespace}})
	for _, obj := range decodeYAML(t, s.read(filepath.Join(kedaModuleDir(t), "config/rbac/role.yaml"))) {
		if obj.GetKind() == "ClusterRole" {
			s.apply(ctx, obj)
		}
	}
	manifest := fmt.Sprintf(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: keda-operator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: keda-operator}
subjects: [{kind: ServiceAccount, name: keda-operator, namespace: %[1]s}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: keda-operator, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: keda-operator}}
  template:
    metadata: {labels: {app: keda-operator}}
    spec:
      serviceAccountName: keda-operator
      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: keda-operator
          image: %[2]s
          imagePullPolicy: IfNotPresent
          args: ["--health-probe-bind-address=:8081", "--metrics-bind-address=0", "--zap-log-level=info", "--zap-encoder=json"]
          env:
            - {name: WATCH_NAMESPACE, value: ""}
            - {name: KEDA_CLUSTER_OBJECT_NAMESPACE, value: %[1]s}
            - {name: POD_NAMESPACE, value: %[1]s}
          readinessProbe: {httpGet: {path: /readyz, port: 8081}, periodSeconds: 2}
          securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
`, kedaNamespace, kedaImage)
	for _, obj := range decodeYAML(t, []byte(manifest)) {
		s.apply(ctx, obj)
	}
	s.awaitPods(ctx, kedaNamespace, "app=keda-operator", 1, 3*time.Minute)
}

// kedaModuleDir is where the KEDA module test/keda builds from lies in the module cache.
func kedaModuleDir(t testing.TB) string {
	t.Helper()
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-C", filepath.Join(root, "test/keda"), "-m", "-f", "{{.Dir}}", "github.com/kedacore/keda/v2").Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Fatalf("the KEDA module of test/keda: %v", err)
	}
	return string(bytes.TrimSpace(out))
}

// installHousekeeper installs the chart by hand as infra/docs/deploy.md says: the identities Secret
// with what nats-auth issued (config form, the chart's default) and NATS's CA, then the chart
// rendered with the local provider, applied; it waits for the setup Job and the bridge.
func (s *seed) installHousekeeper(ctx context.Context, issued natsconn.Issued) {
	s.create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hkNamespace}})
	s.createIdentities(ctx, hkNamespace, issued)

	fast := map[string]any{"pollingInterval": 2, "cooldownPeriod": 5}
	functions := map[string]any{}
	for _, fn := range []string{"bucket", "entry", "purge", "schedule", "snapshot", "drill"} {
		functions[fn] = fast
	}
	s.values = map[string]any{
		"cluster": "seed-e2e", "types": []any{"local"}, "local": map[string]any{"hostPath": s.root},
		"image":  map[string]any{"registry": s.registry},
		"stream": map[string]any{"replicas": 3},
		// Policies see the API server's real port, after kube-proxy's translation of the
		// kubernetes Service (infra/docs/configuration.md: networkPolicy.apiServerPorts).
		"networkPolicy": map[string]any{"apiServerPorts": []any{s.node.APIServerPort}},
		// A killed function's events come back after the ack wait: 6 s rather than 30 s.
		"consumer":  map[string]any{"ackWait": "6s"},
		"functions": functions,
		// The drill runs etcd-backup-restore's restore too, from its image.
		"drill": map[string]any{"etcdBackupRestoreImage": etcdBackupRestoreImage(s.t)},
	}
	s.installChart(ctx, s.values)
	s.awaitJobComplete(ctx, hkNamespace, "app.kubernetes.io/component=setup", 5*time.Minute)
	s.awaitPods(ctx, hkNamespace, "app.kubernetes.io/component=bridge", 2, 3*time.Minute)
}

// createIdentities creates the identities Secret in the release's namespace, as infra/docs/deploy.md
// ("NATS identities") tells operators to: each identity's credentials that nats-auth issued
// (config form, the chart's default) and NATS's CA.
func (s *seed) createIdentities(ctx context.Context, namespace string, issued natsconn.Issued) {
	identities := map[string][]byte{"ca.pem": s.read(issued.CA)}
	for _, p := range hkcli.Permissions() {
		file := issued.CredentialsFile(p.Identity)
		identities[filepath.Base(file)] = s.read(file)
	}
	s.create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "housekeeper-nats", Namespace: namespace}, Data: identities})
}

// installChart renders the chart with values and applies every object, CRDs first.
func (s *seed) installChart(ctx context.Context, values map[string]any) {
	objs := s.renderChart(values)
	for _, crdsFirst := range []bool{true, false} {
		for _, obj := range objs {
			if (obj.GetKind() == "CustomResourceDefinition") == crdsFirst {
				s.apply(ctx, obj)
			}
		}
		if crdsFirst {
			time.Sleep(2 * time.Second) // established
		}
	}
}

// renderChart renders the chart by hand into hkNamespace, as installChart installs it.
func (s *seed) renderChart(values map[string]any) []*unstructured.Unstructured {
	t := s.t
	versions, err := stack.Versions()
	if err != nil {
		t.Fatal(err)
	}
	r, err := chart.Render(hkNamespace, values, versions["KUBERNETES_VERSION"])
	if err != nil {
		t.Fatal(err)
	}
	return decodeYAML(t, r.Manifest())
}

func (s *seed) create(ctx context.Context, obj client.Object) {
	s.t.Helper()
	if err := s.c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		s.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func (s *seed) apply(ctx context.Context, obj *unstructured.Unstructured) {
	s.t.Helper()
	if err := s.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), fieldOwner, client.ForceOwnership); err != nil {
		s.t.Fatalf("applying %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
}

func (s *seed) read(path string) []byte {
	s.t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		s.t.Fatal(err)
	}
	return data
}

func decodeYAML(t testing.TB, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatal(err)
		}
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

// awaitPods waits until n pods matching selector are Ready.
func (s *seed) awaitPods(ctx context.Context, ns, selector string, n int, timeout time.Duration) []corev1.Pod {
	s.t.Helper()
	var ready []corev1.Pod
	s.eventually(timeout, fmt.Sprintf("%d ready pods %s in %s", n, selector, ns), func() (bool, string) {
		pods, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		ready = ready[:0]
		var states []string
		for _, p := range pods.Items {
			if podReady(&p) {
				ready = append(ready, p)
			}
			states = append(states, podState(&p))
		}
		return len(ready) >= n, strings.Join(states, "; ")
	})
	return ready
}

func (s *seed) awaitJobComplete(ctx context.Context, ns, selector string, timeout time.Duration) {
	s.t.Helper()
	s.eventually(timeout, "the Job "+selector+" complete", func() (bool, string) {
		jobs, err := s.cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(jobs.Items) == 0 {
			return false, fmt.Sprint("no Job: ", err)
		}
		j := jobs.Items[0]
		status, _ := json.Marshal(j.Status.Conditions)
		return j.Status.Succeeded > 0, fmt.Sprintf("%s: active %d failed %d %s", j.Name, j.Status.Active, j.Status.Failed, status)
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podState is a pod's phase and its containers' states, for a failure's message.
func podState(p *corev1.Pod) string {
	s := p.Name + " " + string(p.Status.Phase)
	for _, c := range p.Status.ContainerStatuses {
		switch {
		case c.State.Waiting != nil:
			s += fmt.Sprintf(" %s waiting %s %s", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
		case c.State.Terminated != nil:
			s += fmt.Sprintf(" %s terminated %s (exit %d)", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode)
		default:
			s += fmt.Sprintf(" %s running (restarts %d)", c.Name, c.RestartCount)
		}
	}
	return s
}

// eventually polls cond every 250 ms until it holds, failing the test with cond's last word
// after timeout.
func (s *seed) eventually(timeout time.Duration, what string, cond func() (bool, string)) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not after %s: %s", what, timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// savePodLogs writes every pod's logs (through the API server and the kubelet, as kubectl logs)
// into dir, one file per container, for a failed test.
func (s *seed) savePodLogs(dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	namespaces := []string{natsNamespace, kedaNamespace, hkNamespace}
	if s.namespace != hkNamespace {
		namespaces = append(namespaces, s.namespace)
	}
	for _, ns := range namespaces {
		pods, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			s.t.Logf("pods of %s: %v", ns, err)
			continue
		}
		for _, p := range pods.Items {
			for _, c := range p.Spec.Containers {
				logs, err := s.cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
				if err != nil {
					logs = []byte(err.Error())
				}
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("pod-%s-%s-%s.log", ns, p.Name, c.Name)), logs, 0o644)
			}
		}
	}
}
