package objectstore

import (
	"context"
	"errors"
	"fmt"
)

var (
	// ErrNotServerSide: a ServerSideCopier cannot copy from this source server-side, for any
	// object: another provider, another endpoint, another account it cannot reach (nor be
	// given access to), or the server refused (not implemented, access denied). Nothing was
	// written; the caller streams instead, and need not ask again for this pair of stores.
	ErrNotServerSide = errors.New("no server-side copy between these stores")
	// ErrObjectNotServerSide is ErrNotServerSide for one object only: it is above what the
	// provider copies in one request (S3's 5 GiB CopyObject), or carries a mark of the source's
	// that a copy would carry over (a GCS custom time, provider-gcp's mark for deletion).
	// Nothing was written; the caller streams this object and may copy others server-side.
	ErrObjectNotServerSide = fmt.Errorf("object not for a server-side copy: %w", ErrNotServerSide)
	// ErrObjectExists: a write that never replaces an object found one at its key; it was
	// kept as it is.
	ErrObjectExists = errors.New("object exists")
)

// ServerSideCopier is a Store that copies an object from another store of its provider
// within the service, the content never passing through the caller: S3 CopyObject, GCS
// rewrite, Azure Copy Blob, Swift's COPY. The copy function uses it where both ends are one
// provider and streams ([Store.Open] into [Store.Upload]) otherwise.
type ServerSideCopier interface {
	// CopyFrom copies the object at key in src to the same key in this store and returns
	// what Stat reports of the copy. It never replaces an object: a key that holds one is
	// ErrObjectExists (conditional where the provider allows, a Stat before otherwise), and
	// the object is kept. The copy carries the content and what the provider copies with it
	// (its content hashes), never the source's deletion mark (Locking) nor its retention: the
	// destination bucket's own immutability settings apply, as to an Upload. A src of another
	// provider or one this store cannot copy from is ErrNotServerSide, an object it cannot
	// copy (too large, marked) ErrObjectNotServerSide; a missing source object ErrObjectNotFound.
	CopyFrom(ctx context.Context, src Store, key string) (ObjectInfo, error)
}
