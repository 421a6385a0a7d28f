package stack

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// nodeStateFile records the running node of a slot — its holder's pid and mount namespace and
// its directory — so that a node whose process was killed (a test binary's time-out) is cleaned
// up by the next node of the slot.
func nodeStateFile(slot int) string { return fmt.Sprintf("/run/housekeeper-node-%d.state", slot) }

func (n *Node) writeState() error {
	return os.WriteFile(nodeStateFile(n.net.slot), []byte(fmt.Sprintf("%d %d %s", n.holder.Pid(), n.holderMountNS, n.dir)), 0o644)
}

// cleanupHost removes what an earlier node of the slot left on the host when its process was
// killed: its processes (which hold its namespaces), the host's end of its link, its cgroups.
// The slot's lock says that no node of it runs.
func (n *Node) cleanupHost() {
	if data, err := os.ReadFile(nodeStateFile(n.net.slot)); err == nil {
		f := strings.SplitN(string(data), " ", 3)
		if len(f) == 3 {
			ns, _ := strconv.ParseUint(f[1], 10, 64)
			old := &Node{cgroup: n.cgroup, holderMountNS: ns, dir: f[2]}
			_ = old.killAll(os.Getpid())
		}
		_ = os.Remove(nodeStateFile(n.net.slot))
	}
	if _, err := net.InterfaceByName(n.Link); err == nil {
		_ = runCmd("ip", "link", "del", n.Link)
	}
	_ = n.removeCgroups()
}

// killAll SIGKILLs, until none is left, every process in the node's cgroups, in its mount
// namespace (containerd's shims) or naming its directory, except the process except.
func (n *Node) killAll(except int) error {
	return Poll(30*time.Second, 50*time.Millisecond, "the node's processes to exit", func() (bool, string, error) {
		pids := hostSandbox{dir: n.dir, cgroup: n.cgroup, mntNS: n.holderMountNS}.processes(except)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return len(pids) == 0, fmt.Sprint(pids), nil
	})
}

// makeCgroups creates the kubelet's cgroupRoot, /housekeeper-node-<slot>, in every hierarchy
// (the kubelet refuses a root that does not exist); a v1 cpuset starts with the parent's CPUs
// and memory nodes, or no process could join it.
func (n *Node) makeCgroups() error {
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, n.cgroup)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if parent, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if _, err := os.Stat(filepath.Join(h, "cgroup.controllers")); err == nil {
					continue // v2: inherited
				}
				if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

// removeCgroups removes the node's cgroups, deepest first, in every hierarchy.
func (n *Node) removeCgroups() error {
	var left []string
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, n.cgroup)
		var dirs []string
		_ = filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
			if err == nil && info.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			var err error
			for try := 0; try < 50; try++ {
				if err = syscall.Rmdir(dirs[i]); err == nil || err == syscall.ENOENT {
					err = nil
					break
				}
				time.Sleep(20 * time.Millisecond) // a killed process still leaving
			}
			if err != nil {
				left = append(left, fmt.Sprintf("%s (%v)", dirs[i], err))
			}
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("cgroups left: %s", strings.Join(left, ", "))
	}
	return nil
}

// The sysctls the kubelet sets at its start (container manager's setupKernelTunables).
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

const kubeletSysctlsFile = "/run/housekeeper-node-sysctls"

// saveKubeletSysctls records the host's values of kubeletSysctls before the first of the
// host's nodes starts; restoreKubeletSysctls writes them back when the last one stops.
func saveKubeletSysctls() error {
	f, err := os.OpenFile(kubeletSysctlsFile, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if os.IsExist(err) {
		return nil // another node runs, and recorded them
	}
	if err != nil {
		return err
	}
	defer f.Close()
	for _, s := range kubeletSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			return err
		}
		fmt.Fprintf(f, "%s=%s\n", s, strings.TrimSpace(string(v)))
	}
	return nil
}

func restoreKubeletSysctls(ownLink string) error {
	data, err := os.ReadFile(kubeletSysctlsFile)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// Another node's link: that node runs (and its kubelet wants the values kept).
	if ifaces, err := net.Interfaces(); err == nil {
		for _, i := range ifaces {
			if strings.HasPrefix(i.Name, "hk-node-") && i.Name != ownLink {
				return nil
			}
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			return fmt.Errorf("restoring sysctl %s: %w", k, err)
		}
	}
	return os.Remove(kubeletSysctlsFile)
}
