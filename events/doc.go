// Package events is housekeeper's contract: the CloudEvents the bridge publishes and the
// functions consume, their NATS subjects and deterministic ids, the binary-mode codec, and the
// JetStream streams they live in, and the NATS permissions of every identity. Every other part of
// housekeeper imports it; it imports only the CloudEvents SDK, nats.go and the standard
// library, and nothing here talks to Kubernetes or an object store.
//
// Events are triggers and an audit trail, never the source of truth: a consumer re-reads the
// live object and converges to it, so an old, duplicated or replayed event is harmless.
package events
