package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultDockerComposeVersion is scripts/install-docker.sh's pin of Docker Compose, used while
// scripts/versions.env has no DOCKER_COMPOSE_VERSION.
const DefaultDockerComposeVersion = "v2.40.3"

// DockerTools are the programs scripts/install-docker.sh installs: Debian's Docker Engine and
// CLI, and, built into the cache, the Compose CLI plugin, kubectl and etcdctl.
type DockerTools struct {
	Dockerd, Docker  string // /usr/sbin/dockerd and /usr/bin/docker of Debian's docker.io
	Compose          string // the docker-compose CLI plugin (Compose v2)
	Kubectl, Etcdctl string // at KUBERNETES_VERSION and ETCD_VERSION
}

// InstalledDockerTools finds DockerTools; ErrNotInstalled, naming the script, while one is missing.
func InstalledDockerTools() (DockerTools, error) {
	versions, err := Versions()
	if err != nil {
		return DockerTools{}, err
	}
	cache, err := CacheDir()
	if err != nil {
		return DockerTools{}, err
	}
	compose := versions["DOCKER_COMPOSE_VERSION"]
	if compose == "" {
		compose = DefaultDockerComposeVersion
	}
	dir := filepath.Join(cache, "docker")
	t := DockerTools{
		// Debian's, not whatever docker comes first in PATH: the CLI of the engine it talks to.
		Dockerd: "/usr/sbin/dockerd",
		Docker:  "/usr/bin/docker",
		Compose: filepath.Join(dir, "compose-"+compose, "docker-compose"),
		Kubectl: filepath.Join(dir, "kubectl-"+versions["KUBERNETES_VERSION"], "kubectl"),
		Etcdctl: filepath.Join(dir, "etcdctl-"+versions["ETCD_VERSION"], "etcdctl"),
	}
	for _, bin := range []string{t.Dockerd, t.Docker, t.Compose, t.Kubectl, t.Etcdctl} {
		if _, err := os.Stat(bin); err != nil {
			return DockerTools{}, fmt.Errorf("%s %w: run `make tools` (scripts/install-docker.sh)", bin, ErrNotInstalled)
		}
	}
	return t, nil
}

// Docker is a Docker Engine of its own — Debian's dockerd with the containerd it starts — for
// a test: its data-root, exec-root, pidfile, socket, key and CLI configuration in a temporary
// directory; overlay2 and the cgroupfs driver, its containers' cgroups under a parent of its
// own; and namespaces of its own: a network namespace, so that its bridges, their iptables
// rules and the ports it publishes (docker compose's fixed 127.0.0.1 ports) live there and not
// on the host, where they could collide with a system Docker or another test; and a mount
// namespace with its own /run, so that the containers' mounts and what dockerd and containerd
// write to fixed paths under /run stay off the host; there the data-root (<dir>/root) is a
// tmpfs, which goes with the namespace (the images a test loads take memory, about 1 GB for
// test/compose's, and no disk). The socket is a file in the directory,
// which the docker CLI reaches from the host; DialContext reaches a published port. Stop
// leaves nothing behind: no process, mount, cgroup, namespace, interface, rule or file.
type Docker struct {
	// Host is DOCKER_HOST: unix://<dir>/docker.sock.
	Host  string
	Tools DockerTools

	dir      string
	socket   string
	cgroup   string // the containers' cgroup parent, /housekeeper-docker-<n> in every hierarchy
	proc     *Process
	netns    *os.File // dockerd's network namespace
	netnsIno uint64
	mntnsIno uint64 // and its mount namespace
	api      *http.Client
	stopped  bool
	logs     io.Writer
}

// dockerState is written into the directory, so that the Docker of a test process that was
// killed (a test binary's time-out runs no clean-up) is removed by the next StartDocker.
type dockerState struct {
	Owner    int    // the test process
	Dockerd  int    // dockerd's pid
	Cgroup   string // the cgroup parent
	NetnsIno uint64 // dockerd's network namespace
	MntnsIno uint64 // and its mount namespace
}

func (d *Docker) state() dockerState {
	var pid int
	if d.proc != nil {
		pid = d.proc.Pid()
	}
	return dockerState{Owner: os.Getpid(), Dockerd: pid, Cgroup: d.cgroup, NetnsIno: d.netnsIno, MntnsIno: d.mntnsIno}
}

