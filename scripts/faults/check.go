package faults

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// Invariant is one checked property with its result. Observed counts what the check looked
// at; a check that observed nothing fails, since it proved nothing.
type Invariant struct {
	Name     string
	Pass     bool
	Observed int
	Detail   string
}

func allPass(results []Invariant) bool {
	for _, r := range results {
		if !r.Pass {
			return false
		}
	}
	return true
}

// check evaluates the invariants; final adds the ones that only make sense at the end (purge
// counts, exits, logs).
func (w *workload) check(ctx context.Context, watch *purgeWatch, final bool) []Invariant {
	w.mu.Lock()
	live, gone := maps.Clone(w.live), maps.Clone(w.gone)
	keep := map[string][]string{}
	for b, keys := range w.keep {
		keep[b] = slices.Clone(keys)
	}
	buckets := maps.Clone(w.buckets)
	canaries := slices.Clone(w.canaries)
	w.mu.Unlock()

	stats := watch.stats(w.r.faultWindows())
	results := []Invariant{
		w.checkBuckets(ctx, buckets),
		w.checkLiveEntries(ctx, live),
		w.checkGoneEntries(ctx, gone),
		w.checkKeptBlobs(ctx, keep),
		checkNoEarlyPurge(stats),
		checkDuePurgesDone(stats),
		checkOutagePurges(stats),
		checkOutageReleases(stats),
		w.checkDeadLetters(ctx),
	}
	if final {
		results = append(results, checkPurgesOverlappedFaults(stats), checkExits(w.r.processes()),
			checkNoExitInOutages(w.r.processes(), w.r.faultWindows()), w.r.checkLeaseAfterKubeAway(),
			w.checkLogsForCrashes(), w.checkLogsForSecrets(buckets, canaries))
		if w.r.cfg.Clustered() {
			results = append(results, checkPurgesDueWithoutLeader(stats))
		}
	}
	return results
}

func (w *workload) checkBuckets(ctx context.Context, buckets map[string]bucketInfo) Invariant {
	inv := Invariant{Name: "every bucket is Succeeded at its generation, without an operation annotation, with its generated secret"}
	var bad []string
	for name, info := range buckets {
		if problem := w.bucketProblem(ctx, name, info); problem != "" {
			bad = append(bad, name+": "+problem)
		}
	}
	return verdict(inv, bad, len(buckets), "buckets")
}

func (w *workload) bucketProblem(ctx context.Context, name string, info bucketInfo) string {
	b := &extensionsv1alpha1.BackupBucket{}
	if err := w.r.client.Get(ctx, client.ObjectKey{Name: name}, b); err != nil {
		return err.Error()
	}
	if problem := reconciled(b, b.Status.DefaultStatus); problem != "" {
		return problem
	}
	ref := b.Status.GeneratedSecretRef
	if ref == nil {
		return "no status.generatedSecretRef"
	}
	want, err := w.backupSecretData(info)
	if err != nil {
		return err.Error()
	}
	return w.secretProblem(ctx, ref.Namespace, ref.Name, want)
}

// reconciled says what keeps an object from being reconciled to its latest spec ("" if
// nothing): lastOperation Succeeded, observedGeneration == generation, no operation annotation.
func reconciled(obj client.Object, status extensionsv1alpha1.DefaultStatus) string {
	if op := status.LastOperation; op == nil || op.State != gardencorev1beta1.LastOperationStateSucceeded {
		return fmt.Sprintf("lastOperation %+v", op)
	}
	if status.ObservedGeneration != obj.GetGeneration() {
		return fmt.Sprintf("observedGeneration %d, generation %d", status.ObservedGeneration, obj.GetGeneration())
	}
	if op, ok := obj.GetAnnotations()[gardener.AnnotationOperation]; ok {
		return fmt.Sprintf("annotation %s=%s was not removed", gardener.AnnotationOperation, op)
	}
	return ""
}

// backupSecretData is what the generated secret of a bucket holds, computed from the
// credentials the workload gave it, not from anything housekeeper wrote.
func (w *workload) backupSecretData(info bucketInfo) (map[string][]byte, error) {
	provider, err := w.providers.Get(info.typ)
	if err != nil {
		return nil, err
	}
	return provider.BackupSecretData(info.credentials)
}

