// Package bridge turns BackupBucket and BackupEntry changes into CloudEvents on NATS
// JetStream, and never loses one: informer → coalescing, rate-limited workqueue → publish,
// waiting for JetStream's ack and retrying with backoff until it comes.
//
// The queue keeps the latest event per object, so while NATS is down it holds at most one
// event per object and the final state of each flows when NATS returns. Events carry
// deterministic ids, so what a restart or relist emits again is dropped by JetStream's
// duplicate window.
package bridge
