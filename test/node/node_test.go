// Package node tests the Kubernetes node of the test harness (scripts/stack/node.go): pods run
// in their own network namespaces from an imported image, a Service's ClusterIP and name work
// from a pod and from the host, a pod reaches the API server with its service account's token
// through the in-cluster config, a killed container is restarted, and a stopped node leaves
// nothing on the host; with its NetworkPolicy enforcer (netpol_test.go), policies cut pods off
// and let them through as they say.
package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/housekeeper-dev/housekeeper/scripts/images"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

const probeImage = "housekeeper.local/node-probe:test"

func TestNode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the node needs root (network and mount namespaces, cgroups, iptables): run the tests as root")
	}
	logDir, err := os.MkdirTemp("", "housekeeper-TestNode-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, logDir)
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
		t.Cleanup(func() { f.Close() })
		return f
	}
	kube, err := stack.StartKube(logFile("kube-apiserver"), stack.ForNode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kube.Stop(); err != nil {
			t.Errorf("stopping kube-apiserver: %v", err)
		}
	})
	before := snapshotHost(t)

	nodeDir := t.TempDir()
	start := time.Now()
	node, err := stack.StartNode(kube, stack.NodeOptions{Dir: nodeDir, Logs: logFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s started in %s (NodeIP %s, HostIP %s, Services %s, pods %s)",
		node.Name, time.Since(start).Round(time.Millisecond), node.NodeIP, node.HostIP, node.ServiceCIDR, node.PodCIDR)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = node.Stop()
		}
	})

	start = time.Now()
	tarball := buildProbeImage(t, context.Background()) // compiling is not on the clock
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := node.ImportImages(tarball); err != nil {
		t.Fatal(err)
	}
	t.Logf("probe image built and imported in %s", time.Since(start).Round(time.Millisecond))

	c := node.Client()
	ns := "node-test"
	mustCreate(t, func() error {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{})
		return err
	})

	// A Deployment of the probe's server behind a Service.
	labels := map[string]string{"app": "web"}
	created := time.Now()
	mustCreate(t, func() error {
		_, err := c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						ServiceAccountName:            "web",
						TerminationGracePeriodSeconds: ptr.To[int64](1),
						Containers: []corev1.Container{{
							Name:            "web",
							Image:           probeImage,
							ImagePullPolicy: corev1.PullNever,
							Args:            []string{"serve"},
							Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
								FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
							Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
							ReadinessProbe: &corev1.Probe{
								ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
								PeriodSeconds: 1,
							},
						}},
					},
				},
			},
		}, metav1.CreateOptions{})
		return err
	})
	var svc *corev1.Service
	mustCreate(t, func() error {
		var err error
		svc, err = c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: corev1.ServiceSpec{
				Selector: labels,
				Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}, metav1.CreateOptions{})
		return err
	})
	pod := awaitReadyPod(t, ctx, c, ns, "app=web", "", 2*time.Minute)
	t.Logf("web pod %s created → Ready in %s (pod IP %s)", pod.Name, time.Since(created).Round(time.Millisecond), pod.Status.PodIP)
	_, podNet, _ := net.ParseCIDR(node.PodCIDR)
	if ip := net.ParseIP(pod.Status.PodIP); ip == nil || !podNet.Contains(ip) {
		t.Errorf("pod IP %q is not in the node's pod range %s (hostNetwork? CNI?)", pod.Status.PodIP, node.PodCIDR)
	}

	// The API server reaches the kubelet (logs, as kubectl logs).
	if logs, err := c.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx); err != nil || !strings.Contains(string(logs), "serving on :8080") {
		t.Errorf("the web pod's logs through the API server: %q, %v", logs, err)
	}

	// The host reaches the pod through the Service's ClusterIP.
	clusterIP := svc.Spec.ClusterIP
	url := "http://" + net.JoinHostPort(clusterIP, "80")
	body := awaitGet(t, url+"/", 30*time.Second)
	if want := "hello from " + pod.Name; !strings.Contains(body, want) {
		t.Errorf("GET %s/ from the host = %q, want %q", url, body, want)
	}
	// The pod reaches the API server with its service account's token, in-cluster.
	body = awaitGet(t, url+"/whoami", 30*time.Second)
	if want := "system:serviceaccount:" + ns + ":web"; strings.TrimSpace(body) != want {
		t.Errorf("the pod's SelfSubjectReview = %q, want %q", body, want)
	}

	// A second pod (a Job's) reaches the first through the Service's name (CoreDNS) and so its
	// ClusterIP; the Job is then deleted by the TTL-after-finished controller. Watched, not
	// polled: the Job may be gone a second after it completes.
	jobs, err := c.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=client"})
	if err != nil {
		t.Fatal(err)
	}
	defer jobs.Stop()
	jobPods, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "job-name=client"})
	if err != nil {
		t.Fatal(err)
	}
	defer jobPods.Stop()
	created = time.Now()
	mustCreate(t, func() error {
		_, err := c.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "client"},
			Spec: batchv1.JobSpec{
				BackoffLimit:            ptr.To[int32](0),
				TTLSecondsAfterFinished: ptr.To[int32](1),
				Template: corev1.PodTemplateSpec{
					Spec: corev1.PodSpec{
						RestartPolicy:                 corev1.RestartPolicyNever,
						TerminationGracePeriodSeconds: ptr.To[int64](1),
						Containers: []corev1.Container{{
							Name:            "client",
							Image:           probeImage,
							ImagePullPolicy: corev1.PullNever,
							Args:            []string{"fetch", "http://web." + ns + ".svc.cluster.local/", "hello from " + pod.Name},
						}},
					},
				},
			},
		}, metav1.CreateOptions{})
		return err
	})
	var (
		jobPodIP, jobPodEnd string
		succeeded           time.Duration
		timeout             = time.After(2 * time.Minute)
	)