// etcdBackupData is what etcd-backup-restore must read for entry e of a bucket (but its
// bucketName): the generated secret's keys and what the provider adds per entry (local's
// hostPath), computed from the workload's credentials and the providers' own configuration.
func (w *workload) etcdBackupData(info bucketInfo, e *extensionsv1alpha1.BackupEntry) (map[string][]byte, error) {
	want, err := w.backupSecretData(info)
	if err != nil {
		return nil, err
	}
	if p, ok := w.providers[info.typ].(objectstore.EntrySecret); ok {
		extra, err := p.EntrySecretData(objectstore.Entry{Region: e.Spec.Region, Source: gardener.IsSourceEntry(e.Name)})
		if err != nil {
			return nil, err
		}
		maps.Copy(want, extra)
	}
	return want, nil
}

// secretProblem compares a secret's data with want, naming keys but never values.
func (w *workload) secretProblem(ctx context.Context, namespace, name string, want map[string][]byte) string {
	secret := &corev1.Secret{}
	if err := w.r.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
		return "secret " + namespace + "/" + name + ": " + err.Error()
	}
	if maps.EqualFunc(secret.Data, want, func(a, b []byte) bool { return string(a) == string(b) }) {
		return ""
	}
	var differ []string
	for k := range maps.Keys(secret.Data) {
		if string(secret.Data[k]) != string(want[k]) {
			differ = append(differ, k)
		}
	}
	for k := range maps.Keys(want) {
		if _, ok := secret.Data[k]; !ok {
			differ = append(differ, k+" (missing)")
		}
	}
	slices.Sort(differ)
	return fmt.Sprintf("secret %s/%s differs in %s", namespace, name, strings.Join(differ, ", "))
}

func (w *workload) checkLiveEntries(ctx context.Context, live map[string]entryInfo) Invariant {
	inv := Invariant{Name: "every live entry is Succeeded at its generation, without an operation annotation, with a correct etcd-backup secret"}
	var bad []string
	for name, info := range live {
		if problem := w.liveEntryProblem(ctx, name, info); problem != "" {
			bad = append(bad, name+": "+problem)
		}
	}
	return verdict(inv, bad, len(live), "entries")
}

func (w *workload) liveEntryProblem(ctx context.Context, name string, info entryInfo) string {
	e := &extensionsv1alpha1.BackupEntry{}
	if err := w.r.client.Get(ctx, client.ObjectKey{Name: name}, e); err != nil {
		return err.Error()
	}
	if string(e.UID) != info.uid {
		return "uid changed"
	}
	if problem := reconciled(e, e.Status.DefaultStatus); problem != "" {
		return problem
	}
	w.mu.Lock()
	bucketInfo := w.buckets[info.bucket]
	w.mu.Unlock()
	want, err := w.etcdBackupData(bucketInfo, e)
	if err != nil {
		return err.Error()
	}
	want[entry.DataKeyBucketName] = []byte(info.bucket)
	ref := entry.SecretRef(e)
	if problem := w.secretProblem(ctx, ref.Namespace, ref.Name, want); problem != "" {
		return problem
	}
	secret := &corev1.Secret{}
	if err := w.r.client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		return err.Error()
	}
	if secret.Annotations[entry.AnnotationCreatedBy] != name {
		return "etcd-backup secret created-by " + secret.Annotations[entry.AnnotationCreatedBy]
	}
	return ""
}

func (w *workload) checkGoneEntries(ctx context.Context, gone map[string]entryInfo) Invariant {
	inv := Invariant{Name: "every deleted entry's prefix is empty and its object is gone"}
	var bad []string
	for name, info := range gone {
		err := w.r.client.Get(ctx, client.ObjectKey{Name: name}, &extensionsv1alpha1.BackupEntry{})
		if !apierrors.IsNotFound(err) {
			bad = append(bad, name+": object still exists")
			continue
		}
		keys, err := w.list(ctx, info.bucket, gardener.EntryPrefix(name))
		if err != nil {
			bad = append(bad, name+": "+err.Error())
		} else if len(keys) > 0 {
			bad = append(bad, fmt.Sprintf("%s: %d objects left under its prefix", name, len(keys)))
		}
	}
	return verdict(inv, bad, len(gone), "entries")
}

