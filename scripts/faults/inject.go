package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
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

	// Dependency outages of Config.Outage each, housekeeper's processes left running through
	// them.
	faultKubeAway  = "kube-apiserver away from housekeeper (connections refused, open ones cut)"
	faultNATSDown  = "every nats-server down (SIGKILL), then restarted with its data"
	faultStoreDown = "object store (Azurite) down, then restarted with its data"

	// On a cluster, instead of faultKillNATS:
	faultKillStreamLeader   = "leader of the stream killed (SIGKILL) and restarted"
	faultKillConsumerLeader = "leader of a function's consumer killed (SIGKILL) and restarted"
	faultKillMetaLeader     = "JetStream meta leader killed (SIGKILL) and restarted"
	faultLoseQuorum         = "two of three nodes killed (SIGKILL): no quorum, then restarted"
)

// quorumLoss is how long a cluster stays without quorum.
const quorumLoss = 15 * time.Second

// natsFaultKinds are the faults that break NATS itself, on one server (false) and on a cluster.
var natsFaultKinds = map[bool][]string{
	false: {faultKillNATS},
	true:  {faultKillStreamLeader, faultKillConsumerLeader, faultKillMetaLeader, faultLoseQuorum},
}

// outageKinds are the faults that take a dependency away for Config.Outage.
var outageKinds = []string{faultKubeAway, faultNATSDown, faultStoreDown}

func isOutage(kind string) bool { return slices.Contains(outageKinds, kind) }

// leavesStreamLeaderless says kind leaves the stream of record without a leader for a while:
// purges that come due then must fire on the next leader.
func leavesStreamLeaderless(kind string) bool {
	return kind == faultKillStreamLeader || kind == faultLoseQuorum
}

// FaultKinds are the faults a run of cfg injects, every one in each round.
func FaultKinds(cfg Config) []string {
	nats := slices.Clone(natsFaultKinds[cfg.Clustered()])
	return append(append(nats, faultKillWorker, faultRestartKube, faultKillEtcd, faultRestartAzurite,
		faultKillBridge, faultReplayStream, faultDuplicates), outageKinds...)
}

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
	kinds      []string
	round      []string
	rounds     int
	numWorkers int
}

func newFaultPlan(cfg Config) *faultPlan {
	return &faultPlan{rand: newRand(cfg, 42), every: cfg.FaultEvery, kinds: FaultKinds(cfg), numWorkers: len(functionNames) * cfg.Replicas}
}

func (p *faultPlan) next() faultStep {
	if len(p.round) == 0 {
		p.round = append([]string(nil), p.kinds...)
		p.rand.Shuffle(len(p.round), func(i, j int) { p.round[i], p.round[j] = p.round[j], p.round[i] })
		if p.rounds == 0 {
			// The faults that leave the stream without a leader come first, while the
			// workload's deletions are still coming due: purges must come due during them.
			slices.SortStableFunc(p.round, func(a, b string) int {
				switch {
				case leavesStreamLeaderless(a) && !leavesStreamLeaderless(b):
					return -1
				case leavesStreamLeaderless(b) && !leavesStreamLeaderless(a):
					return 1
				}
				return 0
			})
		}
		p.rounds++
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
		if leavesStreamLeaderless(step.kind) {
			r.untilJustBeforeADue(ctx)
		}
		if isOutage(step.kind) {
			// The outage deletes entries whose backups the workload has written.
			select {
			case <-ctx.Done():
				return
			case <-r.workload.ready:
			}
		}
		from := time.Now()
		span, err := r.inject(ctx, step)
		if err != nil {
			fmt.Fprintf(r.cfg.Out, "  fault %q: %v\n", step.kind, err)
			if span.from.IsZero() {
				continue
			}
		}
		to := time.Now()
		if !span.from.IsZero() {
			// An outage: from the dependency going away to its return.
			from, to = span.from, span.to
		}
		blow := to.Sub(from)
		recovered := span.note
		if slices.Contains(natsFaultKinds[r.cfg.Clustered()], step.kind) {
			// A NATS fault lasts until JetStream answers with every leader elected again.
			// Measured even when this was the last fault (ctx ends with the fault period).
			if err := r.awaitJetStream(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintf(r.cfg.Out, "  fault %q: JetStream did not recover: %v\n", step.kind, err)
			} else {
				to = time.Now()
				d := to.Sub(from)
				r.mu.Lock()
				r.recovered[step.kind] = append(r.recovered[step.kind], d)
				r.mu.Unlock()
				recovered = fmt.Sprintf(", JetStream recovered after %s", d.Round(100*time.Millisecond))
			}
		}
		r.mu.Lock()
		r.faults[step.kind]++
		r.windows = append(r.windows, window{from: from, to: to, kind: step.kind})
		if span.recovered > 0 {
			r.recovered[step.kind] = append(r.recovered[step.kind], span.recovered)
		}
		r.mu.Unlock()
		fmt.Fprintf(r.cfg.Out, "  %s  fault: %s (%s%s)\n", from.Format(time.TimeOnly), step.kind, blow.Round(100*time.Millisecond), recovered)
	}
}

// span is what an outage reports: when the dependency went away and when it was back (for NATS,
// once JetStream answered with every leader), how long JetStream took after the restart, and a
// note for the fault's line.
type span struct {
	from, to  time.Time
	recovered time.Duration
	note      string
}

func (r *rig) inject(ctx context.Context, step faultStep) (span, error) {
	if isOutage(step.kind) {
		return r.outage(ctx, step.kind)
	}
	return span{}, r.injectBlow(ctx, step)
}

