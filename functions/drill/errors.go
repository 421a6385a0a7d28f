package drill

import (
	"errors"
	"fmt"
)

// The backup itself is at fault with these: the drill found it would not restore, or would
// not restore to what its names promise.
var (
	// ErrNoFullSnapshot: the prefix holds no full snapshot to restore from.
	ErrNoFullSnapshot = errors.New("no full snapshot")
	// ErrChecksumMismatch: an object's content does not match the SHA-256 etcd-backup-restore
	// appended to it (or the CRC of its compression).
	ErrChecksumMismatch = errors.New("checksum mismatch")
	// ErrTruncated: an object ends early (a cut compressed stream, a full snapshot that is not
	// whole pages plus its SHA-256, a delta too short to hold its SHA-256).
	ErrTruncated = errors.New("truncated")
	// ErrCorrupt: an object cannot be decoded (a damaged compressed stream, events that are not
	// etcd-backup-restore's JSON, a snapshot db etcd cannot restore).
	ErrCorrupt = errors.New("corrupt")
	// ErrUnsupported: an object's name asks for what etcd-backup-restore cannot read either
	// (an unknown compression suffix).
	ErrUnsupported = errors.New("unsupported")
	// ErrRevisionGap: revisions are missing between snapshots or within one.
	ErrRevisionGap = errors.New("revision gap")
	// ErrRevisionMismatch: revisions disagree: deltas overlap, events do not end where a name
	// says, or events do not land at their revision in the restored store.
	ErrRevisionMismatch = errors.New("revision mismatch")
	// ErrTooLarge: one revision's events exceed what a restore applies in one transaction
	// (Options.MaxRevisionBytes, etcd-backup-restore's 10,240 operations).
	ErrTooLarge = errors.New("revision too large")
	// ErrRealRestoreFailed: etcd-backup-restore's own restore (Options.Etcdbrctl) fails on
	// backups the drill's replay restored: it exits non-zero, or its db does not open.
	ErrRealRestoreFailed = errors.New("the real restore fails")
	// ErrRealRestoreDiffers: etcd-backup-restore's own restore succeeds, but its store holds
	// other keys or values at the replay's revision, or does not reach it.
	ErrRealRestoreDiffers = errors.New("the real restore differs")
	// ErrLiveDiffers: the live etcd (Options.Live) holds other keys, values or mod revisions at
	// the restored revision than the backups restore to, or has not reached that revision.
	ErrLiveDiffers = errors.New("the live etcd differs")
)

// ErrNotCopied: a drill of the copy names a BackupCopyPolicy that does not exist or does not
// copy the entry: there is no copy to judge.
var ErrNotCopied = errors.New("no copy of the entry")

// ErrCheck: Options.Check failed on the restored store.
var ErrCheck = errors.New("check failed")

// These say the drill could not do its work; they say nothing about the backup.
var (
	// ErrSource: listing or reading the source failed.
	ErrSource = errors.New("reading the source")
	// ErrDrill: the drill's own machinery failed: its work directory or its throwaway etcd.
	ErrDrill = errors.New("drill failed")
	// ErrMemoryShare: the store's keys need more memory than the drill may use
	// (Options.MemoryShare).
	ErrMemoryShare = errors.New("memory share too small")
)

// Error is a drill failure: the sentinel it is (errors.Is), the object it is about and what is
// wrong, in words an operator can act on:
//
//	delta shoot/etcd-main/v2/Incr-00000201-00000300-1700000000.gz: revision gap: revisions 201..300 do not follow 150, ...
type Error struct {
	// Err is one of the package's sentinels.
	Err error
	// Kind is "full snapshot", "delta" or "" when the problem is not about one object.
	Kind string
	// Key is the object's key in the source, "" when the problem is not about one object.
	Key string
	// Detail says what is wrong.
	Detail string
	// Cause is the underlying error, if any (a decompressor's, the source's, etcd's).
	Cause error
}

func (e *Error) Error() string {
	msg := e.Err.Error()
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	if e.Key == "" {
		return msg
	}
	return fmt.Sprintf("%s %s: %s", e.Kind, e.Key, msg)
}

// Unwrap gives errors.Is and errors.As both the sentinel and the cause.
func (e *Error) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

func (s Snapshot) fail(sentinel error, cause error, format string, args ...any) *Error {
	return &Error{Err: sentinel, Kind: s.kindName(), Key: s.Key, Detail: fmt.Sprintf(format, args...), Cause: cause}
}

// AboutTheBackup says whether the backup itself is at fault, it does not restore, rather than
// the drill being unable to do its work (ErrSource, ErrDrill, ErrMemoryShare) or a caller's
// check failing (ErrCheck).
func (e *Error) AboutTheBackup() bool {
	for _, notAbout := range []error{ErrSource, ErrDrill, ErrMemoryShare, ErrCheck} {
		if errors.Is(e.Err, notAbout) {
			return false
		}
	}
	return true
}
