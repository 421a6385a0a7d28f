package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/runtime"
)

// Fault kinds, as the report names them.
const (
	faultKillWorker     = "function worker killed (SIGKILL)"
	faultKillNATS       = "nats-server killed (SIGKILL) and restarted"
	faultRestartKube    = "kube-apiserver killed and restarted"
	faultKillEtcd       = "etcd killed (SIGKILL) and restarted"
	faultRestartAzurite = "Azurite restarted"
	faultKillBridge     = "bridge killed (SIGKILL)"
	faultReplayStream   = "whole stream replayed to every function"
	faultDuplicates     = "events published twice"
)

var faultKinds = []string{faultKillWorker, faultKillNATS, faultRestartKube, faultKillEtcd, faultRestartAzurite,
	faultKillBridge, faultReplayStream, faultDuplicates}

// faultStep is one fault of the plan: when, what, and the choices it needs.
type faultStep struct {
	gap  time.Duration // before the fault
	kind string
	// victim picks a worker; down is how long a killed process stays down.
	victim int
	down   time.Duration
	// pick draws the events publishDuplicates sends again.
	pick *rand.Rand
}

// faultPlan draws the faults from the run's seed alone, so a seed reproduces them: every kind
// comes up in each round of len(faultKinds) faults, in random order.
type faultPlan struct {
	rand       *rand.Rand
	every      time.Duration
	round      []string
	numWorkers int
}

func newFaultPlan(cfg Config) *faultPlan {
	return &faultPlan{rand: newRand(cfg, 42), every: cfg.FaultEvery, numWorkers: len(functionNames) * cfg.Replicas}
}

func (p *faultPlan) next() faultStep {
	if len(p.round) == 0 {
		p.round = append([]string(nil), faultKinds...)
		p.rand.Shuffle(len(p.round), func(i, j int) { p.round[i], p.round[j] = p.round[j], p.round[i] })
	}
	step := faultStep{
		gap:    p.every/2 + time.Duration(p.rand.Int64N(int64(p.every))),
		kind:   p.round[0],
		victim: p.rand.IntN(p.numWorkers),
		down:   time.Duration(500+p.rand.IntN(2500)) * time.Millisecond,
		pick:   rand.New(rand.NewPCG(p.rand.Uint64(), 1)),
	}
	p.round = p.round[1:]
	return step
}

// injectFaults breaks the stack following the plan until ctx ends.
func (r *rig) injectFaults(ctx context.Context) {
	for {
		step := r.plan.next()
		select {
		case <-ctx.Done():
			return
		case <-time.After(step.gap):
		}
		from := time.Now()
		if err := r.inject(ctx, step); err != nil {
			fmt.Fprintf(r.cfg.Out, "  fault %q: %v\n", step.kind, err)
			continue
		}
		r.mu.Lock()
		r.faults[step.kind]++
		r.windows = append(r.windows, window{from: from, to: time.Now()})
		r.mu.Unlock()
		fmt.Fprintf(r.cfg.Out, "  %s  fault: %s (%s)\n", from.Format(time.TimeOnly), step.kind, time.Since(from).Round(100*time.Millisecond))
	}
}

func (r *rig) inject(ctx context.Context, step faultStep) error {
	switch step.kind {
	case faultKillWorker:
		return r.killAndRestart(r.workers[step.victim], step.down)
	case faultKillBridge:
		return r.killAndRestart(r.bridge, step.down)
	case faultKillNATS:
		return r.killAndRestart(r.nats, step.down)
	case faultRestartAzurite:
		r.azurite.stop(10 * time.Second)
		time.Sleep(step.down)
		return r.azurite.start()
	case faultRestartKube:
		return r.kube.RestartAPIServer()
	case faultKillEtcd:
		return r.kube.KillEtcd()
	case faultReplayStream:
		for _, fn := range functionNames {
			replayCtx, cancel := context.WithTimeout(ctx, time.Minute)
			_, err := runtime.Replay(replayCtx, r.js, fn, runtime.Window{FromSeq: 1}, nil)
			cancel()
			if err != nil {
				return fmt.Errorf("replay to %s: %w", fn, err)
			}
		}
		return nil
	case faultDuplicates:
		return r.publishDuplicates(ctx, step.pick, 25)
	}
	return fmt.Errorf("unknown fault %q", step.kind)
}

func (r *rig) killAndRestart(p *process, down time.Duration) error {
	p.kill()
	time.Sleep(down)
	return p.start()
}

// faultWindows returns the times faults were in effect.
func (r *rig) faultWindows() []window {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]window(nil), r.windows...)
}

// overlapsFault reports whether [from, to] overlaps a fault's window.
func overlapsFault(windows []window, from, to time.Time) bool {
	for _, w := range windows {
		if !w.to.Before(from) && !to.Before(w.from) {
			return true
		}
	}
	return false
}

// publishDuplicates publishes n random events of the stream again under a new message id, so
// JetStream stores them a second time and every function sees them twice.
func (r *rig) publishDuplicates(ctx context.Context, pick *rand.Rand, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stream, err := r.js.Stream(ctx, events.RecordStream)
	if err != nil {
		return err
	}
	last := stream.CachedInfo().State.LastSeq
	if last == 0 {
		return nil
	}
	for i := range n {
		raw, err := stream.GetMsg(ctx, 1+pick.Uint64N(last))
		if err != nil {
			continue // deleted or expired: pick another time
		}
		if !strings.HasPrefix(raw.Subject, "housekeeper.backup") && !strings.HasPrefix(raw.Subject, "housekeeper.purge.due.") {
			continue // only events, not schedules or redrives
		}
		msg := nats.NewMsg(raw.Subject)
		for k, v := range raw.Header {
			if !strings.HasPrefix(k, "Nats-") {
				msg.Header[k] = v
			}
		}
		msg.Header.Set(nats.MsgIdHdr, fmt.Sprintf("duplicate/%d/%d/%d", raw.Sequence, time.Now().UnixNano(), i))
		msg.Data = raw.Data
		if _, err := r.js.PublishMsg(ctx, msg); err != nil {
			return err
		}
	}
	return nil
}
