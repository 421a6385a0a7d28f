package drill

import (
	"crypto/sha256"
	"encoding/binary"
	"os"
	"testing"
)

// breakBbolt damages the full snapshot at path, etcd's db followed by its SHA-256, as a disk or
// a writer with a bug could: the page the root bucket starts at gets the type of a freelist
// page. The meta pages stay whole (their checksums hold), and the SHA-256 is written anew over
// the damaged db, so the object's integrity checks pass and only bbolt, reading its pages,
// finds it: opening it to write, as a restore does, bbolt walks every page to rebuild the
// freelist etcd does not keep, in a goroutine of its own, and panics there.
func breakBbolt(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	db := data[:len(data)-sha256.Size]
	// bbolt's page header: id (8 bytes), flags (2), count (2), overflow (4). Its meta, after
	// the header of page 0: magic (4), version (4), page size (4), flags (4), then the root
	// bucket (its root page id, 8, and sequence, 8).
	const header, magic = 16, 0xED0CDAED
	if m := binary.LittleEndian.Uint32(db[header:]); m != magic {
		t.Fatalf("%s: no bbolt meta page (magic %#x)", path, m)
	}
	pageSize := int(binary.LittleEndian.Uint32(db[header+8:]))
	root := int(binary.LittleEndian.Uint64(db[header+16:]))
	flags := db[root*pageSize+8:]
	const branch, leaf, freelist = 0x01, 0x02, 0x10
	if f := binary.LittleEndian.Uint16(flags); f != branch && f != leaf {
		t.Fatalf("%s: the root bucket's page %d has flags %#x, neither branch nor leaf", path, root, f)
	}
	binary.LittleEndian.PutUint16(flags, freelist)
	sum := sha256.Sum256(db)
	writeFile(t, path, append(db, sum[:]...))
}
