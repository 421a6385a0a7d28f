package etcdbackup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"hash"
)

// snapshotHash checks a snapshot as it streams past. etcd's Maintenance.Snapshot sends the
// database followed by the SHA-256 of the database (32 bytes), which `etcdutl snapshot
// restore` checks again. snapshotHash hashes everything but the last 32 bytes seen so far,
// so at the end it can compare, and hashes the whole object for the status.
type snapshotHash struct {
	db, object hash.Hash
	tail       [sha256.Size]byte
	tailLen    int
}

func newSnapshotHash() *snapshotHash {
	return &snapshotHash{db: sha256.New(), object: sha256.New()}
}

func (h *snapshotHash) Write(p []byte) (int, error) {
	h.object.Write(p)
	if len(p) >= sha256.Size {
		h.db.Write(h.tail[:h.tailLen])
		h.db.Write(p[:len(p)-sha256.Size])
		h.tailLen = copy(h.tail[:], p[len(p)-sha256.Size:])
		return len(p), nil
	}
	b := append(append(make([]byte, 0, 2*sha256.Size), h.tail[:h.tailLen]...), p...)
	if over := len(b) - sha256.Size; over > 0 {
		h.db.Write(b[:over])
		b = b[over:]
	}
	h.tailLen = copy(h.tail[:], b)
	return len(p), nil
}

// intact reports whether the stream ended with the SHA-256 of what came before it.
func (h *snapshotHash) intact() bool {
	return h.tailLen == sha256.Size && bytes.Equal(h.db.Sum(nil), h.tail[:])
}

// objectSHA256 is the hex SHA-256 of the whole stream, as stored.
func (h *snapshotHash) objectSHA256() string { return hex.EncodeToString(h.object.Sum(nil)) }
