package faults

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The bridge's Lease, which the rig's bridge holds (leader election on, as in production).
const (
	leaseNamespace = "default"
	leaseName      = "housekeeper-bridge"
	leaseIdentity  = "faults-bridge"
	// leaseDuration is the bridge's: a Lease not renewed for longer has lapsed.
	leaseDuration = 15 * time.Second
)

// outage takes a dependency away for Config.Outage with work under way: just before, it deletes
// entries due at once, a third and two thirds into the outage, so that purges are in flight as
// it begins and come due during it; a quarter into it, it deletes one more (due a second later)
// and updates another. Then the dependency returns.
func (r *rig) outage(ctx context.Context, kind string) (span, error) {
	w := r.workload
	for _, retention := range []time.Duration{0, r.cfg.Outage / 3, 2 * r.cfg.Outage / 3} {
		name, err := w.deleteReserved(ctx, retention.Truncate(time.Second))
		if err != nil {
			return span{}, err
		}
		if name == "" {
			fmt.Fprintf(r.cfg.Out, "  fault %q: no entry left to delete before it\n", kind)
		}
	}
	var s span
	var lease *leaseWatch
	s.from = time.Now()
	switch kind {
	case faultKubeAway:
		r.kubeProxy.Down()
	case faultNATSDown:
		for _, p := range r.nats {
			p.kill()
		}
	case faultStoreDown:
		r.azurite.stop(10 * time.Second)
	}
	time.Sleep(r.cfg.Outage / 4)
	_, delErr := w.deleteReserved(ctx, time.Second)
	updErr := w.touch(ctx, len(r.faultWindows()))
	time.Sleep(time.Until(s.from.Add(r.cfg.Outage)))
	var err error
	switch kind {
	case faultKubeAway:
		lease = r.readLease()
		err = r.kubeProxy.Up()
		s.to = time.Now()
		lease.followFrom(s.to, r.leaseRenewed)
		s.note = lease.String()
	case faultNATSDown:
		restart := time.Now()
		for _, p := range r.nats {
			if e := p.start(); e != nil && err == nil {
				err = e
			}
		}
		if err == nil {
			if err = r.awaitJetStream(context.WithoutCancel(ctx)); err != nil {
				err = fmt.Errorf("JetStream did not recover: %w", err)
			}
		}
		s.to = time.Now()
		s.recovered = s.to.Sub(restart)
		s.note = fmt.Sprintf(", JetStream answered with every leader %s after the restart", s.recovered.Round(100*time.Millisecond))
	case faultStoreDown:
		err = r.azurite.start()
		s.to = time.Now()
	}
	if lease != nil {
		r.mu.Lock()
		r.leases = append(r.leases, lease)
		r.mu.Unlock()
	}
	return s, errors.Join(err, delErr, updErr)
}

// leaseWatch follows the bridge's Lease, read directly (never through the outage), around an
// outage of the API server: whether it lapsed (the bridge lost it), and when the bridge renewed
// it again after the return.
type leaseWatch struct {
	// renewed is the Lease's last renewal before the return; err why it could not be read.
	renewed time.Time
	err     error

	mu sync.Mutex
	// back is when it was first seen renewed after the return, zero until then; done once the
	// watch ended.
	returned, back time.Time
	done           bool
}

// readLease reads the bridge's Lease as it is now.
func (r *rig) readLease() *leaseWatch {
	l := &leaseWatch{}
	l.renewed, l.err = r.leaseRenewed()
	return l
}

func (r *rig) leaseRenewed() (time.Time, error) {
	cs, err := kubernetes.NewForConfig(r.kube.Config)
	if err != nil {
		return time.Time{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := cs.CoordinationV1().Leases(leaseNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, err
	}
	if lease.Spec.RenewTime == nil {
		return time.Time{}, errors.New("the Lease has no renewTime")
	}
	return lease.Spec.RenewTime.Time, nil
}

// lapsed says the Lease had lapsed when the API server returned: the bridge had lost it.
func (l *leaseWatch) lapsed() bool {
	return l.err == nil && l.returned.Sub(l.renewed) > leaseDuration
}

// followFrom watches, in the background, for the Lease's first renewal after returned, for at
// most twice afterReturn.
func (l *leaseWatch) followFrom(returned time.Time, renewed func() (time.Time, error)) {
	l.returned = returned
	go func() {
		for time.Since(returned) < 2*afterReturn {
			if t, err := renewed(); err == nil && t.After(returned) {
				l.mu.Lock()
				l.back = time.Now()
				l.mu.Unlock()
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		l.mu.Lock()
		l.done = true
		l.mu.Unlock()
	}()
}

// renewedAfter is the time from the return to the Lease's first renewal after it; ok is false
// while it was not seen renewed, and final once the watch ended.
func (l *leaseWatch) renewedAfter() (d time.Duration, ok, final bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.back.IsZero() {
		return 0, false, l.done
	}
	return l.back.Sub(l.returned), true, true
}

// String is the note on the fault's line.
func (l *leaseWatch) String() string {
	if l.err != nil {
		return fmt.Sprintf(", the bridge's Lease unreadable: %v", l.err)
	}
	lapsed := "still held"
	if l.lapsed() {
		lapsed = "lapsed"
	}
	return fmt.Sprintf(", the bridge's Lease %s (last renewed %s before the return)", lapsed, l.returned.Sub(l.renewed).Round(100*time.Millisecond))
}
