package drill

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// event is one element of a delta's JSON array. etcd-backup-restore's snapshotter marshals
// {"etcdEvent": clientv3.Event, "time": …} with encoding/json, and clientv3.Event is
// mvccpb.Event with its JSON tags: "type" 0 (PUT, then omitted) or 1 (DELETE), "kv" with
// base64 "key" and "value" and "mod_revision", the revision the event happened at.
type event struct {
	EtcdEvent *struct {
		Type int32 `json:"type"`
		Kv   *struct {
			Key         []byte `json:"key"`
			Value       []byte `json:"value"`
			ModRevision int64  `json:"mod_revision"`
		} `json:"kv"`
	} `json:"etcdEvent"`
}

const (
	eventPut    = 0
	eventDelete = 1
)

// applier applies deltas to the throwaway etcd as etcd-backup-restore's restorer does
// (applyEventsToEtcd): the events of one source revision as one transaction, so the store's
// revision advances by one per source revision and keys keep the source's mod revisions. Unlike
// the restorer it checks every transaction lands at its source revision, not only the store's
// revision after each delta, so a mismatch names the revision; and a delta's events at revisions
// the store holds already (from the full snapshot's db, or from a delta another leader wrote
// over the same revisions) are checked against the store and skipped, not applied again.
type applier struct {
	client *clientv3.Client
	// base is the revision of the restored full snapshot's db: events up to it are in the db
	// already (the restorer skips them in the first delta).
	base int64
	// rev is the store's revision.
	rev      int64
	maxBytes int64
	// applied and skipped count events.
	applied, skipped int64
}

// holds says where the store got revision r from, for a message.
func (a *applier) holds(r int64) string {
	if r <= a.base {
		return fmt.Sprintf("the full snapshot's db at %d", a.base)
	}
	return fmt.Sprintf("the deltas before it, applied up to %d", a.rev)
}

