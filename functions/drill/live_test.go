package drill

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
)

// Without a live etcd, or with one that does not answer, the drill says so and how old the
// newest restorable point is; neither is an error of the drill's nor a verdict on the backup.
func TestCompareLiveWithoutAnAnswer(t *testing.T) {
	point := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	now := point.Add(90 * time.Second)
	refused := LiveEtcdFunc(func(context.Context) (*clientv3.Client, string, error) {
		return nil, "", errors.New("EtcdUnreachable: no etcd endpoint answered")
	})
	for _, tc := range []struct {
		name    string
		live    LiveEtcd
		outcome string
		reason  string
	}{
		{"not configured", nil, backupv1alpha1.LiveNotConfigured, "no live etcd configured for these backups"},
		{"unreachable", refused, backupv1alpha1.LiveUnreachable, "the live etcd is not reachable: EtcdUnreachable: no etcd endpoint answered"},
	} {
		res := Result{Revision: 300, NewestPoint: point}
		if err := compareLive(context.Background(), tc.live, nil, now, &res); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		l := res.Live
		if l.Outcome != tc.outcome || l.Reason != tc.reason || l.BehindSeconds != 90 || l.Revision != 0 || l.err() != nil {
			t.Errorf("%s: %+v (error %v); want %s, %q, 90 s behind, no error", tc.name, l, l.err(), tc.outcome, tc.reason)
		}
	}
}

func TestHistory(t *testing.T) {
	for rev, want := range map[int64]string{-1: "from the start", 0: "from the start", 12345: "from revision 12,345"} {
		if got := history(rev); got != want {
			t.Errorf("history(%d) = %q, want %q", rev, got, want)
		}
	}
}

// A drill out of time while it asks the live etcd judged nothing: an error of the drill's, so
// that its timeout makes the result an Error, not Restorable with an etcd that did not answer.
func TestCompareLiveCutShort(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	waits := LiveEtcdFunc(func(ctx context.Context) (*clientv3.Client, string, error) { return nil, "", ctx.Err() })
	res := Result{Revision: 300}
	err := compareLive(ctx, waits, nil, time.Now(), &res)
	if !errors.Is(err, ErrDrill) || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want %v and %v", err, ErrDrill, context.Canceled)
	}
}
