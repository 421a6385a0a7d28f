package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// cgroupRoot is where a container sees its own cgroup (the kernel's cgroup namespace, or the
// runtime's bind mount of it).
const cgroupRoot = "/sys/fs/cgroup"

// The files that hold a cgroup's memory limit, relative to cgroupRoot.
const (
	cgroupV2MemoryMax = "memory.max"
	cgroupV1MemoryMax = "memory/memory.limit_in_bytes"
)

// cgroupV1Unlimited: cgroup v1 writes "no limit" as the largest page-aligned int64
// (9223372036854771712 with 4 KiB pages, less with larger pages); no machine has 4 EiB.
const cgroupV1Unlimited = 1 << 62

// ContainerMemoryLimit is the memory limit of the cgroup the process runs in, in bytes — in a
// Kubernetes pod its container's resources.limits.memory — or 0 when it has none (no limit set,
// or no cgroup memory controller to read, as outside a container).
func ContainerMemoryLimit() (int64, error) {
	return cgroupMemoryLimit(os.DirFS(cgroupRoot))
}

// cgroupMemoryLimit reads the memory limit from cgroup, a cgroup v2 or v1 hierarchy's root.
func cgroupMemoryLimit(cgroup fs.FS) (int64, error) {
	data, err := fs.ReadFile(cgroup, cgroupV2MemoryMax)
	name := cgroupV2MemoryMax
	if errors.Is(err, fs.ErrNotExist) {
		data, err = fs.ReadFile(cgroup, cgroupV1MemoryMax)
		name = cgroupV1MemoryMax
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("reading the memory limit: %w", err)
	}
	value := strings.TrimSpace(string(data))
	if value == "max" && name == cgroupV2MemoryMax {
		return 0, nil
	}
	limit, err := strconv.ParseInt(value, 10, 64)
	if err != nil || limit <= 0 {
		return 0, fmt.Errorf("reading the memory limit: %s/%s holds %q, not a number of bytes", cgroupRoot, name, value)
	}
	if limit >= cgroupV1Unlimited {
		return 0, nil
	}
	return limit, nil
}
