package stack

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// hostSandbox is what names the processes of a node or a Docker engine run on this host: its
// directory in their command line, its cgroup, its namespaces (0: not known).
type hostSandbox struct {
	dir          string
	cgroup       string
	netNS, mntNS uint64
}

// processes are the sandbox's live processes, but for except and this process.
func (s hostSandbox) processes(except int) []int {
	found := map[int]bool{}
	if s.cgroup != "" {
		cgroupProcs(s.cgroup, found)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil || found[pid] {
			continue
		}
		if s.inNamespace(pid, "net", s.netNS) || s.inNamespace(pid, "mnt", s.mntNS) {
			found[pid] = true
			continue
		}
		if cmdline, err := os.ReadFile(filepath.Join(p, "cmdline")); err == nil && bytes.Contains(cmdline, []byte(s.dir+"/")) {
			found[pid] = true
		}
	}
	delete(found, except)
	delete(found, os.Getpid())
	var pids []int
	for pid := range found {
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && bytes.Contains(stat, []byte(") Z ")) {
			continue // exited, waiting for its parent
		}
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids
}

func (hostSandbox) inNamespace(pid int, ns string, inode uint64) bool {
	if inode == 0 {
		return false
	}
	ino, err := nsInode(pid, ns)
	return err == nil && ino == inode
}

// nsInode is the inode of pid's namespace ns ("net", "mnt"): equal inodes, one namespace.
func nsInode(pid int, ns string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/%s", pid, ns), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// cgroupProcs adds to found the processes in cgroup and below it, in every hierarchy.
func cgroupProcs(cgroup string, found map[int]bool) {
	for _, h := range cgroupHierarchies() {
		_ = filepath.Walk(filepath.Join(h, cgroup), func(path string, info os.FileInfo, err error) error {
			if err != nil || !info.IsDir() {
				return nil
			}
			data, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					found[pid] = true
				}
			}
			return nil
		})
	}
}

// cgroupHierarchies are the mount points of the cgroup hierarchies (v1 controllers and named
// hierarchies, the v2 one), e.g. /sys/fs/cgroup/memory.
func cgroupHierarchies() []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if len(fields) >= 5 && len(fs) >= 1 && (fs[0] == "cgroup" || fs[0] == "cgroup2") {
			out = append(out, fields[4])
		}
	}
	return out
}

// mountsUnder lists the host's mount points at or under dir, in the order of mountinfo.
func mountsUnder(dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 5 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			out = append(out, fields[4])
		}
	}
	return out
}
