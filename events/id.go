package events

import (
	"crypto/sha256"
	"encoding/hex"
)

// ID is the deterministic event id: a hash of the cluster, the object's uid and
// resourceVersion, and the operation. The same change seen twice (a bridge restart, a relist)
// gets the same id; it is published as Nats-Msg-Id so JetStream drops the duplicate.
func ID(cluster, uid, resourceVersion, operation string) string {
	h := sha256.New()
	for _, part := range []string{cluster, uid, resourceVersion, operation} {
		h.Write([]byte(part))
		h.Write([]byte{0}) // separator: ("a","bc") and ("ab","c") differ
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
