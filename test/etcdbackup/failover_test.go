package etcdbackup_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// On a JetStream cluster, the leader of the stream that holds the cron schedule is killed
// (SIGKILL) while backups are taken every two seconds: the next leader fires the schedule, so
// backups go on. Backups are named after when their schedule fired: the ticks missed while no
// leader was elected fire once, late; every other backup is a tick's (a tick fired twice
// overwrites its own backup, it never adds one).
func TestBackupsGoOnAcrossAStreamLeaderKill(t *testing.T) {
	p := pipeline.Start(t, testenv.WithNATSCluster(3))
	c := p.Client
	ctx := context.Background()
	_, store, etcd, _ := startBackups(t, p)
	if _, err := etcd.Put(ctx, "/registry/pods/team/pod", `{"spec":{}}`); err != nil {
		t.Fatal(err)
	}

	cfg := &backupv1alpha1.EtcdBackupConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "main"},
		Spec: backupv1alpha1.EtcdBackupConfigSpec{Etcd: backupv1alpha1.EtcdReference{Endpoints: []string{etcd.ClientURL}},
			Schedule: "*/2 * * * * *", Keep: 1000, Destination: "local"}}
	if err := c.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	ticks := func() []time.Time {
		var at []time.Time
		for _, key := range listKeys(t, store, destination.ConfigPrefix(cfg)) {
			name := strings.TrimPrefix(key, destination.ConfigPrefix(cfg))
			if strings.HasPrefix(name, ".") && strings.Contains(name, ".upload-") {
				continue // the local store's file of an upload in flight
			}
			tick, err := time.Parse("20060102T150405Z", strings.TrimSuffix(name, ".db"))
			if err != nil {
				t.Fatalf("backup %s is not named after a fire time: %v", key, err)
			}
			at = append(at, tick)
		}
		return at
	}
	p.Eventually(60*time.Second, "three backups before the kill", func() (bool, string) {
		n := len(ticks())
		return n >= 3, fmt.Sprintf("%d backups", n)
	})

	p.KillStreamLeader()
	killed := time.Now()

	var after []time.Time
	p.Eventually(90*time.Second, "three backups of ticks after the kill", func() (bool, string) {
		after = after[:0]
		for _, tick := range ticks() {
			if tick.After(killed) {
				after = append(after, tick)
			}
		}
		return len(after) >= 3, fmt.Sprintf("%d backups since the kill", len(after))
	})
	t.Logf("the first backup after the kill is of the tick %s after it", after[0].Sub(killed).Round(time.Second))

	// A backup is named after the moment its schedule fired, to the second. The ticks that
	// came due without a leader fire once, late, when the next leader takes over: that one
	// backup may fall between ticks; no other may.
	all := ticks()
	var late []string
	for _, tick := range all {
		if tick.Second()%2 != 0 {
			late = append(late, tick.Format(time.TimeOnly))
			if tick.Before(killed.Truncate(time.Second)) {
				t.Errorf("backup of %s, before the kill: not a tick of */2 * * * * *", tick.Format(time.RFC3339))
			}
		}
	}
	if len(late) > 1 {
		t.Errorf("backups between ticks at %v: only the late fire after the election may be", late)
	}
	missed := 0
	for i := 1; i < len(all); i++ {
		missed += int(all[i].Sub(all[i-1])/(2*time.Second)) - 1
	}
	t.Logf("%d backups from %s to %s; %d ticks without a backup (the election, and a slow snapshot)",
		len(all), all[0].Format(time.TimeOnly), all[len(all)-1].Format(time.TimeOnly), missed)
}
