// Package compose brings docker-compose.yaml up for real: a Docker Engine of the test's own
// (scripts/stack/docker.go: Debian's docker.io in its own directories and network namespace),
// housekeeper's images as `make images` builds them, the public images swapped for stand-ins
// built here (override.yaml, images_test.go), then `docker compose up -d`. It observes through
// the stack's Kubernetes API and its object stores — never housekeeper's own report — that
// infra/examples' BackupBuckets and BackupEntries converge (the buckets exist in their stores;
// the entries are Succeeded with their etcd-backup secrets) and that the example entry with a
// short retention, deleted, is purged: exactly its prefix is gone, its neighbours' objects
// stay. Then `docker compose down -v` leaves nothing of the project, and the engine, stopped,
// nothing on the host.
package compose

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// The examples of infra/examples the test follows, one per object store type the compose
// file's functions serve (HOUSEKEEPER_TYPES: azure, local, aws, gcp).
var (
	buckets = []string{"example-azure", "example-local", "example-s3", "example-gcs"}
	entries = []string{"shoot--dev--alpha--5d1c9e2a", "shoot--dev--beta--7f3b0c44", "shoot--dev--delta--3c8e5b17", "shoot--dev--epsilon--5d9f0c28"}
	// The entry with a 20s retention, deleted by the test, and its neighbour in the same bucket.
	purged, neighbour = "shoot--dev--gamma--2a9e61d0", "shoot--dev--alpha--5d1c9e2a"
)

const (
	project     = "housekeeper" // docker-compose.yaml's name
	azureBucket = "example-azure"
)