func (w *workload) checkKeptBlobs(ctx context.Context, keep map[string][]string) Invariant {
	inv := Invariant{Name: "no blob outside a deleted entry's prefix was deleted"}
	var bad []string
	total := 0
	for b, keys := range keep {
		present, err := w.list(ctx, b, "")
		if err != nil {
			bad = append(bad, b+": "+err.Error())
			continue
		}
		for _, k := range keys {
			total++
			if _, found := slices.BinarySearch(present, k); !found {
				bad = append(bad, b+"/"+k+" is missing")
			}
		}
	}
	return verdict(inv, bad, total, "blobs")
}

func (w *workload) list(ctx context.Context, bucketName, prefix string) ([]string, error) {
	store, err := w.open(bucketName)
	if err != nil {
		return nil, err
	}
	var keys []string
	err = store.List(ctx, prefix, func(page []string) error { keys = append(keys, page...); return nil })
	slices.Sort(keys)
	return keys, err
}

// checkNoEarlyPurge: while an entry was not due, every blob under its prefix was there.
func checkNoEarlyPurge(s purgeStats) Invariant {
	inv := Invariant{Name: "no purge ran before its due time (blobs sampled until due)"}
	return verdict(inv, s.early, s.samples, "samples before due")
}

// checkDuePurgesDone: every deletion past its due time had its prefix seen empty.
func checkDuePurgesDone(s purgeStats) Invariant {
	inv := Invariant{Name: "every purge that came due completed (prefix seen empty)"}
	var bad []string
	if s.purged < s.due {
		bad = append(bad, fmt.Sprintf("%d of %d due purges not seen completed", s.due-s.purged, s.due))
	}
	return verdict(inv, bad, s.purged, fmt.Sprintf("of %d due purges completed", s.due))
}

// checkOutagePurges: after each outage, every purge due by the dependency's return (due before
// or during the outage, not done when it began) completed within afterReturn of the return,
// by the workload's clock; and purges did come due during each outage.
func checkOutagePurges(s purgeStats) Invariant {
	inv := Invariant{Name: fmt.Sprintf("after each outage, every purge due by the dependency's return completed within %s of it (prefix seen empty)", afterReturn)}
	bad, n, detail := outageWorkVerdict(s, func(o outageStats) outageWork { return o.purged }, true)
	return verdict(inv, bad, n, "purges held up by "+detail)
}

// checkOutageReleases: after each outage, every entry whose purge was due by the dependency's
// return was gone (its finalizers released) within afterReturn of the return, read directly.
func checkOutageReleases(s purgeStats) Invariant {
	inv := Invariant{Name: fmt.Sprintf("after each outage, every deleted entry due by the dependency's return had its finalizers released within %s of it (object gone)", afterReturn)}
	bad, n, detail := outageWorkVerdict(s, func(o outageStats) outageWork { return o.released }, false)
	return verdict(inv, bad, n, "entries held up by "+detail)
}

// outageWorkVerdict collects one kind of outage work: what was late or is pending, how much was
// followed, and a detail naming the outages with the last done after each return.
func outageWorkVerdict(s purgeStats, work func(outageStats) outageWork, needDue bool) (bad []string, n int, detail string) {
	var each []string
	for _, o := range s.outages {
		w := work(o)
		n += w.n
		at := o.kind + " at " + o.from.Format(time.TimeOnly)
		for _, l := range w.late {
			bad = append(bad, at+": "+l)
		}
		for _, p := range w.pending {
			bad = append(bad, at+": "+p)
		}
		if needDue && o.dueDuring == 0 {
			bad = append(bad, at+": no purge came due during it")
		}
		last := "none"
		if w.n > 0 && len(w.late)+len(w.pending) == 0 {
			last = w.last.Round(100 * time.Millisecond).String()
		}
		each = append(each, fmt.Sprintf("%d (%d due during it, last done %s after the return)", w.n, o.dueDuring, last))
	}
	return bad, n, fmt.Sprintf("%d outages: %s", len(s.outages), strings.Join(each, "; "))
}

