package etcdbackup

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"testing"
)

func TestExpiredTouchesOnlyThisConfigsBackups(t *testing.T) {
	prefix := "team/main/"
	keys := []string{
		prefix + "20261123T100000Z.db", prefix + "20261123T100500Z.db", prefix + "20261123T101000Z.db",
		prefix + "20261123T101500Z.db",
		prefix + "notes.txt", prefix + ".20261123T102000Z.db.upload-0123", prefix + "20261123T100000Z.db.partial",
		prefix + "sub/20261123T090000Z.db", "team/main-2/20261123T080000Z.db", "team/20261123T080000Z.db",
		prefix + "20261123T100000Z.db", // listed twice (a page boundary)
	}
	remove, kept, err := expired(prefix, keys, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{prefix + "20261123T100000Z.db", prefix + "20261123T100500Z.db"}; !slices.Equal(remove, want) {
		t.Fatalf("remove %q, want %q", remove, want)
	}
	if len(kept) != 2 || kept[0].Key != prefix+"20261123T101500Z.db" || kept[1].Key != prefix+"20261123T101000Z.db" {
		t.Fatalf("kept %+v", kept)
	}
	if _, _, err := expired(prefix, keys, 0); err == nil {
		t.Fatal("keep 0 accepted")
	}
}

// The trailer check holds however the stream is cut into writes.
func TestSnapshotHashFindsEtcdsTrailer(t *testing.T) {
	db := bytes.Repeat([]byte("etcd database page "), 1000)
	sum := sha256.Sum256(db)
	stream := append(slices.Clone(db), sum[:]...)
	for _, chunk := range []int{1, 7, 31, 32, 33, 4096, len(stream)} {
		h := newSnapshotHash()
		for rest := stream; len(rest) > 0; {
			n := min(chunk, len(rest))
			_, _ = h.Write(rest[:n])
			rest = rest[n:]
		}
		if !h.intact() {
			t.Errorf("chunks of %d: a whole snapshot reported broken", chunk)
		}
		whole := sha256.Sum256(stream)
		if h.objectSHA256() != string(hexOf(whole[:])) {
			t.Errorf("chunks of %d: object hash differs", chunk)
		}
	}
	h := newSnapshotHash()
	_, _ = h.Write(stream[:len(stream)-1])
	if h.intact() {
		t.Error("a truncated snapshot reported whole")
	}
}

func hexOf(b []byte) []byte {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return out
}