watch:
	for {
		select {
		case ev, ok := <-jobPods.ResultChan():
			if !ok {
				t.Fatal("the watch of the Job's pods ended")
			}
			if p, ok := ev.Object.(*corev1.Pod); ok {
				if p.Status.PodIP != "" {
					jobPodIP = p.Status.PodIP
				}
				for _, cs := range p.Status.ContainerStatuses {
					if term := cs.State.Terminated; term != nil {
						jobPodEnd = fmt.Sprintf("exit code %d: %s", term.ExitCode, term.Message)
					}
				}
			}
		case ev, ok := <-jobs.ResultChan():
			if !ok {
				t.Fatal("the watch of the Job ended")
			}
			if ev.Type == watch.Deleted {
				if succeeded == 0 {
					t.Fatalf("the client Job was deleted before it succeeded (its pod: %s)", jobPodEnd)
				}
				t.Logf("client Job deleted by the TTL-after-finished controller %s after it was created", time.Since(created).Round(time.Millisecond))
				break watch
			}
			job, ok := ev.Object.(*batchv1.Job)
			if !ok {
				continue
			}
			if job.Status.Failed > 0 {
				t.Fatalf("the client Job failed: its pod ended with %s", jobPodEnd)
			}
			if job.Status.Succeeded > 0 && succeeded == 0 {
				succeeded = time.Since(created)
				t.Logf("client Job created → Succeeded in %s (pod IP %s; %s)", succeeded.Round(time.Millisecond), jobPodIP, jobPodEnd)
			}
		case <-timeout:
			t.Fatalf("the client Job neither succeeded and was deleted within 2m (succeeded after %s; its pod: %s)", succeeded, jobPodEnd)
		}
	}
	if jobPodIP == "" || jobPodIP == pod.Status.PodIP {
		t.Errorf("the Job's pod IP %q: not its own (the web pod's is %s)", jobPodIP, pod.Status.PodIP)
	}

	// A container killed through the runtime is restarted by the kubelet.
	killed := time.Now()
	if err := node.KillContainer(ctx, ns, pod.Name, "web"); err != nil {
		t.Fatal(err)
	}
	err = stack.Poll(time.Minute, 200*time.Millisecond, "the killed container to be restarted and Ready", func() (bool, string, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "web" {
				return s.RestartCount >= 1 && s.Ready, fmt.Sprintf("restarts %d, ready %v", s.RestartCount, s.Ready), nil
			}
		}
		return false, "no status", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed container restarted and Ready in %s", time.Since(killed).Round(time.Millisecond))
	if p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); err == nil {
		for _, s := range p.Status.ContainerStatuses {
			if s.LastTerminationState.Terminated == nil || s.LastTerminationState.Terminated.ExitCode != 137 {
				t.Errorf("the killed container's last state = %+v, want exit code 137 (SIGKILL)", s.LastTerminationState)
			}
		}
	}

	stopped = true
	stopAndCheckHost(t, node, nodeDir, before)
}