func yamlUnmarshal(data []byte, v any) error { return yaml.Unmarshal(data, v) }

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// override.yaml swaps every public image of docker-compose.yaml, and only those, for the
// stand-in this package builds at the original's version, and sets nothing but images.
func TestOverride(t *testing.T) {
	root := repoRoot(t)
	over, err := overrideImages(root)
	if err != nil {
		t.Fatal(err)
	}
	var base struct {
		Services map[string]struct {
			Image string `json:"image"`
		} `json:"services"`
	}
	data, err := os.ReadFile(filepath.Join(root, "docker-compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &base); err != nil {
		t.Fatal(err)
	}
	built := map[string]string{}
	list, err := standIns(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		for _, svc := range s.services {
			built[svc] = s.ref
		}
	}
	for svc, s := range base.Services {
		own := strings.HasPrefix(s.Image, "housekeeper:") || strings.HasPrefix(s.Image, "housekeeper-bridge:")
		got, swapped := over[svc]
		switch {
		case own && swapped:
			t.Errorf("%s: housekeeper's own image %s is swapped for %s", svc, s.Image, got)
		case own:
		case !swapped:
			t.Errorf("%s: the public image %s is not swapped (no registry serves it here)", svc, s.Image)
		default:
			// The version: the original's tag without its flavour (2.15.2-alpine, v1.36.3-k3s1).
			wantTag, _, _ := strings.Cut(s.Image[strings.LastIndex(s.Image, ":")+1:], "-")
			if tag := got[strings.LastIndex(got, ":")+1:]; tag != wantTag {
				t.Errorf("%s: %s stands in for %s: want version %s", svc, got, s.Image, wantTag)
			}
			if built[svc] != got {
				t.Errorf("%s: override.yaml says %s, the test builds %s (from the installed components' versions)", svc, got, built[svc])
			}
		}
	}
	for svc := range over {
		if _, ok := base.Services[svc]; !ok {
			t.Errorf("override.yaml names %s, which docker-compose.yaml does not have", svc)
		}
	}
	// scripts/install-docker.sh installs the Compose the Go side looks for.
	script, err := os.ReadFile(filepath.Join(root, "scripts/install-docker.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "DOCKER_COMPOSE_VERSION=${DOCKER_COMPOSE_VERSION:-"+stack.DefaultDockerComposeVersion+"}") {
		t.Errorf("scripts/install-docker.sh does not pin Docker Compose %s (stack.DefaultDockerComposeVersion)", stack.DefaultDockerComposeVersion)
	}
}

func TestComposeUp(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the test runs its own dockerd, which needs root (mounts, namespaces, cgroups, iptables): run the tests as root")
	}
	root := repoRoot(t)
	started := time.Now()
	phase := started
	timed := func(what string) {
		t.Logf("%s in %s (%s in all)", what, time.Since(phase).Round(100*time.Millisecond), time.Since(started).Round(100*time.Millisecond))
		phase = time.Now()
	}
	logDir, err := os.MkdirTemp("", "housekeeper-TestComposeUp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs kept in %s", logDir)
			return
		}
		_ = os.RemoveAll(logDir)
	})
	logFile := func(name string) *os.File {
		f, err := os.Create(filepath.Join(logDir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	hostBefore := hostDockerState(t)

	// The images and the engine, side by side; the images' compiling is not on the clock, which
	// starts once they are built.
	build := context.Background()
	work := t.TempDir()
	ownTar := filepath.Join(work, "housekeeper.tar")
	var standInsTar string
	builds := make(chan error, 2)
	go func() {
		var err error
		standInsTar, err = standInsTarball(build, root, work, t.Logf)
		builds <- err
	}()
	go func() {
		// `make images REGISTRY= TAG=local ONLY=housekeeper,housekeeper-bridge`, as the compose file says.
		cmd := exec.CommandContext(build, "go", "run", "./scripts/cmd/images", "-registry", "", "-tag", "local",
			"-only", "housekeeper,housekeeper-bridge", "-o", ownTar)
		cmd.Dir = root
		out := logFile("images")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			builds <- fmt.Errorf("make images: %w (see %s)", err, out.Name())
			return
		}
		builds <- nil
	}()
	dockerdLog := logFile("dockerd")
	docker, err := stack.StartDocker(dockerdLog)
	if err != nil {
		t.Fatal(err)
	}
	engineDir, engineCgroup := docker.Dir(), docker.Cgroup()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			if t.Failed() {
				dumpCompose(t, docker, root, logDir)
			}
			if err := docker.Stop(); err != nil {
				t.Errorf("stopping dockerd: %v", err)
			}
		}
	})
	timed("dockerd started")
	for range 2 {
		if err := <-builds; err != nil {
			t.Fatal(err)
		}
	}
	timed("images built (housekeeper's with scripts/cmd/images, the stand-ins with scripts/images)")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	for _, tarball := range []string{ownTar, standInsTar} {
		run(t, ctx, docker.Command(ctx, "load", "-i", tarball), logFile("load-"+filepath.Base(tarball)))
	}
	timed("images loaded (docker load)")

	composeLog := logFile("compose")
	compose := func(args ...string) {
		t.Helper()
		cmd := docker.Command(ctx, append([]string{"compose", "-f", "docker-compose.yaml", "-f", "test/compose/override.yaml"}, args...)...)
		cmd.Dir = root
		run(t, ctx, cmd, composeLog)
	}
	compose("up", "-d")
	timed("docker compose up -d")

	// The stack's Kubernetes API, with the kubeconfig kube-init works from, as the compose
	// file's header fetches it.
	kubeconfigPath := filepath.Join(work, "kubeconfig.yaml")
	compose("cp", "k3s:/output/kubeconfig.yaml", kubeconfigPath)
	kubeconfig, err := os.ReadFile(kubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := url.Parse(cfg.Host); err != nil || u.Host != "127.0.0.1:6443" {
		t.Fatalf("kubeconfig's server %s, want https://127.0.0.1:6443 (k3s's, the port published)", cfg.Host)
	}
	cfg.Dial = docker.DialContext // the published ports are in the engine's network namespace
	c, err := client.New(cfg, client.Options{Scheme: kube.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	published := &http.Client{Transport: &http.Transport{DialContext: docker.DialContext}}
	blobs := azuriteClient(t, published)
	s3 := (&stack.S3{Endpoint: "http://127.0.0.1:7070"}).Client(published)

	// The buckets: Succeeded, and there in their stores.
	for _, name := range buckets {
		waitSucceeded(t, ctx, c, &extensionsv1alpha1.BackupBucket{}, name)
	}
	if _, err := blobs.ServiceClient().NewContainerClient(azureBucket).GetProperties(ctx, nil); err != nil {
		t.Errorf("Azurite: container %s: %v", azureBucket, err)
	}
	if _, err := s3.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String("example-s3")}); err != nil {
		t.Errorf("versitygw: bucket example-s3: %v", err)
	}
	if resp, err := published.Get("http://127.0.0.1:4443/storage/v1/b/example-gcs"); err != nil {
		t.Errorf("fake-gcs-server: bucket example-gcs: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("fake-gcs-server: bucket example-gcs: %s %s", resp.Status, body)
		}
	}
	localBucket := filepath.Join(work, "example-local")
	compose("cp", "bucket:/var/lib/housekeeper/buckets/example-local", localBucket)
	if st, err := os.Stat(localBucket); err != nil || !st.IsDir() {
		t.Errorf("the buckets volume has no bucket directory example-local: %v", err)
	}
	// The entries: Succeeded, with the etcd-backup secret in the shoot's namespace.
	for _, name := range append(slices.Clone(entries), purged) {
		e := &extensionsv1alpha1.BackupEntry{}
		waitSucceeded(t, ctx, c, e, name)
		secret := &corev1.Secret{}
		key := client.ObjectKey{Namespace: gardener.EntryNamespace(name), Name: "etcd-backup"}
		if err := c.Get(ctx, key, secret); err != nil {
			t.Errorf("entry %s: secret %s: %v", name, key, err)
		} else if got := string(secret.Data["bucketName"]); got != e.Spec.BucketName {
			t.Errorf("entry %s: secret %s says bucketName %q, want %q", name, key, got, e.Spec.BucketName)
		}
	}
	timed("buckets and entries converged")

	// Backups under the entry to purge and around it, as etcd-backup-restore writes them.
	inside := snapshots(gardener.EntryPrefix(purged), 6)
	outside := slices.Concat(snapshots(gardener.EntryPrefix(neighbour), 4),
		[]string{purged + "-not-its-prefix/etcd-main/v2/Full-1", purged + "0/etcd-main/v2/Full-1", "root-object"})
	for _, k := range slices.Concat(inside, outside) {
		if _, err := blobs.UploadBuffer(ctx, azureBucket, k, []byte("snapshot"), nil); err != nil {
			t.Fatalf("Azurite: upload %s: %v", k, err)
		}
	}
	gamma := &extensionsv1alpha1.BackupEntry{}
	if err := c.Get(ctx, client.ObjectKey{Name: purged}, gamma); err != nil {
		t.Fatal(err)
	}
	if gamma.Annotations["housekeeper.dev/retention"] != "20s" {
		t.Fatalf("entry %s: retention %q, want the example's 20s", purged, gamma.Annotations["housekeeper.dev/retention"])
	}
	if err := c.Delete(ctx, gamma); err != nil {
		t.Fatal(err)
	}
	// Kept (by its finalizer) for its retention from the deletion, then purged, then released.
	if err := c.Get(ctx, client.ObjectKey{Name: purged}, gamma); err != nil || gamma.DeletionTimestamp == nil {
		t.Fatalf("entry %s after its delete: %v, deletionTimestamp %v", purged, err, gamma.DeletionTimestamp)
	}
	due := gamma.DeletionTimestamp.Add(20 * time.Second)
	var gone time.Time
	if err := stack.Poll(3*time.Minute, 500*time.Millisecond, "entry "+purged+" to be purged and released", func() (bool, string, error) {
		err := c.Get(ctx, client.ObjectKey{Name: purged}, gamma)
		if apierrors.IsNotFound(err) {
			gone = time.Now()
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		if time.Until(due) > 2*time.Second {
			if n := len(listBlobs(t, ctx, blobs, gardener.EntryPrefix(purged))); n != len(inside) {
				return false, "", fmt.Errorf("%d of %d objects left under %s %s before its due time", n, len(inside), gardener.EntryPrefix(purged), time.Until(due).Round(time.Second))
			}
		}
		return false, fmt.Sprintf("%+v", gamma.Status.LastOperation), nil
	}); err != nil {
		t.Fatal(err)
	}
	if gone.Before(due) {
		t.Errorf("entry %s released at %s, before its due time %s (deleted at %s, retention 20s)", purged, gone, due, gamma.DeletionTimestamp)
	}
	if left := listBlobs(t, ctx, blobs, gardener.EntryPrefix(purged)); len(left) != 0 {
		t.Errorf("%d objects left under %s: %v", len(left), gardener.EntryPrefix(purged), left)
	}
	all := listBlobs(t, ctx, blobs, "")
	for _, k := range outside {
		if !slices.Contains(all, k) {
			t.Errorf("%s, outside %s, was deleted", k, gardener.EntryPrefix(purged))
		}
	}
	timed("entry " + purged + " purged, exactly its prefix")

	// down -v: nothing of the project is left in the engine.
	compose("down", "-v")
	timed("docker compose down -v")
	label := url.QueryEscape(fmt.Sprintf(`{"label":["com.docker.compose.project=%s"]}`, project))
	var left struct {
		Containers []struct{ Names []string }
		Networks   []struct{ Name string }
		Volumes    struct{ Volumes []struct{ Name string } }
	}
	for path, out := range map[string]any{"/containers/json?all=1&filters=" + label: &left.Containers,
		"/networks?filters=" + label: &left.Networks, "/volumes?filters=" + label: &left.Volumes} {
		if err := docker.API(ctx, http.MethodGet, path, nil, out); err != nil {
			t.Fatal(err)
		}
	}
	if len(left.Containers)+len(left.Networks)+len(left.Volumes.Volumes) > 0 {
		t.Errorf("after docker compose down -v: containers %v, networks %v, volumes %v", left.Containers, left.Networks, left.Volumes.Volumes)
	}

	stopped = true
	if err := docker.Stop(); err != nil {
		t.Errorf("stopping dockerd: %v", err)
	}
	if data, err := os.ReadFile(dockerdLog.Name()); err == nil {
		if i := bytes.LastIndex(data, []byte("[stack] ")); i >= 0 {
			t.Log(strings.TrimSpace(string(data[i:])))
		}
	}
	if left := stack.DockerLeftovers(engineDir, engineCgroup); len(left) > 0 {
		t.Errorf("the stopped engine left on the host: %s", strings.Join(left, "; "))
	}
	if after := hostDockerState(t); after != hostBefore {
		t.Errorf("the host's Docker state changed:\nbefore:\n%s\nafter:\n%s", hostBefore, after)
	}
	timed("dockerd stopped, nothing left")
}

// waitSucceeded waits for obj's lastOperation to be Succeeded (4 minutes at most: the stack
// starts on a loaded machine) and fails at once on Failed.
func waitSucceeded(t *testing.T, ctx context.Context, c client.Client, obj extensionsv1alpha1.Object, name string) {
	t.Helper()
	kind := fmt.Sprintf("%T", obj)[len("*v1alpha1."):]
	if err := stack.Poll(4*time.Minute, time.Second, kind+" "+name+" to succeed", func() (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return false, err.Error(), nil
		}
		op := obj.GetExtensionStatus().GetLastOperation()
		if op == nil {
			return false, "no lastOperation", nil
		}
		if op.State == gardencorev1beta1.LastOperationStateFailed {
			return false, "", fmt.Errorf("%s %s failed: %s", kind, name, op.Description)
		}
		return op.State == gardencorev1beta1.LastOperationStateSucceeded, fmt.Sprintf("%s %s: %s", op.Type, op.State, op.Description), nil
	}); err != nil {
		t.Fatal(err)
	}
}

