// Package runner runs housekeeper's functions. A function is a pure handler of CloudEvents;
// the runner feeds it from a durable JetStream pull consumer (pull mode, scaled by KEDA) or
// from CloudEvents over HTTP (Knative mode), and owns everything around the handler: acks,
// in-progress heartbeats, retries with backoff, the dead-letter stream, graceful shutdown,
// metrics. The durable consumers are made by `housekeeper setup` (EnsureConsumer, with
// ConsumerSettings); a worker only binds to its own. It also implements the operators' tools:
// replay and dead-letter retry.
package runner