// checkNoExitInOutages: no process ended on its own while a dependency was away or in the
// minute after its return. The suite restarts no exited process until the faults are over: an
// exit here would leave work undone; a crash-loop back-off in production would delay it.
func checkNoExitInOutages(processes []*process, windows []window) Invariant {
	inv := Invariant{Name: "no process exited during a dependency's outage or the minute after its return"}
	var bad []string
	n := 0
	for _, w := range windows {
		if !isOutage(w.kind) {
			continue
		}
		n++
		for _, p := range processes {
			for _, e := range p.runs() {
				if !e.caused && !e.at.Before(w.from) && !e.at.After(w.to.Add(afterReturn)) {
					bad = append(bad, fmt.Sprintf("%s: %s at %s, during %s", e.process, e.status, e.at.Format("15:04:05.000"), w.kind))
				}
			}
		}
	}
	return verdict(inv, bad, n, "outages")
}

// checkLeaseAfterKubeAway: each outage of the API server cost the bridge its Lease (read
// directly: not renewed for longer than its duration), and the bridge, still running, renewed
// it again within afterReturn of the return.
func (r *rig) checkLeaseAfterKubeAway() Invariant {
	inv := Invariant{Name: fmt.Sprintf("the bridge, its Lease lost to an outage of the API server, led again within %s of the return", afterReturn)}
	r.mu.Lock()
	leases := slices.Clone(r.leases)
	r.mu.Unlock()
	var bad, each []string
	n := 0
	for _, l := range leases {
		at := l.returned.Format(time.TimeOnly)
		if l.err != nil {
			bad = append(bad, fmt.Sprintf("return at %s: the Lease unreadable: %v", at, l.err))
			continue
		}
		if !l.lapsed() {
			bad = append(bad, fmt.Sprintf("return at %s: the Lease had not lapsed (renewed %s before): the outage did not cost the bridge its lease", at, l.returned.Sub(l.renewed).Round(100*time.Millisecond)))
			continue
		}
		n++
		d, ok, _ := l.renewedAfter()
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("return at %s: the Lease not renewed since", at))
		case d > afterReturn:
			bad = append(bad, fmt.Sprintf("return at %s: the Lease renewed %s after it", at, d.Round(100*time.Millisecond)))
		default:
			each = append(each, d.Round(100*time.Millisecond).String())
		}
	}
	return verdict(inv, bad, n, "Leases lapsed and renewed again after the return: "+strings.Join(each, ", "))
}

// checkPurgesDueWithoutLeader: on a cluster, purges came due while the stream had no leader
// (its leader killed, or quorum lost), and completed: their schedules fired on the next leader.
func checkPurgesDueWithoutLeader(s purgeStats) Invariant {
	inv := Invariant{Name: "purges that came due while the stream had no leader completed"}
	return verdict(inv, nil, s.dueLeaderless, "purges came due during a stream-leader kill or a quorum loss and completed")
}

// checkPurgesOverlappedFaults: the suite broke the stack while purges ran, not only before.
func checkPurgesOverlappedFaults(s purgeStats) Invariant {
	inv := Invariant{Name: "faults overlapped purges and deletions in flight"}
	return verdict(inv, nil, s.overlapped, fmt.Sprintf("purges overlapped a fault; %d deletions were sent during one", s.deletionsInFaults))
}

// checkExits: no process ended unless the suite killed or stopped it, even if a restart hid it.
func checkExits(processes []*process) Invariant {
	inv := Invariant{Name: "no process exited unless the fault injector or the shutdown ended it"}
	var bad []string
	n := 0
	for _, p := range processes {
		for _, e := range p.runs() {
			n++
			if !e.caused {
				bad = append(bad, e.process+": "+e.status)
			}
		}
	}
	return verdict(inv, bad, n, "exits recorded")
}

func (w *workload) checkDeadLetters(ctx context.Context) Invariant {
	inv := Invariant{Name: "no dead letters except those the workload provoked"}
	var dls []runner.DeadLetter
	// A cluster that just healed may still be electing the dead-letter stream's leader.
	err := stack.Poll(30*time.Second, time.Second, "the dead letters", func() (bool, string, error) {
		// A request the cluster loses in an election waits for its context: bound each.
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var err error
		dls, err = runner.ListDeadLetters(actx, w.r.js, "")
		return err == nil, fmt.Sprint(err), nil
	})
	if err != nil {
		return verdict(inv, []string{err.Error()}, 0, "")
	}
	var bad []string
	provoked := 0
	for _, d := range dls {
		if d.EventID == provokedID {
			provoked++
			continue
		}
		bad = append(bad, fmt.Sprintf("%s %s: %s", d.Function, d.Subject, d.Reason))
	}
	if provoked == 0 {
		bad = append(bad, "the provoked invalid event was not dead-lettered")
	}
	return verdict(inv, bad, provoked, "provoked dead letters")
}

