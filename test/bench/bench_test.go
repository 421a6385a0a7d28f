package bench

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// burstEntries is N, the entries of a burst in BenchmarkBurst: def, or
// HOUSEKEEPER_BENCH_ENTRIES for a quick try (the tables show N).
func burstEntries(b *testing.B, def int) int {
	return testenv.EnvInt(b, "HOUSEKEEPER_BENCH_ENTRIES", def)
}

// upstreamRow runs provider-local's controllers with the given client limits.
func upstreamRow(id, label string, qps float32, burst int) row {
	return row{id: id, label: label, start: func(b *testing.B, e *env, phase string) (side, error) {
		return startUpstream(b, e, phase, qps, burst)
	}}
}

// housekeeperRow runs housekeeper's processes with the given options.
func housekeeperRow(id, label string, o hkOptions) row {
	return row{id: id, label: label, housekeeper: true, start: func(b *testing.B, e *env, phase string) (side, error) {
		return startHousekeeper(b, e, phase, o)
	}}
}

var burstRows = []row{
	upstreamRow("r1", "upstream provider-local, QPS 50 / burst 100", 50, 100),
	upstreamRow("r2", "upstream provider-local, no client limit", -1, 0),
	housekeeperRow("r3", "housekeeper, 1 replica each, --kube-qps 50 --kube-burst 100", hkOptions{qps: 50, burst: 100, entryReplicas: 1}),
	housekeeperRow("r4", "housekeeper, 1 replica each, --kube-qps -1", hkOptions{qps: -1, entryReplicas: 1}),
	housekeeperRow("r5", "housekeeper, 2 entry replicas, --kube-qps 50 --kube-burst 100", hkOptions{qps: 50, burst: 100, entryReplicas: 2}),
	// The same, on NATS as production runs it: nats-server processes syncing every write, one
	// (R1) and a cluster of three (R3).
	housekeeperRow("r7", "housekeeper, 1 replica each, --kube-qps -1, one nats-server process (R1)", hkOptions{qps: -1, entryReplicas: 1, natsNodes: 1}),
	housekeeperRow("r8", "housekeeper, 1 replica each, --kube-qps -1, 3-node JetStream cluster (R3)", hkOptions{qps: -1, entryReplicas: 1, natsNodes: 3}),
}

// BenchmarkBurst creates 500 BackupEntries at once and deletes them again, for upstream's
// controllers and for housekeeper, one after the other on the same kube-apiserver, and prints
// the comparison as a markdown table.
func BenchmarkBurst(b *testing.B) {
	n := burstEntries(b, 500)
	e := startEnv(b)
	var results []*result
	for _, r := range burstRows {
		var res *result
		ok := b.Run(r.id+"-"+benchName(r.label), func(b *testing.B) {
			res = &result{row: r, n: n}
			runPhase(b, e, res)
		})
		if res != nil { // nil: filtered out by -bench
			results = append(results, res)
		}
		if !ok && (res == nil || !res.cleaned) {
			break // objects of the failed phase may be left for the next side to react to
		}
	}
	printTable(os.Stdout, fmt.Sprintf("Burst of %d BackupEntries, upstream and housekeeper on one kube-apiserver", n), results)
	printRatios(os.Stdout, results)
}

// BenchmarkBurst5000 lets housekeeper converge 5,000 BackupEntries created at once, and
// deletes them again.
func BenchmarkBurst5000(b *testing.B) {
	n := burstEntries(b, 5000)
	e := startEnv(b)
	// housekeeper's default client limits: at 50/100 (row 3) 5,000 entries take over an hour.
	r := housekeeperRow("r6", "housekeeper, 1 replica each, --kube-qps 200 --kube-burst 400", hkOptions{qps: 200, burst: 400, entryReplicas: 1})
	res := &result{row: r, n: n}
	defer func() {
		printTable(os.Stdout, fmt.Sprintf("Burst of %d BackupEntries, housekeeper alone", n), []*result{res})
	}()
	runPhase(b, e, res)
}

// benchName turns a label into a sub-benchmark name.
func benchName(label string) string {
	r := strings.NewReplacer(" ", "", ",", "_", "/", "", "--", "", "provider-local", "")
	return r.Replace(label)
}

