package bridge

import (
	"context"
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

// RunAsLeader runs run while this process holds the lease and returns when ctx is done or
// the lease is lost (then with an error: the process should exit and start over, since
// informers cannot be restarted).
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
	var (
		runErr error
		led    bool
	)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				led = true
				log.Info("leading", zap.String("lease", le.Namespace+"/"+le.Name), zap.String("identity", le.Identity))
				runErr = run(ctx)
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
	elector.Run(ctx) // returns when ctx is done or the lease is lost
	if runErr != nil {
		return runErr
	}
	if led && ctx.Err() == nil {
		return fmt.Errorf("lost lease %s/%s", le.Namespace, le.Name)
	}
	return nil
}
