// Package faults drives housekeeper's real stack — kube-apiserver, nats-server, Azurite, the
// bridge and every function as separate processes — through a workload while breaking it,
// then checks invariants once it has converged. `make faults` runs the full form; `make test`
// runs a short one.
package faults

import (
	"io"
	"time"
)

// Config sizes a run.
type Config struct {
	Buckets, Entries, Deletions, Recreations, Updates int
	// MaxRetention bounds the random retention of deleted entries.
	MaxRetention time.Duration
	// FaultPeriod is how long faults are injected; FaultEvery the mean gap between two.
	FaultPeriod, FaultEvery time.Duration
	// Outage is how long each dependency outage lasts: the API server away from housekeeper,
	// every nats-server down, the object store down. Longer than the bridge's lease (15 s), so
	// the API server's costs the bridge its lease.
	Outage time.Duration
	// Converge bounds the wait for the invariants after the last fault.
	Converge time.Duration
	// Replicas of each function.
	Replicas int
	// NATSNodes is 1 (one nats-server) or 3: a JetStream cluster of three processes with R3
	// streams, whose faults kill stream, consumer and meta leaders and take quorum away.
	NATSNodes int
	// Seed draws the workload and the faults; 0 picks one from the clock.
	Seed uint64
	// Short marks the short form, for the command that reproduces a run.
	Short bool
	// Timeout bounds the run from when the binaries are built (compiling is not on the clock);
	// 0 is no bound.
	Timeout time.Duration
	// Dir holds binaries, logs and stores; it is kept for inspection.
	Dir string
	Out io.Writer
}

// Full is the workload of `make faults`.
func Full() Config {
	return Config{
		Buckets: 20, Entries: 500, Deletions: 200, Recreations: 20, Updates: 150,
		MaxRetention: 60 * time.Second,
		FaultPeriod:  3 * time.Minute, FaultEvery: 8 * time.Second,
		Outage:   3 * time.Minute,
		Converge: 5 * time.Minute, Replicas: 2,
	}
}

// Short is the form `make test` runs.
func Short() Config {
	return Config{
		Buckets: 4, Entries: 60, Deletions: 24, Recreations: 4, Updates: 30,
		MaxRetention: 15 * time.Second,
		// The workload's updates and deletions are spread over the fault period; faults go on
		// until the last purge is due and every kind was injected once: a round of the eleven
		// kinds, three of them outages, takes about two minutes, more than the fault period.
		FaultPeriod: 45 * time.Second, FaultEvery: 2 * time.Second,
		// Over the bridge's lease (15 s; it gives up leading after 10 s without renewing): it
		// loses it, and stands by for it again. Short, as the three outages add to the round.
		Outage:   20 * time.Second,
		Converge: 3 * time.Minute, Replicas: 2, Short: true,
	}
}

// OnCluster is c on a three-node JetStream cluster. A round of faults is longer there (four
// kinds of NATS fault instead of one, a quorum loss of 15 s), so the short form's fault period,
// over which the workload spreads its deletions, grows.
func (c Config) OnCluster() Config {
	c.NATSNodes = 3
	if c.Short {
		c.FaultPeriod = 120 * time.Second
	}
	return c
}

// Clustered says the run is on a three-node JetStream cluster.
func (c Config) Clustered() bool { return c.NATSNodes > 1 }

// form is the flags of the command's form that reproduces a run.
func (c Config) form() string {
	f := ""
	if c.Short {
		f += " -short"
	}
	if c.Clustered() {
		f += " -cluster"
	}
	return f
}
