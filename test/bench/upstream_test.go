package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	controllerconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/housekeeper-dev/housekeeper/test/bench/providerlocal"
)

// side is an implementation running for one phase.
type side interface {
	// requests are the API requests sent so far, by process and verb, without watches.
	requests() (counts, error)
	// detail is a finer breakdown of requests (by process, then "verb resource"), or nil.
	detail() counts
	stop() error
}

// upstream runs provider-local's BackupBucket and BackupEntry controllers in a
// controller-runtime manager, as provider-local deploys them (reacting to gardenlet's operation
// annotation), with the given client limits on the manager's rest.Config.
type upstream struct {
	counter *requestCounter
	cancel  context.CancelFunc
	done    chan error
}

func startUpstream(b *testing.B, e *env, phase string, qps float32, burst int) (*upstream, error) {
	cfg := rest.CopyConfig(e.kube.Config)
	cfg.QPS, cfg.Burst = qps, burst
	u := &upstream{counter: newRequestCounter(), done: make(chan error, 1)}
	u.counter.instrument(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	u.cancel = cancel
	mgr, err := providerlocal.NewManager(ctx, cfg, e.root, e.logr(b, phase+"-provider-local.log"), manager.Options{
		Controller: controllerconfig.Controller{SkipNameValidation: ptr.To(true)}, // a manager per phase in one process
	})
	if err != nil {
		cancel()
		return nil, err
	}
	go func() { u.done <- mgr.Start(ctx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		_ = u.stop()
		return nil, fmt.Errorf("provider-local's caches did not sync")
	}
	return u, nil
}

func (u *upstream) requests() (counts, error) {
	v, _ := u.counter.snapshot()
	return counts{"provider-local": v}, nil
}

func (u *upstream) detail() counts {
	_, r := u.counter.snapshot()
	return counts{"provider-local": r}
}

func (u *upstream) stop() error {
	u.cancel()
	select {
	case err := <-u.done:
		return err
	case <-time.After(time.Minute):
		return fmt.Errorf("provider-local's manager did not stop within a minute")
	}
}