func azuriteClient(t *testing.T, hc *http.Client) *azblob.Client {
	t.Helper()
	cred, err := azblob.NewSharedKeyCredential(stack.AzuriteAccount, stack.AzuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := azblob.NewClientWithSharedKeyCredential("http://127.0.0.1:10000/"+stack.AzuriteAccount, cred,
		&azblob.ClientOptions{ClientOptions: policy.ClientOptions{Transport: hc}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func listBlobs(t *testing.T, ctx context.Context, c *azblob.Client, prefix string) []string {
	t.Helper()
	var out []string
	pager := c.NewListBlobsFlatPager(azureBucket, &azblob.ListBlobsFlatOptions{Prefix: &prefix})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("Azurite: list %s: %v", prefix, err)
		}
		for _, b := range page.Segment.BlobItems {
			out = append(out, *b.Name)
		}
	}
	return out
}

// snapshots are n object names under prefix as etcd-backup-restore names them.
func snapshots(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%setcd-main/v2/Incr-%08d-%08d-%d.gz", prefix, i*100+1, i*100+100, 1700000000+i)
	}
	return out
}

// run runs cmd, its output appended to log; on failure the test fails with the output's tail.
func run(t *testing.T, ctx context.Context, cmd *exec.Cmd, log *os.File) {
	t.Helper()
	var buf bytes.Buffer
	w := io.MultiWriter(log, &buf)
	cmd.Stdout, cmd.Stderr = w, w
	fmt.Fprintf(log, "$ %s\n", strings.Join(cmd.Args, " "))
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v (ctx: %v)\n%s", strings.Join(cmd.Args, " "), err, ctx.Err(), tail(buf.String(), 40))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// dumpCompose writes the services' state and logs into logDir, and their tails into the test's
// log, for a failed test.
func dumpCompose(t *testing.T, docker *stack.Docker, root, logDir string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for name, args := range map[string][]string{"ps": {"ps", "-a"}, "logs": {"logs", "--no-color", "--timestamps"}} {
		cmd := docker.Command(ctx, append([]string{"compose", "-f", "docker-compose.yaml", "-f", "test/compose/override.yaml"}, args...)...)
		cmd.Dir = root
		out, _ := cmd.CombinedOutput()
		_ = os.WriteFile(filepath.Join(logDir, "compose-"+name+".log"), out, 0o644)
		if name == "ps" {
			t.Logf("docker compose ps -a:\n%s", out)
			continue
		}
		// The last lines of each service.
		bySvc := map[string][]string{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			svc, _, _ := strings.Cut(sc.Text(), " ")
			bySvc[svc] = append(bySvc[svc], sc.Text())
		}
		for _, svc := range slices.Sorted(func(yield func(string) bool) {
			for k := range bySvc {
				if !yield(k) {
					return
				}
			}
		}) {
			lines := bySvc[svc]
			if len(lines) > 15 {
				lines = lines[len(lines)-15:]
			}
			t.Logf("%s\n%s", svc, strings.Join(lines, "\n"))
		}
	}
}

// hostDockerState is what a Docker engine would leave on the host: docker and bridge
// interfaces, iptables rules naming DOCKER chains or docker bridges, the fixed paths of
// dockerd 20.10 and containerd's shims. The test's engine has its own namespaces and
// directories, so this must not change.
func hostDockerState(t *testing.T) string {
	t.Helper()
	var lines []string
	links, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatalf("ip link: %v", err)
	}
	name := regexp.MustCompile(`^\d+: ([^:@]+)`)
	for _, l := range strings.Split(string(links), "\n") {
		if m := name.FindStringSubmatch(l); m != nil && (strings.HasPrefix(m[1], "docker") || strings.HasPrefix(m[1], "br-")) {
			lines = append(lines, "link "+m[1])
		}
	}
	for _, p := range []string{"/run/docker", "/run/containerd", "/etc/docker/key.json", "/var/lib/docker"} {
		if _, err := os.Stat(p); err == nil {
			lines = append(lines, "path "+p)
		}
	}
	rules, err := exec.Command("iptables-save").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	for _, l := range strings.Split(string(rules), "\n") {
		if strings.Contains(l, "DOCKER") || strings.Contains(l, "docker0") || strings.Contains(l, "br-") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}