// crashSigns start the lines the Go runtime and the race detector write.
var crashSigns = []string{"panic: ", "fatal error: ", "WARNING: DATA RACE"}

// checkLogsForCrashes searches every log for panics and data races.
func (w *workload) checkLogsForCrashes() Invariant {
	inv := Invariant{Name: "no panic or data race in any log"}
	var bad []string
	lines, err := w.scanLogs(func(log string, n int, line string) {
		for _, sign := range crashSigns {
			if strings.HasPrefix(line, sign) {
				bad = append(bad, fmt.Sprintf("%s line %d: %s", log, n, line))
			}
		}
	})
	if err != nil {
		bad = append(bad, err.Error())
	}
	return verdict(inv, bad, lines, "log lines")
}

// checkLogsForSecrets searches every log for secret values — the storage key and every
// bucket's credentials with its canary — as they are, in base64 and as JSON strings.
func (w *workload) checkLogsForSecrets(buckets map[string]bucketInfo, canaries []string) Invariant {
	inv := Invariant{Name: "no secret value appears in any log line (raw, base64, JSON)"}
	values := append([]string{stack.AzuriteKey}, canaries...)
	for _, info := range buckets {
		for k, v := range info.credentials {
			if k != azure.KeyStorageAccount && k != azure.KeyEndpoint { // names and addresses, not secrets
				values = append(values, string(v))
			}
		}
	}
	renderings := secretRenderings(values)
	var bad []string
	lines, err := w.scanLogs(func(log string, n int, line string) {
		for _, s := range renderings {
			if strings.Contains(line, s) {
				bad = append(bad, fmt.Sprintf("%s line %d", log, n))
				return
			}
		}
	})
	if err != nil {
		bad = append(bad, err.Error())
	}
	return verdict(inv, bad, lines, fmt.Sprintf("log lines searched for %d renderings", len(renderings)))
}

// secretRenderings returns each value as it is, in standard and URL base64 (a []byte in JSON
// is standard base64) and as a JSON string (escaped).
func secretRenderings(values []string) []string {
	set := map[string]bool{}
	for _, v := range values {
		quoted, _ := json.Marshal(v)
		for _, r := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)),
			strings.Trim(string(quoted), `"`)} {
			set[r] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// scanLogs calls fn with every line of every process's log. It fails when a log is missing or
// empty: a search that read nothing proved nothing.
func (w *workload) scanLogs(fn func(log string, n int, line string)) (int, error) {
	logs := []string{"kube-apiserver-etcd.log"}
	for _, p := range w.r.processes() {
		logs = append(logs, p.name+".log")
	}
	var empty []string
	total := 0
	for _, name := range logs {
		n, err := scanLog(filepath.Join(w.r.cfg.Dir, name), func(n int, line string) { fn(name, n, line) })
		if err != nil {
			return total, err
		}
		if n == 0 {
			empty = append(empty, name)
		}
		total += n
	}
	if len(empty) > 0 {
		return total, fmt.Errorf("no lines read from %s", strings.Join(empty, ", "))
	}
	return total, nil
}

func scanLog(path string, fn func(n int, line string)) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	n := 0
	for scanner.Scan() {
		n++
		fn(n, scanner.Text())
	}
	return n, scanner.Err()
}

// verdict passes inv if nothing was bad and something was observed; detail says what was
// counted.
func verdict(inv Invariant, bad []string, observed int, detail string) Invariant {
	inv.Observed = observed
	inv.Detail = detail
	if observed == 0 {
		bad = append(bad, "observed nothing")
	}
	inv.Pass = len(bad) == 0
	if !inv.Pass {
		slices.Sort(bad)
		total := len(bad)
		more := ""
		if len(bad) > 5 {
			more = fmt.Sprintf(" (+%d more)", len(bad)-5)
			bad = bad[:5]
		}
		inv.Detail = fmt.Sprintf("%s; %d violations: %s%s", detail, total, strings.Join(bad, "; "), more)
	}
	return inv
}
