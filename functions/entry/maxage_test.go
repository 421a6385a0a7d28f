package entry_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/setup"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// The stream of record keeps events for maxAge; the entry's retention is 8 times that.
const (
	maxAge    = 3 * time.Second
	retention = 8 * maxAge
	// onTime is how late after its due time a purge may end: the scheduler's floor, the
	// purge of a few blobs and the watch that sees the entry go, on a loaded machine.
	onTime = 15 * time.Second
)

// withMaxAge sets the stream of record up to keep events for maxAge.
func withMaxAge(o *setup.Options) { o.MaxAge = maxAge }

// A purge whose retention is 8 times the stream's max age is done on time: its schedule
// outlives the stream's limit (events.TTLNever), and nothing publishes it again meanwhile (the
// bridge's resync is 30 minutes away).
func TestRetentionLongerThanTheStreamsMaxAge(t *testing.T) {
	t.Parallel() // its own stack, waiting most of the time: beside the other waiting tests
	p := pipeline.StartWithSetup(t, withMaxAge)
	purgeOnTime(t, startOn(t, p, false), nil)
}

// The same on a 3-node JetStream cluster whose stream leader is killed (SIGKILL) between the
// deletion and the due time: the next leader holds the schedule and fires it.
func TestRetentionLongerThanTheStreamsMaxAgeAcrossALeaderKill(t *testing.T) {
	t.Parallel() // its own stack, waiting most of the time: beside the other waiting tests
	p := pipeline.StartWithSetup(t, withMaxAge, testenv.WithNATSCluster(3))
	purgeOnTime(t, startOn(t, p, false), func(f *fixture) { f.KillStreamLeader() })
}

// purgeOnTime deletes an entry with the long retention, runs between (if set) once the
// deletion is older than the stream's max age, and checks that the backups stay until the due
// time and are gone, with the entry, soon after it.
func purgeOnTime(t *testing.T, f *fixture, between func(*fixture)) {
	const name = "shoot--dev--long--1"
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--long"}})
	e := newEntry(name, map[string]string{entry.AnnotationRetention: retention.String()})
	f.create(e)
	f.waitState(&extensionsv1alpha1.BackupEntry{}, name, gardencorev1beta1.LastOperationStateSucceeded)
	inside := snapshots(name+"/", 20)
	f.upload(inside...)

	f.delete(e)
	live := &extensionsv1alpha1.BackupEntry{}
	f.waitState(live, name, gardencorev1beta1.LastOperationStatePending)
	due := live.DeletionTimestamp.Add(retention)

	// Past several max ages, every event about the entry has aged out; the schedule has not.
	time.Sleep(3 * maxAge)
	holder, err := f.JS.Stream(context.Background(), events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.GetLastMsgForSubject(context.Background(), events.PurgeScheduleSubject(name)); err != nil {
		t.Fatalf("the purge's schedule, %s after the deletion with a max age of %s: %v", time.Since(live.DeletionTimestamp.Time).Round(time.Second), maxAge, err)
	}
	if between != nil {
		between(f)
	}
	for time.Until(due) > 2*time.Second {
		if n := len(f.list(name + "/")); n != len(inside) {
			t.Fatalf("%d of %d blobs left %s before the due time", n, len(inside), time.Until(due).Round(time.Second))
		}
		time.Sleep(time.Second)
	}
	f.Eventually(time.Until(due.Add(onTime)), fmt.Sprintf("%s purged and gone by %s (due %s)", name, onTime, due.Format(time.TimeOnly)), func() (bool, string) {
		ok, s := f.describe(&extensionsv1alpha1.BackupEntry{}, name)
		return !ok, s
	})
	if gone := time.Now(); gone.Before(due) {
		t.Errorf("entry released at %s, before its due time %s", gone, due)
	}
	if left := f.list(name + "/"); len(left) != 0 {
		t.Errorf("%d blobs left under %s/", len(left), name)
	}
	t.Logf("gone %s after its due time", time.Since(due).Round(10*time.Millisecond))
}