// buildProbeImage builds testdata/probe static and writes its image to a tarball.
func buildProbeImage(t *testing.T, ctx context.Context) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "probe")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./testdata/probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, out)
	}
	img, err := images.Binary(ctx, images.Spec{Binary: bin, Ports: []string{"8080"}})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := images.ParseReference(probeImage)
	if err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(dir, "probe.tar")
	if err := images.WriteTarball(ctx, tarball, map[name.Reference]v1.Image{ref: img}); err != nil {
		t.Fatal(err)
	}
	return tarball
}

func mustCreate(t *testing.T, create func() error) {
	t.Helper()
	if err := create(); err != nil {
		t.Fatal(err)
	}
}

// awaitReadyPod waits for a pod matching selector (other than not) to be Running and Ready.
func awaitReadyPod(t *testing.T, ctx context.Context, c kubernetes.Interface, ns, selector, not string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var ready *corev1.Pod
	err := stack.Poll(timeout, 100*time.Millisecond, "a Ready pod "+selector, func() (bool, string, error) {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error(), nil
		}
		state := "no pod"
		for i, p := range pods.Items {
			if p.Name == not || p.DeletionTimestamp != nil {
				continue
			}
			state = fmt.Sprintf("%s %s", p.Name, p.Status.Phase)
			for _, s := range p.Status.ContainerStatuses {
				if s.State.Waiting != nil {
					state += " " + s.State.Waiting.Reason + ": " + s.State.Waiting.Message
				}
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.Status.Phase == corev1.PodRunning {
					ready = &pods.Items[i]
					return true, "", nil
				}
			}
		}
		return false, state, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ready
}

func awaitGet(t *testing.T, url string, timeout time.Duration) string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	var body string
	err := stack.Poll(timeout, 200*time.Millisecond, "GET "+url, func() (bool, string, error) {
		resp, err := client.Get(url)
		if err != nil {
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK, resp.Status + ": " + body, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// snapshotHost records what a node could leave on the host: network links, routes, the
// iptables rules of every table and family, the nftables tables, the nfqueues listened on,
// mounts, cgroups, network namespaces, and the sysctls the kubelet sets.
func snapshotHost(t *testing.T) map[string]string {
	t.Helper()
	out := func(argv ...string) string {
		b, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, b)
		}
		return string(b)
	}
	// iptables-save's comments carry times.
	comments := regexp.MustCompile(`(?m)^#.*\n`)
	links := out("ip", "-o", "link", "show")
	links = regexp.MustCompile(`(?m)^\d+: `).ReplaceAllString(links, "")
	s := map[string]string{
		"links":     links,
		"routes":    out("ip", "route", "show", "table", "all"),
		"iptables":  comments.ReplaceAllString(out("iptables-save"), ""),
		"ip6tables": comments.ReplaceAllString(out("ip6tables-save"), ""),
		"netns":     out("ip", "netns", "list"),
	}
	// The tables only: the rules carry counters. (nft comes with the node's NetworkPolicy
	// enforcer, scripts/install-node.sh.)
	if _, err := exec.LookPath("nft"); err == nil {
		s["nftables"] = out("nft", "list", "tables")
	}
	// The queue numbers only: the other columns are counters.
	var queues []string
	nfq, _ := os.ReadFile("/proc/net/netfilter/nfnetlink_queue")
	for _, l := range strings.Split(string(nfq), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			queues = append(queues, "queue "+f[0])
		}
	}
	s["nfqueue"] = strings.Join(queues, "\n")
	mounts, _ := os.ReadFile("/proc/self/mounts")
	s["mounts"] = string(mounts)
	var cgroups []string
	for _, h := range []string{"memory", "cpu", "cpuset", "pids", "systemd", "unified"} {
		entries, _ := os.ReadDir(filepath.Join("/sys/fs/cgroup", h))
		for _, e := range entries {
			if e.IsDir() {
				cgroups = append(cgroups, h+"/"+e.Name())
			}
		}
	}
	s["cgroups"] = strings.Join(cgroups, "\n")
	var sysctls []string
	for _, k := range []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward"} {
		v, _ := os.ReadFile(filepath.Join("/proc/sys", k))
		sysctls = append(sysctls, k+"="+strings.TrimSpace(string(v)))
	}
	s["sysctls"] = strings.Join(sysctls, "\n")
	var paths []string
	for _, p := range []string{"/var/lib/kubelet", "/var/lib/containerd", "/var/lib/cni", "/var/log/containers", "/var/log/pods",
		"/run/containerd", "/run/netns", "/run/mount", "/run/xtables.lock", "/run/housekeeper-node-sysctls",
		"/etc/cni", "/opt/cni", "/opt/containerd"} {
		if _, err := os.Stat(p); err == nil {
			paths = append(paths, p)
		}
	}
	s["paths"] = strings.Join(paths, "\n")
	return s
}

