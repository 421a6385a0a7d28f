package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderElection configures the Lease that lets one of several bridge replicas publish.
type LeaderElection struct {
	Namespace, Name, Identity string
}

// ErrLeaseLost is the cause of a term's context when the lease was lost (not given up at
// shutdown): another replica may lead by now, so the term publishes nothing more.
var ErrLeaseLost = errors.New("lease lost")

// RunAsLeader runs run while this process holds the lease and returns when ctx is done, or when
// the lease is lost: then with an error wrapping ErrLeaseLost, for the caller to stand by for
// the lease again with a new run (informers cannot be restarted) instead of exiting. run's
// context is cancelled with the cause ErrLeaseLost when the lease is lost.
func RunAsLeader(ctx context.Context, cfg *rest.Config, le LeaderElection, log *zap.Logger, run func(context.Context) error) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, le.Namespace, le.Name,
		cs.CoreV1(), cs.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: le.Identity})
	if err != nil {
		return err
	}
	// The callback only hands over the leader's context; run runs here, so that this function
	// returns only after run has returned (flushed its queue).
	leading := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				log.Info("leading", zap.String("lease", le.Namespace+"/"+le.Name), zap.String("identity", le.Identity))
				leading <- ctx
			},
			OnStoppedLeading: func() { log.Info("stopped leading", zap.String("identity", le.Identity)) },
			OnNewLeader: func(identity string) {
				if identity != le.Identity {
					log.Info("standing by", zap.String("leader", identity))
				}
			},
		},
	})
	if err != nil {
		return err
	}
	electorCtx, stopElector := context.WithCancel(ctx)
	defer stopElector()
	electorDone := make(chan struct{})
	go func() { defer close(electorDone); elector.Run(electorCtx) }()
	select {
	case <-electorDone: // ctx ended before this process led
		return nil
	case leaderCtx := <-leading:
		termCtx, endTerm := context.WithCancelCause(ctx)
		defer endTerm(nil)
		go func() {
			<-leaderCtx.Done()
			if ctx.Err() == nil { // ctx's error is set before the contexts below it end
				endTerm(ErrLeaseLost)
			}
		}()
		err := run(termCtx) // returns when ctx is done or the lease is lost
		lost := ctx.Err() == nil
		stopElector() // releases the lease
		<-electorDone
		if err != nil {
			return err
		}
		if lost {
			return fmt.Errorf("%w: %s/%s", ErrLeaseLost, le.Namespace, le.Name)
		}
		return nil
	}
}
