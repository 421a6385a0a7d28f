package entry_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
)

// Two runbooks of infra/docs/operating.md ("Runbooks"), done as written, on one pipeline and one
// timeline:
//   - a shoot deleted by mistake: before its purge is due, the operator annotates its
//     BackupEntry with a longer retention; nothing is purged at the old due time, and the entry
//     says when it is due now;
//   - NATS lost with purges pending: the streams are gone with every schedule in them;
//     `housekeeper setup` and `housekeeper resync` bring each pending purge back, due when it
//     was (the deletion time plus the retention, read from the entry), and it is done then, not
//     before; the held purge stays held.
func TestRunbooksHoldAPurgeAndLoseNATS(t *testing.T) {
	t.Parallel() // its own stack, waiting most of the time: beside the other waiting tests
	f := start(t, false)
	ctx := context.Background()
	const (
		held      = "shoot--dev--mistake--1"
		pending   = "shoot--dev--pending--2"
		retention = 20 * time.Second
	)
	for _, name := range []string{held, pending} {
		f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: strings.TrimSuffix(name, name[strings.LastIndex(name, "--"):])}})
		f.create(newEntry(name, map[string]string{entry.AnnotationRetention: retention.String()}))
		f.waitState(&extensionsv1alpha1.BackupEntry{}, name, gardencorev1beta1.LastOperationStateSucceeded)
		f.upload(snapshots(name+"/", 5)...)
		f.delete(f.entry(name))
		f.waitState(&extensionsv1alpha1.BackupEntry{}, name, gardencorev1beta1.LastOperationStatePending)
	}
	due := f.entry(pending).DeletionTimestamp.Add(retention)
	heldDue := f.entry(held).DeletionTimestamp.Add(retention)

	// The shoot deleted by mistake: kubectl annotate backupentry … housekeeper.dev/retention=720h --overwrite
	f.patchEntry(held, func(e *extensionsv1alpha1.BackupEntry) { e.Annotations[entry.AnnotationRetention] = "720h" })
	newDue := f.entry(held).DeletionTimestamp.Add(720 * time.Hour).UTC().Format(time.RFC3339)
	f.Eventually(30*time.Second, held+" says its new due time", func() (bool, string) {
		_, s := f.describe(&extensionsv1alpha1.BackupEntry{}, held)
		return strings.Contains(s, newDue), s
	})

	// NATS lost: every stream, with the schedules and the consumers in it.
	for _, stream := range []string{events.RecordStream, events.DeadLetterStream} {
		if err := f.JS.DeleteStream(ctx, stream); err != nil {
			t.Fatalf("losing %s: %v", stream, err)
		}
	}
	f.Setup()
	var out, errOut bytes.Buffer
	if code := cli.Main(ctx, append(f.NATSArgs(events.IdentityOperator), "resync"), &out, &errOut); code != 0 {
		t.Fatalf("housekeeper resync: exit %d\n%s", code, errOut.String())
	}
	t.Logf("housekeeper resync: %s", strings.TrimSpace(out.String()))
	stream, err := f.JS.Stream(ctx, events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	f.Eventually(30*time.Second, "both purges scheduled again", func() (bool, string) {
		var missing []string
		for _, name := range []string{held, pending} {
			if _, err := stream.GetLastMsgForSubject(ctx, events.PurgeScheduleSubject(name)); err != nil {
				missing = append(missing, fmt.Sprintf("%s: %v", name, err))
			}
		}
		return len(missing) == 0, strings.Join(missing, "; ")
	})

	for time.Until(due) > 2*time.Second {
		for _, name := range []string{held, pending} {
			if n := len(f.list(name + "/")); n != 5 {
				t.Fatalf("%s: %d of 5 snapshots left %s before the due time", name, n, time.Until(due).Round(time.Second))
			}
		}
		time.Sleep(time.Second)
	}
	f.Eventually(time.Until(due.Add(onTime)), pending+" purged and gone on time", func() (bool, string) {
		ok, s := f.describe(&extensionsv1alpha1.BackupEntry{}, pending)
		return !ok, s
	})
	if left := f.list(pending + "/"); len(left) != 0 {
		t.Errorf("%d snapshots left under %s/ after its purge", len(left), pending)
	}
	if time.Now().Before(heldDue.Add(2 * time.Second)) {
		time.Sleep(time.Until(heldDue.Add(2 * time.Second)))
	}
	if n := len(f.list(held + "/")); n != 5 {
		t.Errorf("%s, held, has %d of 5 snapshots after its old due time", held, n)
	}
	if ok, s := f.describe(&extensionsv1alpha1.BackupEntry{}, held); !ok || !strings.Contains(s, newDue) {
		t.Errorf("%s, held: %s; want it Pending until %s", held, s, newDue)
	}
}