func processesMentioning(s string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), s) {
			out = append(out, filepath.Dir(p)+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// addedLines are the lines of after that are not in before.
func addedLines(before, after string) []string {
	had := map[string]bool{}
	for _, l := range strings.Split(before, "\n") {
		had[l] = true
	}
	var added []string
	for _, l := range strings.Split(after, "\n") {
		if l != "" && !had[l] {
			added = append(added, l)
		}
	}
	return added
}

// otherNodeNames match the names and addresses of a node's slot (scripts/stack/nodenet.go).
var otherNodeNames = regexp.MustCompile(`hk-node-(\d+)|housekeeper-node-(\d+)|100\.64\.(\d+)\.|10\.96\.(\d+)\.|10\.244\.(\d+)\.`)

// otherTestsEngines match what a Docker engine of another test process (test/compose,
// scripts/stack/docker.go) puts on the host while it runs beside this one: its cgroups.
var otherTestsEngines = regexp.MustCompile(`housekeeper-docker-\d+`)

// notOtherNodes drops the lines naming another slot than slot, or another test's Docker engine.
func notOtherNodes(lines []string, slot string) []string {
	var out []string
line:
	for _, l := range lines {
		if otherTestsEngines.MatchString(l) {
			continue
		}
		for _, m := range otherNodeNames.FindAllStringSubmatch(l, -1) {
			for _, g := range m[1:] {
				if g != "" && g != slot {
					continue line
				}
			}
		}
		out = append(out, l)
	}
	return out
}

// otherNodesRun says whether a node of another slot runs on the host (its link is there).
func otherNodesRun(slot string) bool {
	ifaces, _ := net.Interfaces()
	for _, i := range ifaces {
		if strings.HasPrefix(i.Name, "hk-node-") && i.Name != "hk-node-"+slot {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// dumpLogs prints the last lines of every component's log.
func dumpLogs(t *testing.T, dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		t.Logf("--- last lines of %s:\n%s", e.Name(), strings.Join(lines, "\n"))
	}
}

// stopAndCheckHost stops node and checks that it left nothing on the host that was not there
// before (a snapshotHost taken before the node started), and nothing of its own whatever was.
func stopAndCheckHost(t *testing.T, node *stack.Node, nodeDir string, before map[string]string) {
	t.Helper()
	othersRanAtStop := otherNodesRun(strings.TrimPrefix(node.Name, "housekeeper-node-"))
	start := time.Now()
	if err := node.Stop(); err != nil {
		t.Error(err)
	}
	t.Logf("node stopped in %s", time.Since(start).Round(time.Millisecond))
	after := snapshotHost(t)
	// What is on the host now and was not before the node started. (Not the other way round: a
	// node of an earlier, killed test process may have left things that this one cleaned up.)
	// The nodes of other test processes, running beside this one, are not this one's.
	slot := strings.TrimPrefix(node.Name, "housekeeper-node-")
	// The kubelet's sysctls (and the file with the host's values) are the host's nodes' together:
	// the last node to stop restores them.
	othersRun := othersRanAtStop || otherNodesRun(slot)
	crashed := strings.Contains(before["paths"], "/run/housekeeper-node-sysctls")
	for _, what := range sortedKeys(before) {
		added := notOtherNodes(addedLines(before[what], after[what]), slot)
		if othersRun || crashed {
			added = slices.DeleteFunc(added, func(l string) bool {
				return what == "sysctls" || l == "/run/housekeeper-node-sysctls"
			})
		}
		if len(added) > 0 {
			t.Errorf("the node left something on the host: %s: %s", what, strings.Join(added, "\n"))
		}
	}
	// Whatever was there before: the node's own names are gone.
	if cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/" + node.Name); len(cgroups) > 0 {
		t.Errorf("cgroups left: %v", cgroups)
	}
	if _, err := net.InterfaceByName(node.Link); err == nil {
		t.Errorf("the host's end of the node's link, %s, is left", node.Link)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), nodeDir) {
		t.Errorf("mounts left under %s", nodeDir)
	}
	if procs := processesMentioning(nodeDir); len(procs) > 0 {
		t.Errorf("processes left naming %s: %s", nodeDir, strings.Join(procs, "\n"))
	}
}
