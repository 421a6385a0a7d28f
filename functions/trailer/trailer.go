// Package trailer checks streams that end with the SHA-256 of what comes before them, as etcd's
// snapshots (Maintenance.Snapshot, read back by etcdutl) and etcd-backup-restore's delta
// snapshots do, as they stream past, without holding them.
package trailer

import (
	"bytes"
	"crypto/sha256"
	"hash"
)

// SHA256 hashes everything written to it but the last 32 bytes, which it keeps: at the end of a
// stream, Sum is the SHA-256 of the content and Trailer the 32 bytes after it.
type SHA256 struct {
	content hash.Hash
	tail    [sha256.Size]byte
	tailLen int
}

// New returns an empty SHA256.
func New() *SHA256 { return &SHA256{content: sha256.New()} }

func (t *SHA256) Write(p []byte) (int, error) {
	if len(p) >= sha256.Size {
		t.content.Write(t.tail[:t.tailLen])
		t.content.Write(p[:len(p)-sha256.Size])
		t.tailLen = copy(t.tail[:], p[len(p)-sha256.Size:])
		return len(p), nil
	}
	b := append(append(make([]byte, 0, 2*sha256.Size), t.tail[:t.tailLen]...), p...)
	if over := len(b) - sha256.Size; over > 0 {
		t.content.Write(b[:over])
		b = b[over:]
	}
	t.tailLen = copy(t.tail[:], b)
	return len(p), nil
}

// Sum is the SHA-256 of all but the last 32 bytes written so far.
func (t *SHA256) Sum() []byte { return t.content.Sum(nil) }

// Trailer is the last 32 bytes written so far (all of them, if fewer were written).
func (t *SHA256) Trailer() []byte { return t.tail[:t.tailLen] }

// Intact says whether the stream so far ends with the SHA-256 of what came before it.
func (t *SHA256) Intact() bool {
	return t.tailLen == sha256.Size && bytes.Equal(t.Sum(), t.Trailer())
}