func (a *applier) apply(ctx context.Context, d Snapshot, f fetched) error {
	file, err := os.Open(f.path)
	if err != nil {
		return d.fail(ErrDrill, err, "opening its work file")
	}
	defer file.Close()
	dec := json.NewDecoder(bufio.NewReader(io.LimitReader(file, f.size-sha256.Size)))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return d.fail(ErrCorrupt, err, "its events are not a JSON array (starts with %v)", tok)
	}
	var (
		group      []clientv3.Op
		groupRev   int64 // the source revision of group
		groupBytes int64
		seen       int64 // the last event's revision
		n          int   // events read
		from       = a.rev
	)
	commit := func() error {
		if len(group) == 0 {
			return nil
		}
		resp, err := a.client.Txn(ctx).Then(group...).Commit()
		if err != nil {
			if errors.Is(err, rpctypes.ErrDuplicateKey) {
				return d.fail(ErrCorrupt, err, "revision %d changes a key twice", groupRev)
			}
			return d.fail(ErrDrill, err, "applying the %d events of revision %d", len(group), groupRev)
		}
		switch got := resp.Header.Revision; {
		case got == a.rev:
			return d.fail(ErrRevisionMismatch, nil, "the %d events of revision %d changed nothing in the restored store at %d: they delete keys it does not hold", len(group), groupRev, a.rev)
		case got != groupRev:
			return d.fail(ErrRevisionMismatch, nil, "the events of revision %d landed at revision %d", groupRev, got)
		}
		a.rev = groupRev
		a.applied += int64(len(group))
		group, groupBytes = group[:0], 0
		return nil
	}
	for dec.More() {
		var ev event
		if err := dec.Decode(&ev); err != nil {
			return d.fail(ErrCorrupt, err, "event %d", n+1)
		}
		n++
		if ev.EtcdEvent == nil || ev.EtcdEvent.Kv == nil || len(ev.EtcdEvent.Kv.Key) == 0 || ev.EtcdEvent.Kv.ModRevision <= 0 {
			return d.fail(ErrCorrupt, nil, "event %d has no key or revision", n)
		}
		kv := ev.EtcdEvent.Kv
		r := kv.ModRevision
		if r < seen {
			return d.fail(ErrCorrupt, nil, "event %d is at revision %d, after one at %d", n, r, seen)
		}
		seen = r
		if r < d.StartRevision {
			return d.fail(ErrRevisionMismatch, nil, "event %d is at revision %d, before %d its name starts at", n, r, d.StartRevision)
		}
		if r <= from {
			if err := a.held(ctx, d, n, ev.EtcdEvent.Type, r, kv.Key, kv.Value); err != nil {
				return err
			}
			a.skipped++
			continue
		}
		if r != groupRev {
			if err := commit(); err != nil {
				return err
			}
			switch {
			case r <= a.rev:
				return d.fail(ErrRevisionMismatch, nil, "event %d is at revision %d, which the restored store holds already (it is at %d)", n, r, a.rev)
			case r > a.rev+1:
				return d.fail(ErrRevisionGap, nil, "event %d is at revision %d, the restored store at %d: revisions %d..%d are missing", n, r, a.rev, a.rev+1, r-1)
			}
			groupRev = r
		}
		switch ev.EtcdEvent.Type {
		case eventPut:
			// Without the lease, as the restorer does: the source's leases are not in deltas.
			group = append(group, clientv3.OpPut(string(kv.Key), string(kv.Value)))
		case eventDelete:
			group = append(group, clientv3.OpDelete(string(kv.Key)))
		default:
			return d.fail(ErrCorrupt, nil, "event %d has type %d, neither put (0) nor delete (1)", n, ev.EtcdEvent.Type)
		}
		groupBytes += int64(len(kv.Key) + len(kv.Value))
		if len(group) > maxTxnOps || groupBytes > a.maxBytes {
			return d.fail(ErrTooLarge, nil, "revision %d has more than %d events or %d bytes of keys and values, more than a restore applies in one transaction", r, maxTxnOps, a.maxBytes)
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return d.fail(ErrCorrupt, err, "its events' JSON array does not end after event %d", n)
	}
	if _, err := dec.Token(); err != io.EOF {
		return d.fail(ErrCorrupt, err, "data follows its events' JSON array")
	}
	if err := commit(); err != nil {
		return err
	}
	switch want := max(from, d.LastRevision); {
	case a.rev < want:
		return d.fail(ErrRevisionGap, nil, "its events end at revision %d, its name says %d: revisions %d..%d are missing", a.rev, d.LastRevision, a.rev+1, want)
	case a.rev > want:
		return d.fail(ErrRevisionMismatch, nil, "its events go on to revision %d, past %d its name says", a.rev, d.LastRevision)
	}
	return nil
}

// held checks that the store holds an event of a delta at a revision it has already: the key
// as the event left it, at the event's revision.
func (a *applier) held(ctx context.Context, d Snapshot, n int, typ int32, r int64, key, value []byte) error {
	resp, err := a.client.Get(ctx, string(key), clientv3.WithRev(r))
	if errors.Is(err, rpctypes.ErrCompacted) {
		return nil // the source compacted past it before the full snapshot: nothing to compare
	}
	if err != nil {
		return d.fail(ErrDrill, err, "reading key %q at revision %d", key, r)
	}
	switch {
	case typ == eventDelete && len(resp.Kvs) == 0:
		return nil
	case typ == eventPut && len(resp.Kvs) == 1 && resp.Kvs[0].ModRevision == r && bytes.Equal(resp.Kvs[0].Value, value):
		return nil
	}
	op, has := "puts", "no such key"
	if typ == eventDelete {
		op = "deletes"
	}
	switch {
	case len(resp.Kvs) == 0:
	case resp.Kvs[0].ModRevision != r:
		has = fmt.Sprintf("the key as changed at revision %d", resp.Kvs[0].ModRevision)
	default:
		has = "another value"
	}
	return d.fail(ErrRevisionMismatch, nil, "event %d at revision %d %s key %q, within %s, which has %s there", n, r, op, key, a.holds(r), has)
}