func (r *rig) injectBlow(ctx context.Context, step faultStep) error {
	switch step.kind {
	case faultKillWorker:
		return r.killAndRestart(r.workers[step.victim], step.down)
	case faultKillBridge:
		return r.killAndRestart(r.bridge, step.down)
	case faultKillNATS:
		return r.killAndRestart(r.nats[0], step.down)
	case faultKillStreamLeader:
		return r.killLeader(ctx, step.down, func(ctx context.Context) (string, error) {
			s, err := r.js.Stream(ctx, events.RecordStream)
			if err != nil {
				return "", err
			}
			return clusterLeader(s.CachedInfo().Cluster)
		})
	case faultKillConsumerLeader:
		fn := functionNames[step.victim%len(functionNames)]
		return r.killLeader(ctx, step.down, func(ctx context.Context) (string, error) {
			c, err := r.js.Consumer(ctx, events.RecordStream, fn)
			if err != nil {
				return "", err
			}
			return clusterLeader(c.CachedInfo().Cluster)
		})
	case faultKillMetaLeader:
		return r.killLeader(ctx, step.down, r.metaLeader)
	case faultLoseQuorum:
		first := step.victim % len(r.nats)
		victims := []*process{r.nats[first], r.nats[(first+1)%len(r.nats)]}
		for _, p := range victims {
			p.kill()
		}
		time.Sleep(quorumLoss)
		for _, p := range victims {
			if err := p.start(); err != nil {
				return err
			}
		}
		return nil
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
			// On a cluster an election may be on: JetStream answers 503 until it is over.
			err := stack.Poll(30*time.Second, time.Second, "a replay to "+fn, func() (bool, string, error) {
				replayCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				_, err := runner.Replay(replayCtx, r.js, fn, runner.Window{FromSeq: 1}, nil)
				return err == nil, fmt.Sprint(err), nil
			})
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

// awaitJetStream waits (a minute at most) until JetStream answers for the stream of record and
// every function's consumer, each with a leader: the cluster has recovered from a fault.
func (r *rig) awaitJetStream(ctx context.Context) error {
	return stack.Poll(time.Minute, 100*time.Millisecond, "JetStream with every leader", func() (bool, string, error) {
		if ctx.Err() != nil {
			return false, "", ctx.Err()
		}
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		s, err := r.js.Stream(qctx, events.RecordStream)
		if err != nil {
			return false, "stream: " + err.Error(), nil
		}
		if _, err := clusterLeader(s.CachedInfo().Cluster); r.cfg.Clustered() && err != nil {
			return false, "stream: " + err.Error(), nil
		}
		for _, fn := range functionNames {
			c, err := r.js.Consumer(qctx, events.RecordStream, fn)
			if err != nil {
				return false, fn + ": " + err.Error(), nil
			}
			if _, err := clusterLeader(c.CachedInfo().Cluster); r.cfg.Clustered() && err != nil {
				return false, fn + ": " + err.Error(), nil
			}
		}
		return true, "", nil
	})
}

// untilJustBeforeADue waits until a purge is due within a second, so that the stream is left
// without a leader as its schedule comes due: the next leader must fire it. It waits while the
// workload still sends deletions (their purges come due later), at most a fault period.
func (r *rig) untilJustBeforeADue(ctx context.Context) {
	deadline := time.Now().Add(r.cfg.FaultPeriod)
	for time.Now().Before(deadline) {
		due := r.workload.nextDue(time.Now().Add(1200 * time.Millisecond))
		if !due.IsZero() && time.Until(due) < 10*time.Second {
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(due) - time.Second):
			}
			return
		}
		if due.IsZero() && len(r.workload.sentDeletions()) >= r.cfg.Deletions {
			return // every purge is due already
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// killLeader kills the node leader names (retrying while an election is still on) and starts
// it again after down.
func (r *rig) killLeader(ctx context.Context, down time.Duration, leader func(context.Context) (string, error)) error {
	var name string
	err := stack.Poll(30*time.Second, 250*time.Millisecond, "a leader", func() (bool, string, error) {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		n, err := leader(lctx)
		name = n
		return err == nil && n != "", fmt.Sprint(err), nil
	})
	if err != nil {
		return err
	}
	i := slices.IndexFunc(r.nats, func(p *process) bool { return p.name == name })
	if i < 0 {
		return fmt.Errorf("leader %q is none of the cluster's nodes", name)
	}
	return r.killAndRestart(r.nats[i], down)
}

func clusterLeader(c *jetstream.ClusterInfo) (string, error) {
	if c == nil || c.Leader == "" {
		return "", errors.New("no leader")
	}
	return c.Leader, nil
}

// metaLeader asks a node's monitoring endpoint for the JetStream meta leader.
func (r *rig) metaLeader(ctx context.Context) (string, error) {
	var last error
	for _, mon := range r.natsMon {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, mon+"/jsz", nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err
			continue
		}
		var jsz struct {
			Meta *struct {
				Leader string `json:"leader"`
			} `json:"meta_cluster"`
		}
		err = json.NewDecoder(resp.Body).Decode(&jsz)
		resp.Body.Close()
		if err == nil && jsz.Meta != nil && jsz.Meta.Leader != "" {
			return jsz.Meta.Leader, nil
		}
		last = fmt.Errorf("%s/jsz names no meta leader (%v)", mon, err)
	}
	return "", last
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
