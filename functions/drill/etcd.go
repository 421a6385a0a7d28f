package drill

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

const (
	memberName = "drill"
	// Port 0: the kernel picks free loopback ports (the embedded etcd reports the client's).
	// Nothing dials the peer URL; the restored membership and the server just have to agree.
	loopback = "http://127.0.0.1:0"

	// etcd-backup-restore's restore limits (pkg/types/restorer.go): a revision with more
	// operations than a transaction may hold does not restore there either.
	maxTxnOps = 10 * 1024
	// Headroom over Options.MaxRevisionBytes for the transaction's own encoding.
	requestOverhead = 1 << 20

	// etcd keeps the raft entries it applied in memory up to its next raft snapshot, and
	// catch-up entries for slow followers after it: at its defaults (10,000 and 5,000) up to
	// 15,000 revisions' transactions, most of the drill's heap after 100 deltas of 110 writes
	// (BenchmarkDrillRestore: 264 MiB anonymous at 1 GiB, 146 with the full snapshot alone). A
	// throwaway member has no follower. Snapshots more often cost time (every 1,000: 6 s more
	// for 11,000 revisions); every 3,000 took as long as the defaults.
	snapshotCount          = 3000
	snapshotCatchUpEntries = 500
)

// restoreDB turns the full snapshot's db file into a data directory for a one-member cluster,
// as etcd-backup-restore's restorer does with etcdutl.
func restoreDB(lg *zap.Logger, dbPath, dataDir string) error {
	return snapshot.NewV3(lg).Restore(snapshot.RestoreConfig{
		SnapshotPath:        dbPath,
		Name:                memberName,
		OutputDataDir:       dataDir,
		PeerURLs:            []string{loopback},
		InitialCluster:      memberName + "=" + loopback,
		InitialClusterToken: "etcd-drill",
		// fetch has checked the same SHA-256 while streaming; etcdutl still cuts it off.
		SkipHashCheck: true,
	})
}

// throwaway is a restorer's embedded etcd serving the restored data directory, and a client
// of it.
type throwaway struct {
	proc     *restorer
	client   *clientv3.Client
	endpoint string
	cancel   context.CancelFunc
	leases   int
}

// startEmbedded starts an embedded etcd on dataDir, as etcd-backup-restore's StartEmbeddedEtcd
// does (no fsync: the data is thrown away), allowing requests of maxRequest bytes. It runs in a
// restorer.
func startEmbedded(ctx context.Context, lg *zap.Logger, dataDir string, quota int64, maxRequest uint) (*embed.Etcd, error) {
	u, _ := url.Parse(loopback)
	cfg := embed.NewConfig()
	cfg.Name = memberName
	cfg.Dir = dataDir
	cfg.WalDir = filepath.Join(dataDir, "member", "wal")
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*u}, []url.URL{*u}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*u}, []url.URL{*u}
	cfg.InitialCluster = memberName + "=" + loopback
	cfg.QuotaBackendBytes = quota
	cfg.MaxTxnOps = maxTxnOps
	cfg.MaxRequestBytes = maxRequest
	cfg.UnsafeNoFsync = true
	cfg.SnapshotCount, cfg.SnapshotCatchUpEntries = snapshotCount, snapshotCatchUpEntries
	cfg.AutoCompactionRetention = "0" // compaction would drop the history the hash covers
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd failed before it was ready: %w", err)
	case <-time.After(time.Minute):
		e.Close()
		return nil, fmt.Errorf("etcd not ready within a minute")
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	// The source's auth, if on, came with the snapshot; etcd-backup-restore turns it off too.
	if e.Server.AuthStore().IsAuthEnabled() {
		e.Server.AuthStore().AuthDisable()
	}
	return e, nil
}

// keepLeasesAlive keeps every lease the full snapshot brought alive until close. A restored
// lease runs for its TTL from when etcd starts; one that expired mid-drill would delete its keys
// at a revision the source never had, and the deltas would no longer land on their revisions
// (kube-apiserver's master leases live 15 s; a download takes longer).
func (t *throwaway) keepLeasesAlive(ctx context.Context) error {
	resp, err := t.client.Leases(ctx)
	if err != nil {
		return err
	}
	// Until close, not until ctx: the keepalives run while later steps use their own contexts.
	keep, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	for _, l := range resp.Leases {
		ch, err := t.client.KeepAlive(keep, l.ID)
		if err != nil {
			return fmt.Errorf("keeping lease %x alive: %w", l.ID, err)
		}
		go func() {
			for range ch { // the client needs the answers read; it sends every TTL/3
			}
		}()
	}
	t.leases = len(resp.Leases)
	return nil
}

// close stops the keepalives and the client, then the restorer.
func (t *throwaway) close() {
	t.cancel()
	_ = t.client.Close()
	_ = t.proc.close()
}
