package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// scaledObject is the part of a rendered ScaledObject the operator's loop needs.
type scaledObject struct {
	Spec struct {
		PollingInterval int `json:"pollingInterval"`
		Triggers        []struct {
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

// kedaOperator plays KEDA's operator for one function at zero replicas: every pollingInterval
// of the chart's ScaledObject, at a phase of its own, it asks KEDA's own nats-jetstream scaler
// (test/keda, built from the KEDA module) whether the function's trigger is active.
type kedaOperator struct {
	scaler, file string
	interval     time.Duration
}

// newKEDAOperator renders the chart in keda mode with NATS's monitoring endpoint monitor and
// keeps fn's ScaledObject.
func newKEDAOperator(b *testing.B, fn, monitor string) *kedaOperator {
	bin, err := stack.KEDAScalerBinary()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		b.Fatalf("KEDA's scaler (make tools builds it): %v", err)
	}
	versions, err := stack.Versions()
	if err != nil {
		b.Fatal(err)
	}
	r, err := chart.Render("housekeeper", map[string]any{
		"cluster": "bench-rest", "types": []any{"local"}, "local": map[string]any{"hostPath": "/var/lib/housekeeper-buckets"},
		// The bench's NATS has no identities: KEDA reads account $G.
		"mode": "keda", "nats": map[string]any{"monitoringEndpoint": monitor, "identitiesSecret": ""},
	}, versions["KUBERNETES_VERSION"])
	if err != nil {
		b.Fatal(err)
	}
	for _, doc := range strings.Split(string(r.Manifest()), "\n---") {
		if !strings.Contains(doc, "\nkind: ScaledObject") {
			continue
		}
		var so scaledObject
		if err := yaml.Unmarshal([]byte(doc), &so); err != nil {
			b.Fatal(err)
		}
		if len(so.Spec.Triggers) == 0 || so.Spec.Triggers[0].Metadata["consumer"] != fn {
			continue
		}
		file := filepath.Join(b.TempDir(), fn+"-scaledobject.yaml")
		if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
			b.Fatal(err)
		}
		return &kedaOperator{scaler: bin, file: file, interval: time.Duration(so.Spec.PollingInterval) * time.Second}
	}
	b.Fatalf("the chart renders no ScaledObject for %s", fn)
	return nil
}

// active asks the scaler once, as the operator does each polling interval.
func (k *kedaOperator) active() (bool, error) {
	readings, err := stack.ReadKEDA(k.scaler, k.file)
	if err != nil {
		return false, err
	}
	if len(readings) != 1 {
		return false, fmt.Errorf("kedascaler read %d triggers, want the function's one: %v", len(readings), readings)
	}
	if r := readings[0]; r.Error != "" {
		return false, fmt.Errorf("kedascaler: %s", r.Error)
	}
	return readings[0].Active, nil
}

// awaitActive polls from start, at a random phase of the interval (the operator's loop does
// not know when an event comes), until the trigger is active, and returns when that poll was.
func (k *kedaOperator) awaitActive(start time.Time, timeout time.Duration) (time.Time, error) {
	tick := start.Add(time.Duration(rand.Int64N(int64(k.interval))))
	for end := start.Add(timeout); tick.Before(end); tick = tick.Add(k.interval) {
		time.Sleep(time.Until(tick))
		on, err := k.active()
		if err != nil {
			return time.Time{}, err
		}
		if on {
			return tick, nil
		}
	}
	return time.Time{}, fmt.Errorf("KEDA's scaler did not find the trigger active within %s", timeout)
}

// fromZero is one scale from zero: due → the operator's poll found the trigger active, and →
// the function settled the event.
type fromZero struct{ active, settled []time.Duration }

// scaleFromZeroPurge deletes n entries one at a time, each with retention retention, the entry
// function warm and the purge function at zero; KEDA's scaler, polled as the chart's
// ScaledObject says, wakes the purge when the purge comes due.
func (w *restWorld) scaleFromZeroPurge(b *testing.B, n int, retention time.Duration) (fromZero, time.Duration) {
	ctx := context.Background()
	k := newKEDAOperator(b, "purge", w.nats.MonitorEndpoint)
	w.startFunctions(b, "entry")
	defer w.stopFunctions()
	p := newPhaseObjects("keda", n)
	p.bucket = w.bucket
	w.e.obs.track(p.entries)
	if err := createInputs(ctx, w.e.driver, p); err != nil {
		b.Fatal(err)
	}
	var res fromZero
	logf("rest: %d purges from zero, KEDA polling every %s", n, k.interval)
	for i, name := range p.entries {
		e := newEntry(name, p.bucket)
		e.Annotations[entry.AnnotationRetention] = retention.String()
		if err := w.e.driver.Create(ctx, e); err != nil {
			b.Fatal(err)
		}
		if err := w.awaitEntries([]string{name}, time.Minute, "converged", func(o entryObs) bool { return !o.converged.IsZero() }); err != nil {
			b.Fatal(err)
		}
		if err := deleteExtensionObject(ctx, w.e.driver, e); err != nil {
			b.Fatal(err)
		}
		live := &extensionsv1alpha1.BackupEntry{}
		if err := stack.Poll(time.Minute, 10*time.Millisecond, name+" pending", func() (bool, string, error) {
			if err := w.e.driver.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
				return false, "", err
			}
			op := live.Status.LastOperation
			return op != nil && op.State == gardencorev1beta1.LastOperationStatePending, "", nil
		}); err != nil {
			b.Fatal(err)
		}
		due := live.DeletionTimestamp.Add(retention)
		at, err := k.awaitActive(time.Now(), retention+3*k.interval)
		if err != nil {
			b.Fatalf("purge %d: %v", i, err)
		}
		if at.Before(due) {
			b.Fatalf("purge %d: KEDA found the purge active at %s, before it was due at %s", i, at.Format(time.RFC3339Nano), due.Format(time.RFC3339Nano))
		}
		proc := w.function(b, "purge")
		line, err := awaitColdStart(proc, 30*time.Second)
		if err != nil {
			proc.Stop()
			b.Fatalf("purge %d: %v", i, err)
		}
		total, _, err := line.phases(proc.exec)
		if err != nil {
			b.Fatal(err)
		}
		res.active = append(res.active, at.Sub(due))
		res.settled = append(res.settled, proc.exec.Add(total).Sub(due))
		if err := w.awaitEntries([]string{name}, time.Minute, "gone", func(o entryObs) bool { return !o.gone.IsZero() }); err != nil {
			b.Fatal(err)
		}
		if err := w.drained("purge", 30*time.Second); err != nil {
			b.Fatal(err)
		}
		proc.Stop()
	}
	return res, k.interval
}

func printFromZero(out io.Writer, n int, interval time.Duration, r fromZero) {
	s := func(ds []time.Duration, p float64) string { return fmt.Sprintf("%.1f", percentile(ds, p).Seconds()) }
	fmt.Fprintf(out, "\n| a purge coming due with its function at zero (%d), KEDA polling every %s | due → KEDA's scaler active, s (p50 / max) | due → event settled, s (p50 / max) |\n|---|---:|---:|\n", n, interval)
	fmt.Fprintf(out, "| purge | %s / %s | %s / %s |\n", s(r.active, 0.5), s(r.active, 1), s(r.settled, 0.5), s(r.settled, 1))
	fmt.Fprintln(out, "\nOn a cluster add the Deployment's scale-up, the pod's scheduling and the image pull (cached after the first) between the two.")
}
