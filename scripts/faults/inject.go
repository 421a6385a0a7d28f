package faults

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/runtime"
)

// Fault kinds, as the report names them.
const (
	faultKillWorker   = "function worker killed (SIGKILL)"
	faultRestartNATS  = "nats-server stopped and restarted"
	faultRestartKube  = "kube-apiserver restarted"
	faultKillBridge   = "bridge killed (SIGKILL)"
	faultReplayStream = "whole stream replayed to every function"
	faultDuplicates   = "events published twice"
)

var faultKinds = []string{faultKillWorker, faultRestartNATS, faultRestartKube, faultKillBridge, faultReplayStream, faultDuplicates}

// injectFaults breaks the stack at random moments until ctx ends; every kind comes up in each
// round of len(faultKinds) faults, in random order.
func (r *rig) injectFaults(ctx context.Context, w *workload) {
	var round []string
	for {
		gap := r.cfg.FaultEvery/2 + time.Duration(r.rand.Int64N(int64(r.cfg.FaultEvery)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
		if len(round) == 0 {
			round = append([]string(nil), faultKinds...)
			r.rand.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		}
		kind := round[0]
		round = round[1:]
		if err := r.inject(ctx, kind); err != nil {
			fmt.Fprintf(r.cfg.Out, "  fault %q: %v\n", kind, err)
			continue
		}
		r.mu.Lock()
		r.faults[kind]++
		r.mu.Unlock()
		fmt.Fprintf(r.cfg.Out, "  %s  fault: %s\n", time.Now().Format(time.TimeOnly), kind)
	}
}

func (r *rig) inject(ctx context.Context, kind string) error {
	switch kind {
	case faultKillWorker:
		p := r.workers[r.rand.IntN(len(r.workers))]
		p.kill()
		time.Sleep(time.Duration(500+r.rand.IntN(2500)) * time.Millisecond)
		return p.start()
	case faultKillBridge:
		r.bridge.kill()
		time.Sleep(time.Duration(500+r.rand.IntN(1500)) * time.Millisecond)
		return r.bridge.start()
	case faultRestartNATS:
		r.nats.Stop()
		time.Sleep(time.Duration(1000+r.rand.IntN(4000)) * time.Millisecond)
		return r.nats.Start()
	case faultRestartKube:
		return r.kube.RestartAPIServer()
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
		return r.publishDuplicates(ctx, 25)
	}
	return fmt.Errorf("unknown fault %q", kind)
}

// publishDuplicates publishes n random events of the stream again under a new message id, so
// JetStream stores them a second time and every function sees them twice.
func (r *rig) publishDuplicates(ctx context.Context, n int) error {
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
		raw, err := stream.GetMsg(ctx, 1+r.rand.Uint64N(last))
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
