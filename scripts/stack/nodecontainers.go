package stack

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ImportImages imports image tarballs (images.WriteTarball; `docker save` archives too) into
// the node's containerd, where the kubelet finds them: pods must not pull them (a tag other
// than latest, or imagePullPolicy IfNotPresent or Never).
func (n *Node) ImportImages(tarballs ...string) error {
	for _, t := range tarballs {
		if err := n.ctr("images", "import", t); err != nil {
			return fmt.Errorf("importing %s: %w", t, err)
		}
	}
	return nil
}

func (n *Node) registryHostsDir() string { return n.path("containerd/certs.d") }

// PullFromHostRegistry lets the node pull the images of a registry serving plain HTTP on the
// host's loopback, port port (127.0.0.1:<port>/…, as a test pushed them): the node's loopback is
// its own, so its containerd reaches the registry at the host's end of the link (which the
// registry must listen on too), as a mirror in the registry's hosts.toml. Images keep their
// names.
func (n *Node) PullFromHostRegistry(port int) error {
	registry := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	server := "http://" + net.JoinHostPort(n.HostIP, strconv.Itoa(port))
	dir := filepath.Join(n.registryHostsDir(), registry)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	hosts := fmt.Sprintf("server = %[1]q\n\n[host.%[1]q]\n  capabilities = [\"pull\", \"resolve\"]\n", server)
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644)
}

// ContainerID is the container runtime's ID of a pod's container (its status's containerID
// without the containerd:// prefix), "" while it has none.
func (n *Node) ContainerID(ctx context.Context, namespace, pod, container string) (string, error) {
	p, err := n.client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if s.Name == container {
			_, id, _ := strings.Cut(s.ContainerID, "://")
			return id, nil
		}
	}
	return "", fmt.Errorf("pod %s/%s has no container %q", namespace, pod, container)
}

// KillContainer kills a running container of a pod with SIGKILL through containerd, as the
// kernel's OOM killer or a crash would end it: the kubelet sees it exit (137) and restarts it
// as the pod's restartPolicy says.
func (n *Node) KillContainer(ctx context.Context, namespace, pod, container string) error {
	id, err := n.ContainerID(ctx, namespace, pod, container)
	if err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("container %q of pod %s/%s has not started", container, namespace, pod)
	}
	return n.ctr("tasks", "kill", "--signal", "SIGKILL", id)
}

// SignalContainer sends signal (e.g. SIGHUP) to a running container's process through
// containerd, as `kill -HUP` in the container would.
func (n *Node) SignalContainer(ctx context.Context, namespace, pod, container, signal string) error {
	id, err := n.ContainerID(ctx, namespace, pod, container)
	if err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("container %q of pod %s/%s has not started", container, namespace, pod)
	}
	return n.ctr("tasks", "kill", "--signal", signal, id)
}

// ReadContainerFile reads a file as a running container of a pod sees it (a mounted Secret's
// file included), through its process's root (/proc/<pid>/root), without executing anything in
// the container.
func (n *Node) ReadContainerFile(ctx context.Context, namespace, pod, container, path string) ([]byte, error) {
	id, err := n.ContainerID(ctx, namespace, pod, container)
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, fmt.Errorf("container %q of pod %s/%s has not started", container, namespace, pod)
	}
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.containerdSocket(), "--namespace", k8sNamespace, "tasks", "ls").Output()
	if err != nil {
		return nil, fmt.Errorf("ctr tasks ls: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			return os.ReadFile(filepath.Join("/proc", f[1], "root", path))
		}
	}
	return nil, fmt.Errorf("container %q of pod %s/%s (%s) has no task", container, namespace, pod, id)
}

// ctr runs containerd's client on the node's containerd, in the CRI plugin's namespace.
func (n *Node) ctr(args ...string) error {
	return runCmd(append([]string{"ctr", "--address", n.containerdSocket(), "--namespace", k8sNamespace}, args...)...)
}