// StartDocker starts dockerd, writing its output to logs, and waits until it answers on its
// socket. It needs root.
func StartDocker(logs io.Writer) (*Docker, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("dockerd needs root (mounts, namespaces, cgroups, iptables): run the tests as root")
	}
	tools, err := InstalledDockerTools()
	if err != nil {
		return nil, err
	}
	cleanupStaleDockers()
	dir, err := os.MkdirTemp("", "housekeeper-docker-")
	if err != nil {
		return nil, err
	}
	d := &Docker{Tools: tools, dir: dir, socket: filepath.Join(dir, "docker.sock"), logs: logs,
		cgroup: "/" + filepath.Base(dir)}
	d.Host = "unix://" + d.socket
	d.api = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
		},
	}}
	if err := d.start(); err != nil {
		_ = d.Stop()
		return nil, err
	}
	return d, nil
}

func (d *Docker) path(rel string) string { return filepath.Join(d.dir, rel) }

func (d *Docker) start() error {
	// The CLI's configuration: only the Compose plugin, so that `docker compose` is the one
	// installed, whatever ~/.docker holds.
	if err := os.MkdirAll(d.path("config/cli-plugins"), 0o700); err != nil {
		return err
	}
	if err := os.Symlink(d.Tools.Compose, d.path("config/cli-plugins/docker-compose")); err != nil {
		return err
	}
	// Our daemon.json: /etc/docker/daemon.json, if any, is not read. The key dockerd 20.10
	// makes for itself goes into the directory, not to /etc/docker/key.json (it has no flag).
	config, err := json.Marshal(map[string]string{"deprecated-key-path": d.path("key.json")})
	if err != nil {
		return err
	}
	if err := os.WriteFile(d.path("daemon.json"), config, 0o600); err != nil {
		return err
	}
	args := []string{
		"--data-root", d.path("root"),
		"--exec-root", d.path("run"),
		"--pidfile", d.path("docker.pid"),
		"--host", d.Host,
		"--config-file", d.path("daemon.json"),
		"--storage-driver", "overlay2",
		"--exec-opt", "native.cgroupdriver=cgroupfs",
		"--cgroup-parent", d.cgroup,
		// No docker0: compose makes the networks it uses.
		"--bridge", "none",
		"--log-level", "warn",
	}
	// In a mount namespace of its own, with a tmpfs on /run: dockerd 20.10 and containerd 1.6
	// put files at fixed paths there whatever their roots (/run/docker/plugins, the shims'
	// sockets in /run/containerd/s), and the containers' mounts stay out of the host's table.
	// The data-root is a tmpfs there too: loading images and removing them (a test loads
	// about 1 GB, Azurite's 55,000 files among them) costs no disk, and it is gone with the
	// namespace. The shell makes the mounts and becomes dockerd.
	const inNamespace = `root=$1; shift
mount --make-rprivate /
mount -t tmpfs -o mode=0755 housekeeper-docker-run /run
mount -t tmpfs -o mode=0710 housekeeper-docker-root "$root"
mkdir -m 0700 "$root/tmp"
exec "$@"`
	if err := os.Mkdir(d.path("root"), 0o710); err != nil {
		return err
	}
	cmd := exec.Command("/bin/sh", append([]string{"-ec", inNamespace, "sh", d.path("root"), d.Tools.Dockerd}, args...)...)
	// Debian's containerd, runc and docker-proxy, which dockerd runs from PATH.
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR=" + d.path("root/tmp")}
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS}
	proc, err := StartProcess(cmd)
	if err != nil {
		return err
	}
	d.proc = proc
	if d.netns, err = os.Open(fmt.Sprintf("/proc/%d/ns/net", proc.Pid())); err != nil {
		return fmt.Errorf("dockerd's network namespace: %w", err)
	}
	if d.netnsIno, err = nsInode(proc.Pid(), "net"); err != nil {
		return err
	}
	if d.mntnsIno, err = nsInode(proc.Pid(), "mnt"); err != nil {
		return err
	}
	state, err := json.Marshal(d.state())
	if err != nil {
		return err
	}
	if err := os.WriteFile(d.path("state.json"), state, 0o600); err != nil {
		return err
	}
	// A new network namespace has its loopback down: docker-proxy listens there on the
	// published 127.0.0.1 ports.
	if err := d.inNetns(func() error { return linkUp("lo") }); err != nil {
		return fmt.Errorf("loopback of dockerd's network namespace: %w", err)
	}
	return Poll(90*time.Second, 100*time.Millisecond, "dockerd to answer on "+d.socket, func() (bool, string, error) {
		if proc.Exited() {
			return false, "", fmt.Errorf("dockerd exited (%v); see its log", proc.State())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := d.API(ctx, http.MethodGet, "/_ping", nil, nil)
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}

// Env is the environment of a docker CLI (or Compose) talking to this engine: the caller's,
// without its DOCKER_ and COMPOSE_ settings, with DOCKER_HOST and DOCKER_CONFIG (which holds
// the Compose plugin).
func (d *Docker) Env() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "DOCKER_") || strings.HasPrefix(kv, "COMPOSE_")
	})
	return append(env, "DOCKER_HOST="+d.Host, "DOCKER_CONFIG="+d.path("config"))
}

