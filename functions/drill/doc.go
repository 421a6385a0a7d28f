// Package drill proves that a shoot's etcd backups restore: for one backup prefix it takes the
// chain etcd-backup-restore's own restore would take — the latest full snapshot and the delta
// snapshots after it — rebuilds an etcd from it in a throwaway data directory, and checks it.
//
// It reads etcd-backup-restore's layout as v0.44.1 writes it (pkg/snapstore, pkg/snapshot):
// objects <prefix>/v2/{Full,Incr}-<start>-<last>-<unix time>[.gz|.zlib|.Z][.final], and the older
// <prefix>/v1/Backup-<unix time>/... It also reads the snapshot function's layout
// (LayoutSnapshots: an EtcdBackupConfig's <namespace>/<name>/<fire time>.db), where each backup
// is a full snapshot and the newest is the chain. A full snapshot is etcd's snapshot db followed
// by its SHA-256; a delta is a JSON array of watch events followed by the SHA-256 of that JSON;
// either may be compressed as its name says. The drill restores the way etcd-backup-restore's
// restorer does: etcdutl's snapshot restore of the full snapshot, then an embedded etcd to which
// each revision of the deltas' events is applied as one transaction.
//
// The restore, etcdutl's check of the restored db and the embedded etcd run in a process of
// their own, a restorer: the binary the drill runs in, started again (any binary that links this
// package is one: its init takes over when the process is started as one). bbolt trusts the
// pages of a db; a malformed page panics it, in a goroutine no recover reaches, or faults on
// the mapped file. Such a db ends its restorer, not the drill function: the drill is
// NotRestorable (ErrCorrupt), naming the full snapshot and the first line of the panic, and the
// function's other drills go on. The drill speaks to the restorer's etcd on a loopback port,
// as a client, and ends the restorer with the drill (its context). The etcd code is v3.6's
// (this module's); it restores the snapshots of etcd v3.4, which a shoot runs by default
// (etcd-druid's etcd-wrapper), and v3.5, which it runs with etcd-druid's UpgradeEtcdVersion.
//
// A drill that passes proves: every object of the chain reads back whole and matches the
// SHA-256 written into it; the deltas follow the full snapshot and each other without a missing
// revision; where deltas overlap — two leaders' snapshotters both wrote across a leader election
// (Result.OverlappingDeltas) — their shared events agree with the store, and are applied once;
// every event applies and lands at the revision it had in the source, so the restored
// store ends at the revision of the newest snapshot (Result.Revision); etcd opens the result and
// serves all its keys. Result carries digests of the restored store to compare with the source.
//
// It does not prove: that the data is what the cluster had (a backup faithfully taken of bad data
// restores fine; Options.Live checks that, below); that snapshots older
// than the latest full one, or in another prefix, restore; that the shoot's etcd version opens
// the result (the drill restores into the etcd server this module links, v3.6, whatever version
// wrote the snapshot); that etcd-backup-restore's own restore (its version, its flags, its object store
// client) succeeds where the replay does — the replay follows its code, it does not run it; leases:
// as etcd-backup-restore's restorer, it applies the deltas' puts without their leases, and keeps
// the full snapshot's leases alive while it runs, so that none expires into a revision the source
// never had.
//
// Given Options.Etcdbrctl, the drill runs etcd-backup-restore's own restore too (`etcdbrctl
// restore`, in a process of its own, from the same bucket with the same credentials: EtcdbrStore)
// into a second data directory, and compares its store with the replay's at the replay's
// revision: key count, the digest of every key and value, HashKV (Result.RealRestore). Agreeing,
// it proves that the tool that restores the shoot on the day restores these backups to the same
// store; differing (ErrRealRestoreDiffers, naming up to 10 keys, never values) or failing
// (ErrRealRestoreFailed, with its exit code and last error messages) the backups are not
// restorable by it — as when its embedded etcd revokes a lease that expired during the restore and
// skips a write (etcd-backup-restore#1045), which the replay, keeping leases alive, does not, or
// when deltas overlap, which v0.44.1's restore fails on (etcd-backup-restore#1043): the reason
// then names the overlap first.
// Without it, Result.RealRestore says it was not run (RealRestoreNotRun); for the snapshot
// function's backups, which etcd-backup-restore does not read and etcdutl's snapshot restore
// restores as the replay does, that it does not apply (RealRestoreNotApplicable).
//
// Given Options.Live, the running etcd the backups are of, the drill compares the restored store
// with it at the restored revision (Result.Live), only reading it: its HashKV at that revision
// against the restored store's, after compacting the restored copy (a scratch copy) to the live
// etcd's compact revision, since HashKV covers every revision from the compaction on. Where the
// hashes cannot decide — the live etcd keeps more history than the copy, or they differ, as
// they do when the deltas' puts on leases restore without them — it reads every key at that
// revision on both sides, a page of 1,000 at a time, and compares keys, values and mod
// revisions. Equal, the live etcd Matches: the backups restore to what the cluster held at that
// revision (by HashKV, with the history since the live compaction; key by key, the state at
// that revision). The result is Exact only where the restore that runs on the day restored the
// same store too: etcd-backup-restore's, run and agreeing, or for the snapshot function's
// backups etcdutl's snapshot restore, which the replay runs; a match without
// etcd-backup-restore's restore is Restorable, the reason saying why it was not run (Report).
// Different, ErrLiveDiffers names the revision and up to 10 keys, never values: NotRestorable.
// A live etcd compacted past the restored revision (the backups are older than its compaction
// retention) leaves nothing to compare: Compacted, and the result Unverified, not a pass.
// Unreachable or not configured, Result.Live says so and the result stays Restorable. Result.Live
// also measures the recovery point: the live revision less the restored one, and the seconds
// from the newest restorable point to the comparison. An EtcdBackupConfig's live etcd is its
// spec.etcd (ConfigTarget); a BackupEntry's is its shoot's etcd-main on the seed (ShootEtcd),
// where the drill function is given --live-shoot-etcd; given --pod-namespace too, it applies,
// before it connects, a NetworkPolicy in the shoot's namespace admitting its own pods to the
// etcd's pods on the client port (ShootEtcdFrom), which a seed's policies do not admit it to.
//
// The same drill reads the copy a BackupCopyPolicy keeps of a BackupEntry's backups (CopyTarget:
// its BackupDestination, at the same keys); WithCopy joins a drill of the copy to the drill of
// the bucket: the same revision must restore the same keys and values, an older one is a lag.
//
// A RestoreDrill (backup.housekeeper.dev) runs drills on a schedule. Its pure side: Select,
// Selection.Selects and SelectsConfig decide which BackupEntries and EtcdBackupConfigs a run
// drills, MemoryShare what each of its concurrent drills may use, Report makes one drill's answer
// an entry's result and Record writes a run's results and counts into the status. The drill
// function (Definition, Driller) runs each fire of its schedule with them and writes the results
// into the status, which the bridge exports as metrics; its own (Metrics) time the drills. Its
// MemoryGate holds the runs to the container's memory.
//
// A Keeper keeps what a drill proved, for a self-hosted shoot's `gardenadm restore
// --backup-data-path`: the drill reads its source through Keeper.Source, which copies each
// object, as stored, into the keep directory as it is read, and Keeper.Keep moves the chain of
// a drill that passed (Exact or Restorable) to <dir>/<bucket>/<key>, the layout
// etcd-backup-restore's Local provider reads with <dir> as its root, its result beside it; of a
// drill that did not pass it keeps nothing.
//
// The drill never writes to the source, nor to the live etcd. It streams every object through a temporary file in a
// work directory it removes when it returns, and holds at most one revision's events in memory.
// The rest of its memory is the throwaway etcd's, in its restorer, whose Go soft memory limit is
// Options.MemoryShare: its index of every key (it grows with the keys, not with their values)
// and about 3,500 applied revisions' transactions of its raft log; bbolt maps the restored db
// whole, page cache the kernel takes back under pressure.
// test/etcdbr's BenchmarkDrillRestore measures it beside etcdbrctl restore.
package drill
