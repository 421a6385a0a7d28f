package etcdbr_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/drill"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/replica"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// A backup the pinned etcdbrctl wrote of a real etcd that keeps running, copied by
// replica.Copy (the copy function's) from its local store to an S3 server (versitygw), and
// drilled in both stores as a RestoreDrill with source Both drills them, etcdbrctl restoring
// each from its own store: the copy is Exact at the first store's revision, keys and hashes;
// with a byte of a delta flipped in the copy, NotRestorable naming the copy and the delta; with
// its newest delta removed, it restores an older revision: a lag behind the first store, a
// pass.
func TestDrillTheCopy(t *testing.T) {
	ctx := context.Background()
	put := func(c *clientv3.Client, key, value string) int64 {
		resp, err := c.Put(ctx, key, value)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	b := backUpForRealRestore(t,
		func(c *clientv3.Client) int64 {
			var rev int64
			for i := range 20 {
				rev = put(c, fmt.Sprintf("/registry/configmaps/default/cm-%02d", i), fmt.Sprintf("value %d", i))
			}
			return rev
		},
		func(c *clientv3.Client) int64 {
			return put(c, "/registry/configmaps/default/cm-03", "updated after the full snapshot")
		},
		func(c *clientv3.Client) int64 {
			return put(c, "/registry/secrets/default/written-last", "the newest write")
		})
	if len(b.deltas) < 2 {
		t.Fatalf("deltas %v, want 2 at least", b.deltas)
	}
	env := testenv.Start(t, testenv.WithS3())
	credentials := map[string][]byte{
		s3.KeyAccessKeyID: []byte(stack.S3AccessKey), s3.KeySecretAccessKey: []byte(stack.S3SecretKey),
		s3.KeyRegion: []byte(stack.S3Region), s3.KeyEndpoint: []byte(env.S3.Endpoint), s3.KeyS3ForcePathStyle: []byte("true"),
	}
	entryPrefix := strings.TrimSuffix(b.store.Prefix, "etcd-main") // <entry>/, as the copy function copies it
	live := drill.LiveEndpoints([]string{b.live.ClientURL}, nil)
	e := pinnedEtcdbrctl(t)
	const source = "copy/second"

	// copyTo copies the backups into a new S3 bucket, as the copy function copies an entry.
	copyTo := func(t *testing.T, bucket string) objectstore.Store {
		t.Helper()
		dst, err := s3.New().Open(bucket, credentials)
		if err != nil {
			t.Fatal(err)
		}
		if err := dst.Create(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := replica.Copy(ctx, b.bucket, dst, entryPrefix); err != nil {
			t.Fatalf("copying %s: %v", entryPrefix, err)
		}
		return dst
	}
	// drillCopy drills the copy in bucket, etcdbrctl reading it from there with the S3
	// credentials, and reports it as a result of the copy.
	drillCopy := func(t *testing.T, dst objectstore.Store, bucket string) (drill.Result, backupv1alpha1.EntryDrillResult, error) {
		t.Helper()
		es, err := drill.NewEtcdbrStore(objectstore.Where{Type: s3.Type, Region: stack.S3Region, Bucket: bucket}, credentials,
			b.store.Prefix+"/", objectstore.NewRegistry(s3.New()))
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.drillWith(t, dst, drill.Options{Live: live, Etcdbrctl: e, EtcdbrStore: es})
		report := drill.Report("shoot--drill--real", time.Now(), res, err)
		report.Source = source
		return res, report, err
	}

	first, err := b.drillWith(t, b.bucket, b.etcdbrOptions(t, e, b.store.Home, drill.Options{Live: live}))
	if err != nil {
		t.Fatalf("the drill of the first store: %v", err)
	}
	bucketReport := drill.Report("shoot--drill--real", time.Now(), first, err)
	if bucketReport.Outcome != backupv1alpha1.OutcomeExact {
		t.Fatalf("the first store: %s (%s), want Exact", bucketReport.Outcome, bucketReport.Reason)
	}

	t.Run("the copy: Exact at the first store's revision and hashes", func(t *testing.T) {
		res, report, err := drillCopy(t, copyTo(t, "copy-whole"), "copy-whole")
		if err != nil {
			t.Fatalf("the drill of the copy: %v", err)
		}
		if res.Revision != first.Revision || res.Keys != first.Keys || res.KVSHA256 != first.KVSHA256 || res.HashKV != first.HashKV {
			t.Errorf("the copy restores revision %d, %d keys, %s, HashKV %d; the first store %d, %d keys, %s, HashKV %d",
				res.Revision, res.Keys, res.KVSHA256, res.HashKV, first.Revision, first.Keys, first.KVSHA256, first.HashKV)
		}
		if rr := res.RealRestore; rr == nil || rr.Outcome != drill.RealRestoreAgrees {
			t.Errorf("etcdbrctl's restore from the copy: %+v, want Agrees", rr)
		}
		r := drill.WithCopy(bucketReport, report)
		if r.Outcome != backupv1alpha1.OutcomeExact || r.Copy.Outcome != backupv1alpha1.OutcomeExact || r.Copy.RestoredRevision != first.Revision ||
			r.Copy.Hash != first.KVSHA256 || r.Copy.BehindRevisions != 0 || r.Copy.Reason != "" {
			t.Errorf("result %s (%s), copy %+v; want Exact both, at revision %d", r.Outcome, r.Reason, r.Copy, first.Revision)
		}
	})

	t.Run("a byte flipped in a delta of the copy: NotRestorable, naming the copy", func(t *testing.T) {
		dst := copyTo(t, "copy-flipped")
		delta := b.deltas[0]
		flipByte(t, dst, delta)
		_, report, err := drillCopy(t, dst, "copy-flipped")
		var derr *drill.Error
		if !errors.As(err, &derr) || !derr.AboutTheBackup() || derr.Key != delta {
			t.Fatalf("the drill of the copy: %v, want the backup at fault in %s", err, delta)
		}
		r := drill.WithCopy(bucketReport, report)
		if r.Outcome != backupv1alpha1.OutcomeNotRestorable || !strings.HasPrefix(r.Reason, source+": ") || r.Object != delta ||
			r.Copy.Outcome != backupv1alpha1.OutcomeNotRestorable {
			t.Errorf("result %s, %q, object %q, copy %+v; want NotRestorable naming %s and %s", r.Outcome, r.Reason, r.Object, r.Copy, source, delta)
		}
		t.Log(r.Reason)
	})

	t.Run("the newest delta removed from the copy: a lag", func(t *testing.T) {
		dst := copyTo(t, "copy-lagging")
		newest := b.deltas[len(b.deltas)-1]
		if failed, err := dst.DeleteKeys(ctx, []string{newest}); err != nil || len(failed) > 0 {
			t.Fatalf("removing %s: %v %v", newest, failed, err)
		}
		res, report, err := drillCopy(t, dst, "copy-lagging")
		if err != nil {
			t.Fatalf("the drill of the copy: %v", err)
		}
		want, _ := stack.ParseSnapshot(b.deltas[len(b.deltas)-2])
		if res.Revision != want.LastRevision || res.Revision >= first.Revision {
			t.Fatalf("the copy restores revision %d, want %d, older than the first store's %d", res.Revision, want.LastRevision, first.Revision)
		}
		r := drill.WithCopy(bucketReport, report)
		if !backupv1alpha1.Passed(r.Outcome) || r.Copy.BehindRevisions != first.Revision-res.Revision || !strings.Contains(r.Copy.Reason, "a lag") {
			t.Errorf("result %s (%s), copy %+v; want a pass, the copy %d revisions behind, a lag", r.Outcome, r.Reason, r.Copy, first.Revision-res.Revision)
		}
		t.Log(r.Copy.Reason)
	})
}

// flipByte flips a byte in the middle of the object at key in store, its checksum as it was.
func flipByte(t *testing.T, store objectstore.Store, key string) {
	t.Helper()
	ctx := context.Background()
	r, err := store.Open(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(r)
	_ = r.Close()
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if _, err := store.Upload(ctx, key, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
}
