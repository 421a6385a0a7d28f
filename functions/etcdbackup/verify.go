package etcdbackup

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"

	"github.com/housekeeper-dev/housekeeper/functions/trailer"
)

// snapshotHash checks a snapshot as it streams past. etcd's Maintenance.Snapshot sends the
// database followed by the SHA-256 of the database (32 bytes), which `etcdutl snapshot
// restore` checks again (trailer.SHA256), and it hashes the whole object for the status.
type snapshotHash struct {
	db     *trailer.SHA256
	object hash.Hash
}

func newSnapshotHash() *snapshotHash {
	return &snapshotHash{db: trailer.New(), object: sha256.New()}
}

func (h *snapshotHash) Write(p []byte) (int, error) {
	h.object.Write(p)
	return h.db.Write(p)
}

// intact reports whether the stream ended with the SHA-256 of what came before it.
func (h *snapshotHash) intact() bool { return h.db.Intact() }

// objectSHA256 is the hex SHA-256 of the whole stream, as stored.
func (h *snapshotHash) objectSHA256() string { return hex.EncodeToString(h.object.Sum(nil)) }