// printTable writes the results as a markdown table, the per-verb breakdown below it.
func printTable(w io.Writer, title string, results []*result) {
	if len(results) == 0 {
		fmt.Fprintf(w, "\n%s: no phase completed\n", title)
		return
	}
	fmt.Fprintf(w, "\n### %s\n\n", title)
	fmt.Fprintln(w, "| implementation / setting | N | entries/s | p50 create→ready (s) | p99 create→ready (s) | delete N → all gone (s) | API req/entry create | API req/entry delete | writes/entry create | writes/entry delete | etcd-backup versions/entry (mean / max) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		n := float64(r.n)
		if r.failure != "" {
			fmt.Fprintf(w, "| %s | %d | failed: %s | | | | | | | | |\n", r.row.label, r.n, strings.SplitN(r.failure, ":\n", 2)[0])
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f / %d |\n",
			r.row.label, r.n, r.entriesPerSec, r.p50.Seconds(), r.p99.Seconds(), r.deleteAll.Seconds(),
			r.create.total(verbs...)/n, r.delete.total(verbs...)/n,
			r.create.total(writeVerbs...)/n, r.delete.total(writeVerbs...)/n,
			r.secretWritesMean, r.secretWritesMax)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "ready: BackupEntry lastOperation Succeeded with observedGeneration == generation, and etcd-backup present in the shoot namespace (first moment both hold, seen by watch).")
	fmt.Fprintln(w, "API requests are counted from each side's own clients (housekeeper: every process, bridge included), watches excluded; writes are create, update, patch and delete.")
	fmt.Fprintln(w, "etcd-backup versions: the etcd-backup secret's versions seen by watch during the create phase (1 = written once).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Requests per entry, by verb:")
	fmt.Fprintln(w)
	for _, r := range results {
		if r.failure != "" {
			fmt.Fprintf(w, "- %s: FAILED: %s\n", r.row.label, strings.ReplaceAll(r.failure, "\n", "\n  "))
			continue
		}
		fmt.Fprintf(w, "- %s (delete per entry: p50 %.2f s, p99 %.2f s; requests went on %.1f s after the last entry was ready, %.1f s after the last was gone)\n",
			r.row.label, r.delP50.Seconds(), r.delP99.Seconds(), r.createTail.Seconds(), r.deleteTail.Seconds())
		fmt.Fprintf(w, "  - create: %s\n", describe(r.create.byVerb(), r.n))
		fmt.Fprintf(w, "  - delete: %s\n", describe(r.delete.byVerb(), r.n))
		if len(r.create) > 1 {
			for _, proc := range sortedKeys(r.create) {
				fmt.Fprintf(w, "  - %s: create: %s; delete: %s\n", proc, describe(r.create[proc], r.n), describe(r.delete[proc], r.n))
			}
		}
		for _, proc := range sortedKeys(r.createDetail) {
			fmt.Fprintf(w, "  - %s by resource: create: %s; delete: %s\n", proc, describeDetail(r.createDetail[proc], r.n), describeDetail(r.deleteDetail[proc], r.n))
		}
		for _, note := range r.notes {
			fmt.Fprintf(w, "  - note: %s\n", note)
		}
	}
}

// printRatios compares housekeeper's rows with upstream's at the same limits.
func printRatios(w io.Writer, results []*result) {
	byID := map[string]*result{}
	for _, r := range results {
		if r.failure == "" {
			byID[r.row.id] = r
		}
	}
	pairs := []struct{ hk, up, what string }{
		{"r3", "r1", "QPS 50 / burst 100, one replica each"},
		{"r4", "r2", "no client limit"},
		{"r5", "r1", "QPS 50 / burst 100, two entry replicas vs upstream"},
	}
	fmt.Fprintln(w, "\nRatios (housekeeper / upstream; goals: throughput ≥ 1 with one replica and ≥ 2 with two entry replicas, p99 ≤ 0.5, delete time ≤ 1):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| comparison | throughput | p99 | delete N → all gone |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, p := range pairs {
		hk, up := byID[p.hk], byID[p.up]
		if hk == nil || up == nil {
			continue
		}
		fmt.Fprintf(w, "| %s (%s / %s) | %.2f | %.2f | %.2f |\n", p.what, p.hk, p.up,
			hk.entriesPerSec/up.entriesPerSec, hk.p99.Seconds()/up.p99.Seconds(), hk.deleteAll.Seconds()/up.deleteAll.Seconds())
	}
	if one, two := byID["r3"], byID["r5"]; one != nil && two != nil {
		n1, n2 := float64(one.n), float64(two.n)
		fmt.Fprintf(w, "\nDuplicate work with two entry replicas (r5) vs one (r3): writes/entry create %.2f vs %.2f, delete %.2f vs %.2f; etcd-backup versions/entry max %d vs %d (mean %.2f vs %.2f).\n",
			two.create.total(writeVerbs...)/n2, one.create.total(writeVerbs...)/n1,
			two.delete.total(writeVerbs...)/n2, one.delete.total(writeVerbs...)/n1,
			two.secretWritesMax, one.secretWritesMax, two.secretWritesMean, one.secretWritesMean)
	}
}

func sortedKeys(c counts) []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// describeDetail is "2.00 patch backupentries, 1.00 create secrets" per entry, largest first;
// for n 1, counts: "2 patch backupentries, 1 create secrets".
func describeDetail(m map[string]float64, n int) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	sort.SliceStable(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	if len(keys) == 0 {
		return "none"
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		if n == 1 {
			parts[i] = fmt.Sprintf("%.0f %s", m[k], k)
		} else {
			parts[i] = fmt.Sprintf("%.2f %s", m[k]/float64(n), k)
		}
	}
	return strings.Join(parts, ", ")
}
