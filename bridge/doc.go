// Package bridge turns changes of the kinds it watches into CloudEvents on NATS JetStream, and
// never loses one: informer → coalescing, rate-limited workqueue → publish, waiting for
// JetStream's ack and retrying with backoff until it comes.
//
// The kinds are one table, kinds (kinds.go): Gardener's BackupBuckets and BackupEntries and
// housekeeper's own EtcdBackupConfigs and RestoreDrills, each a row saying where the kind is
// served, how its objects are snapshotted, whether they are Gardener extension objects and what
// they refer to (a secret, a control-plane namespace). Everything else iterates the rows. The
// namespaces and secrets the objects refer to are watched as their inputs.
//
// The queue keeps the latest event per object, so while NATS is down it holds at most one
// event per object and the final state of each flows when NATS returns. Events carry
// deterministic ids, so what a restart or relist emits again is dropped by JetStream's
// duplicate window. Under load the events go out in groups, at most one group every 100 ms
// (pacer.go): a replicated stream costs its servers per arrival more than per message.
package bridge