// Command is `docker args...` (Debian's CLI) against this engine; `docker compose` runs the
// installed Compose.
func (d *Docker) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, d.Tools.Docker, args...)
	cmd.Env = d.Env()
	return cmd
}

// API calls the Engine API: method path (with its query), body as JSON unless it is an
// io.Reader, the answer decoded into out unless out is nil.
func (d *Docker) API(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case io.Reader:
		r = b
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://docker"+path, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.api.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("docker API %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// DialContext connects to addr (an IP address and port, e.g. a port compose publishes on
// 127.0.0.1) in dockerd's network namespace: for an http.Transport or a rest.Config's Dial.
func (d *Docker) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	// A name would be resolved on other threads, outside the namespace.
	if net.ParseIP(host) == nil {
		return nil, fmt.Errorf("dial %s in dockerd's network namespace: %s is not an IP address", addr, host)
	}
	var conn net.Conn
	err = d.inNetns(func() error {
		var err error
		// A socket belongs to the namespace it was created in, whichever thread uses it later.
		conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// inNetns runs f on a thread of its own in dockerd's network namespace.
func (d *Docker) inNetns(f func() error) error {
	if d.netns == nil {
		return errors.New("dockerd is not running")
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		host, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer host.Close()
		if err := setns(d.netns, syscall.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering dockerd's network namespace: %w", err)
			return
		}
		ferr := f()
		if err := setns(host, syscall.CLONE_NEWNET); err != nil {
			// The thread stays in the wrong namespace: it ends with this goroutine, locked.
			done <- fmt.Errorf("leaving dockerd's network namespace: %w", err)
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

func setns(f *os.File, nstype int) error { return unix.Setns(int(f.Fd()), nstype) }

// linkUp sets the interface name up in the calling thread's network namespace.
func linkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// Stop removes every container, network and volume through dockerd, stops dockerd (which
// stops its containerd), then makes sure of it: it kills what still runs in the engine's
// cgroups, namespaces or directory, unmounts what is left under the directory, removes the
// cgroups and the directory; the namespaces, and with them the engine's interfaces, iptables
// rules and mounts, go with their last process. The error names whatever could not be removed.
func (d *Docker) Stop() error {
	if d.stopped {
		return nil
	}
	d.stopped = true
	var errs []string
	start := time.Now()
	var removed, exited time.Duration
	if d.proc != nil && !d.proc.Exited() {
		if err := d.removeAll(); err != nil {
			errs = append(errs, err.Error())
		}
		removed = time.Since(start)
		_ = d.proc.Signal(syscall.SIGTERM)
		select {
		case <-d.proc.Done():
		case <-time.After(30 * time.Second):
			errs = append(errs, "dockerd did not stop within 30s of SIGTERM: killed")
			_ = d.proc.Signal(syscall.SIGKILL)
			<-d.proc.Done()
		}
		exited = time.Since(start)
	}
	defer func() {
		fmt.Fprintf(d.logs, "[stack] engine stopped in %s: containers, networks, volumes removed after %s, dockerd exited after %s\n",
			time.Since(start).Round(time.Millisecond), removed.Round(time.Millisecond), exited.Round(time.Millisecond))
	}()
	// The namespace stays open until its processes are gone: its inode, which names them, is
	// not reused meanwhile.	// The namespace stays open until its processes are gone: its inode, which names them, is
	// not reused meanwhile.
	if err := cleanupDocker(d.dir, d.state()); err != nil {
		errs = append(errs, err.Error())
	}
	if d.netns != nil {
		d.netns.Close()
		d.netns = nil
	}
	if len(errs) > 0 {
		return fmt.Errorf("stopping dockerd (%s): %s", d.dir, strings.Join(errs, "; "))
	}
	return nil
}

// removeAll removes every container (with its anonymous volumes), every network but the
// predefined ones and every volume, through the API.
func (d *Docker) removeAll() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	var containers []struct{ ID string }
	if err := d.API(ctx, http.MethodGet, "/containers/json?all=1", nil, &containers); err != nil {
		return err
	}
	for _, c := range containers {
		errs = append(errs, d.API(ctx, http.MethodDelete, "/containers/"+c.ID+"?force=1&v=1", nil, nil))
	}
	var networks []struct{ ID, Name string }
	if err := d.API(ctx, http.MethodGet, "/networks", nil, &networks); err != nil {
		return err
	}
	for _, n := range networks {
		if n.Name != "bridge" && n.Name != "host" && n.Name != "none" {
			errs = append(errs, d.API(ctx, http.MethodDelete, "/networks/"+n.ID, nil, nil))
		}
	}
	var volumes struct{ Volumes []struct{ Name string } }
	if err := d.API(ctx, http.MethodGet, "/volumes", nil, &volumes); err != nil {
		return err
	}
	for _, v := range volumes.Volumes {
		errs = append(errs, d.API(ctx, http.MethodDelete, "/volumes/"+url.PathEscape(v.Name)+"?force=1", nil, nil))
	}
	return errors.Join(errs...)
}

// cleanupDocker kills the processes of the engine in dir (in its cgroups, its network
// namespace, or naming dir: containerd, its shims, the containers, docker-proxy) except
// st.Owner, unmounts what is mounted under dir, and removes its cgroups and dir.
func cleanupDocker(dir string, st dockerState) error {
	var errs []string
	if err := Poll(30*time.Second, 50*time.Millisecond, "the engine's processes to exit", func() (bool, string, error) {
		pids := hostSandbox{dir: dir, cgroup: st.Cgroup, netNS: st.NetnsIno, mntNS: st.MntnsIno}.processes(st.Owner)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return len(pids) == 0, fmt.Sprint(pids), nil
	}); err != nil {
		errs = append(errs, err.Error())
	}
	// Deepest first; lazily, as a busy one goes once its last user has.
	if err := Poll(10*time.Second, 50*time.Millisecond, "the mounts under "+dir+" to go", func() (bool, string, error) {
		mounts := mountsUnder(dir)
		for i := len(mounts) - 1; i >= 0; i-- {
			_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
		}
		return len(mounts) == 0, strings.Join(mounts, ", "), nil
	}); err != nil {
		errs = append(errs, err.Error())
	}
	if st.Cgroup != "" && strings.HasPrefix(st.Cgroup, "/housekeeper-docker-") {
		for _, h := range cgroupHierarchies() {
			var dirs []string
			_ = filepath.Walk(filepath.Join(h, st.Cgroup), func(path string, info os.FileInfo, err error) error {
				if err == nil && info.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := Poll(2*time.Second, 20*time.Millisecond, "cgroup "+dirs[i]+" to be removed", func() (bool, string, error) {
					err := syscall.Rmdir(dirs[i])
					return err == nil || err == syscall.ENOENT, fmt.Sprint(err), nil
				}); err != nil {
					errs = append(errs, err.Error())
				}
			}
		}
	}
	if len(mountsUnder(dir)) == 0 {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// cleanupStaleDockers removes the engines whose test process is gone: their directories
// (housekeeper-docker-* in the temporary directory) say which.
func cleanupStaleDockers() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "housekeeper-docker-*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "state.json"))
		if err != nil {
			continue
		}
		var st dockerState
		if json.Unmarshal(data, &st) != nil || st.Owner == 0 {
			continue
		}
		if err := syscall.Kill(st.Owner, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue // its test still runs
		}
		// A namespace's inode names the engine's processes only while one of them (naming dir)
		// is in it: a freed one's number may be another namespace's by now.
		naming := hostSandbox{dir: dir}.processes(st.Owner)
		held := func(ns string, ino uint64) bool {
			return slices.ContainsFunc(naming, func(pid int) bool {
				i, err := nsInode(pid, ns)
				return err == nil && i == ino
			})
		}
		if !held("net", st.NetnsIno) {
			st.NetnsIno = 0
		}
		if !held("mnt", st.MntnsIno) {
			st.MntnsIno = 0
		}
		_ = cleanupDocker(dir, st)
	}
}

// DockerLeftovers names what an engine in dir left on the host: live processes naming dir,
// mounts under it, its cgroups, the directory itself. Empty after a Stop.
func DockerLeftovers(dir, cgroup string) []string {
	var out []string
	for _, pid := range (hostSandbox{dir: dir}).processes(0) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, fmt.Sprintf("process %d: %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte(" "))))
	}
	for _, m := range mountsUnder(dir) {
		out = append(out, "mount "+m)
	}
	for _, h := range cgroupHierarchies() {
		if _, err := os.Stat(filepath.Join(h, cgroup)); err == nil && cgroup != "" {
			out = append(out, "cgroup "+filepath.Join(h, cgroup))
		}
	}
	if _, err := os.Stat(dir); err == nil {
		out = append(out, "directory "+dir)
	}
	return out
}

// Dir is the engine's directory (data-root, exec-root, socket); Cgroup its containers' cgroup
// parent: for DockerLeftovers.
func (d *Docker) Dir() string    { return d.dir }
func (d *Docker) Cgroup() string { return d.cgroup }
