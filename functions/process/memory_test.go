package process

import (
	"strings"
	"testing"
	"testing/fstest"
)

// The container's memory limit from either cgroup version, and the ways a cgroup says there is
// none.
func TestCgroupMemoryLimit(t *testing.T) {
	file := func(name, content string) fstest.MapFS {
		return fstest.MapFS{name: &fstest.MapFile{Data: []byte(content)}}
	}
	for _, tc := range []struct {
		name   string
		cgroup fstest.MapFS
		want   int64
		err    string
	}{
		{name: "v2: a limit", cgroup: file("memory.max", "805306368\n"), want: 768 << 20},
		{name: "v2: none", cgroup: file("memory.max", "max\n")},
		{name: "v1: a limit", cgroup: file("memory/memory.limit_in_bytes", "805306368\n"), want: 768 << 20},
		{name: "v1: none, 4 KiB pages", cgroup: file("memory/memory.limit_in_bytes", "9223372036854771712\n")},
		{name: "v1: none, 64 KiB pages", cgroup: file("memory/memory.limit_in_bytes", "9223372036854710272\n")},
		{name: "v2 is read before v1", cgroup: fstest.MapFS{
			"memory.max":                   &fstest.MapFile{Data: []byte("536870912\n")},
			"memory/memory.limit_in_bytes": &fstest.MapFile{Data: []byte("805306368\n")},
		}, want: 512 << 20},
		{name: "no memory controller", cgroup: fstest.MapFS{"cpu.max": &fstest.MapFile{Data: []byte("max 100000\n")}}},
		{name: "v2: garbage", cgroup: file("memory.max", "lots\n"), err: `/sys/fs/cgroup/memory.max holds "lots", not a number of bytes`},
		{name: "v1: max is no v1 value", cgroup: file("memory/memory.limit_in_bytes", "max\n"), err: `memory.limit_in_bytes holds "max"`},
		{name: "v2: empty", cgroup: file("memory.max", ""), err: `holds "", not a number of bytes`},
		{name: "v2: negative", cgroup: file("memory.max", "-1\n"), err: `holds "-1"`},
		{name: "v2: unreadable", cgroup: fstest.MapFS{"memory.max/x": &fstest.MapFile{}}, err: "reading the memory limit: "},
	} {
		got, err := cgroupMemoryLimit(tc.cgroup)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.err)
		}
		if got != tc.want {
			t.Errorf("%s: a limit of %d bytes, want %d", tc.name, got, tc.want)
		}
	}
}

// The machine's own cgroup reads as a limit or none, whichever version it runs.
func TestContainerMemoryLimit(t *testing.T) {
	limit, err := ContainerMemoryLimit()
	if err != nil {
		t.Fatal(err)
	}
	if limit < 0 {
		t.Errorf("a limit of %d bytes", limit)
	}
	t.Logf("this process's memory limit: %d bytes (0: none)", limit)
}
