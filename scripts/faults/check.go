package faults

import (
	"bufio"
	"context"
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
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/runtime"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// Invariant is one checked property with its result.
type Invariant struct {
	Name   string
	Pass   bool
	Detail string
}

func allPass(results []Invariant) bool {
	for _, r := range results {
		if !r.Pass {
			return false
		}
	}
	return true
}

// check evaluates the invariants; final adds the ones that only make sense at the end (logs).
func (w *workload) check(ctx context.Context, final bool) []Invariant {
	w.mu.Lock()
	live, gone := maps.Clone(w.live), maps.Clone(w.gone)
	keep := map[string][]string{}
	for b, keys := range w.keep {
		keep[b] = slices.Clone(keys)
	}
	canaries := slices.Clone(w.canaries)
	w.mu.Unlock()

	results := []Invariant{
		w.checkLiveEntries(ctx, live),
		w.checkGoneEntries(ctx, gone),
		w.checkKeptBlobs(ctx, keep),
		w.checkPurgeTimes(ctx, gone),
		w.checkDeadLetters(ctx),
	}
	if final {
		results = append(results, w.checkLogs(canaries))
	}
	return results
}

func (w *workload) checkLiveEntries(ctx context.Context, live map[string]entryInfo) Invariant {
	inv := Invariant{Name: "every live entry has a correct etcd-backup secret and lastOperation Succeeded"}
	var bad []string
	for name, info := range live {
		if problem := w.liveEntryProblem(ctx, name, info); problem != "" {
			bad = append(bad, name+": "+problem)
		}
	}
	return verdict(inv, bad, fmt.Sprintf("%d entries", len(live)))
}

func (w *workload) liveEntryProblem(ctx context.Context, name string, info entryInfo) string {
	c := w.r.client
	e := &extensionsv1alpha1.BackupEntry{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, e); err != nil {
		return err.Error()
	}
	if string(e.UID) != info.uid {
		return "uid changed"
	}
	if op := e.Status.LastOperation; op == nil || op.State != gardencorev1beta1.LastOperationStateSucceeded {
		return fmt.Sprintf("lastOperation %+v", op)
	}
	ref := entry.SecretRef(e)
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		return "etcd-backup secret: " + err.Error()
	}
	source := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: e.Spec.SecretRef.Namespace, Name: e.Spec.SecretRef.Name}, source); err != nil {
		return "spec.secretRef: " + err.Error()
	}
	want := maps.Clone(source.Data)
	want[entry.DataKeyBucketName] = []byte(e.Spec.BucketName)
	if !maps.EqualFunc(secret.Data, want, func(a, b []byte) bool { return string(a) == string(b) }) {
		return "etcd-backup secret data differs from spec.secretRef data + bucketName"
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
	return verdict(inv, bad, fmt.Sprintf("%d entries", len(gone)))
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
	return verdict(inv, bad, fmt.Sprintf("%d blobs", total))
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

// checkPurgeTimes reads every purge-completed event: none may be earlier than its due time,
// and the due time must be the deletion plus the retention the workload set.
func (w *workload) checkPurgeTimes(ctx context.Context, gone map[string]entryInfo) Invariant {
	inv := Invariant{Name: "no purge ran before its due time"}
	completed, err := w.purgeEvents(ctx)
	if err != nil {
		return Invariant{Name: inv.Name, Detail: err.Error()}
	}
	var bad []string
	for _, p := range completed {
		if p.at.Before(p.data.DueAt) {
			bad = append(bad, fmt.Sprintf("%s purged at %s, due %s", p.data.Entry, p.at.Format(time.RFC3339Nano), p.data.DueAt.Format(time.RFC3339)))
		}
		if info, ok := gone[p.data.Entry]; ok && p.data.UID == info.uid && p.data.DueAt.Before(info.deletedAt.Add(info.retention).Add(-2*time.Second)) {
			bad = append(bad, fmt.Sprintf("%s due %s, before its deletion plus %s retention", p.data.Entry, p.data.DueAt.Format(time.RFC3339), info.retention))
		}
	}
	return verdict(inv, bad, fmt.Sprintf("%d purges", len(completed)))
}

type purgeEvent struct {
	at   time.Time
	data events.PurgeData
}

func (w *workload) purgeEvents(ctx context.Context) ([]purgeEvent, error) {
	filter, _ := events.SubjectFilter(events.TypePurgeCompleted)
	cons, err := w.r.js.OrderedConsumer(ctx, events.RecordStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return nil, err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []purgeEvent
	for pending := info.NumPending; pending > 0; {
		batch, err := cons.Fetch(int(min(pending, 500)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			e, err := events.Decode(msg.Headers(), msg.Data())
			if err != nil {
				return nil, fmt.Errorf("purge-completed event does not decode: %w", err)
			}
			var data events.PurgeData
			if err := json.Unmarshal(e.Data(), &data); err != nil {
				return nil, err
			}
			out = append(out, purgeEvent{at: e.Time(), data: data})
		}
		if n == 0 {
			break
		}
		pending -= uint64(n)
	}
	return out, nil
}

func (w *workload) checkDeadLetters(ctx context.Context) Invariant {
	inv := Invariant{Name: "no dead letters except those the workload provoked"}
	dls, err := runtime.ListDeadLetters(ctx, w.r.js, "")
	if err != nil {
		return Invariant{Name: inv.Name, Detail: err.Error()}
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
	return verdict(inv, bad, fmt.Sprintf("%d provoked", provoked))
}

// checkLogs searches every log of the run for secret values: the storage key and the canary
// value in every bucket's credentials.
func (w *workload) checkLogs(canaries []string) Invariant {
	inv := Invariant{Name: "no secret value appears in any log line"}
	secrets := append([]string{stack.AzuriteKey}, canaries...)
	logs, _ := filepath.Glob(filepath.Join(w.r.cfg.Dir, "*.log"))
	var bad []string
	lines := 0
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		scanner := bufio.NewScanner(f)
		scanner.Buffer(make([]byte, 1<<20), 16<<20)
		for scanner.Scan() {
			lines++
			for _, s := range secrets {
				if strings.Contains(scanner.Text(), s) {
					bad = append(bad, fmt.Sprintf("%s line %d", filepath.Base(path), lines))
				}
			}
		}
		f.Close()
	}
	return verdict(inv, bad, fmt.Sprintf("%d lines in %d logs", lines, len(logs)))
}

func verdict(inv Invariant, bad []string, summary string) Invariant {
	inv.Pass = len(bad) == 0
	inv.Detail = summary
	if !inv.Pass {
		slices.Sort(bad)
		more := ""
		if len(bad) > 5 {
			more = fmt.Sprintf(" (+%d more)", len(bad)-5)
			bad = bad[:5]
		}
		inv.Detail = fmt.Sprintf("%d violations: %s%s", len(bad), strings.Join(bad, "; "), more)
	}
	return inv
}
