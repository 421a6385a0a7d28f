package drill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

var (
	// ErrKeptSetExists is a keep directory that holds a set for the entry already: a Keeper
	// does not overwrite it.
	ErrKeptSetExists = errors.New("a kept set exists")
	// ErrNothingKept is a drill that did not pass: a Keeper keeps nothing of it.
	ErrNothingKept = errors.New("nothing kept")
)

// Keeper keeps on disk the snapshot objects a drill proved, for `gardenadm restore
// --backup-data-path`, which restores a self-hosted shoot's etcd-main from them with
// `etcdbrctl initialize --storage-provider=Local`. Its Source hands the drill a source's
// objects and writes each, byte for byte as read, into a staging directory inside the keep
// directory; Keep moves the drill's full snapshot and deltas, once it passed, to
// <dir>/<bucket>/<key> (<dir>/<bucket>/<entry>/etcd-main/v2/<name>: the Local provider's
// layout with <dir> as its root) and writes the drill's result beside them, to
// <dir>/<entry>.drill.json. Files are 0600, directories it creates 0700. Discard removes
// what is staged. The objects are downloaded once, by the drill.
//
// A keep directory holding a set for the entry (<dir>/<bucket>/<entry> or its result file) is
// refused, by NewKeeper and again by Keep (ErrKeptSetExists): a set is never overwritten.
type Keeper struct {
	dir, bucket, entry, prefix string
	staging                    string

	mu      sync.Mutex
	objects map[string]KeptObject
	errs    map[string]error
}

// Kept is a set a Keeper kept.
type Kept struct {
	// Dir is the keep directory: gardenadm's <backupBucketsRoot>, the Local provider's root.
	Dir    string `json:"dir"`
	Bucket string `json:"bucket"`
	// BackupDataPath is <Dir>/<Bucket>/<entry>/etcd-main/v2: gardenadm restore's --backup-data-path.
	BackupDataPath string `json:"backupDataPath"`
	// ResultFile is where the drill's result is: <Dir>/<entry>.drill.json.
	ResultFile string `json:"resultFile"`
	// Objects are the full snapshot and the deltas, in the order the drill applied them.
	Objects []KeptObject `json:"objects"`
}

// KeptObject is one object kept: its key (its path under <Dir>/<Bucket>), size and SHA-256,
// as stored in the source.
type KeptObject struct {
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// NewKeeper prepares keeping the set a drill of prefix (<entry>/etcd-main/, the only etcd
// gardenadm restores) in bucket proves, under dir (created 0700 if missing).
func NewKeeper(dir, bucket, prefix string) (*Keeper, error) {
	entry, ok := strings.CutSuffix(prefix, "/"+gardener.EtcdMain+"/")
	if !ok || !oneElement(entry) {
		return nil, fmt.Errorf("keeping the backups under %q: gardenadm restores <entry>/%s/ only", prefix, gardener.EtcdMain)
	}
	if !oneElement(bucket) {
		return nil, fmt.Errorf("keeping the backups of bucket %q: its name is no directory name", bucket)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	k := &Keeper{dir: abs, bucket: bucket, entry: entry, prefix: prefix, objects: map[string]KeptObject{}, errs: map[string]error{}}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("creating the keep directory: %w", err)
	}
	if err := k.refuseExisting(); err != nil {
		return nil, err
	}
	if k.staging, err = os.MkdirTemp(abs, "."+entry+".keeping-"); err != nil {
		return nil, fmt.Errorf("creating the keep directory's staging directory: %w", err)
	}
	return k, nil
}

func oneElement(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`)
}

// setDir is where the entry's set goes; resultFile where the drill's result goes.
func (k *Keeper) setDir() string     { return filepath.Join(k.dir, k.bucket, k.entry) }
func (k *Keeper) resultFile() string { return filepath.Join(k.dir, k.entry+".drill.json") }

func (k *Keeper) refuseExisting() error {
	for _, p := range []string{k.setDir(), k.resultFile()} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%w: %s holds a set for %s already; remove it, or keep into another directory", ErrKeptSetExists, p, k.entry)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Source is src with every object the drill opens under the keeper's prefix written to the
// staging directory as the drill reads it. What the drill leaves unread of an object when it
// closes it is read to its end then, so that the copy is the whole object.
func (k *Keeper) Source(src Source) Source { return keepingSource{Source: src, k: k} }

type keepingSource struct {
	Source
	k *Keeper
}

func (s keepingSource) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := s.Source.Open(ctx, key)
	if err != nil {
		return rc, err
	}
	if !strings.HasPrefix(key, s.k.prefix) || !filepath.IsLocal(key) || path.Clean(key) != key {
		return rc, nil // not kept: Keep says so, should the drill prove it
	}
	file := filepath.Join(s.k.staging, "objects", filepath.FromSlash(key))
	f, err := func() (*os.File, error) {
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return nil, err
		}
		return os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	}()
	if err != nil {
		s.k.record(key, KeptObject{}, err)
		return rc, nil // the drill runs on; Keep fails
	}
	return &keepingReader{ctx: ctx, rc: rc, file: f, h: sha256.New(), key: key, k: s.k}, nil
}

// keepingReader copies what is read from rc into file.
type keepingReader struct {
	ctx  context.Context
	rc   io.ReadCloser
	file *os.File
	h    hash.Hash
	n    int64
	eof  bool
	werr error
	key  string
	k    *Keeper
}

func (r *keepingReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if n > 0 && r.werr == nil {
		if _, werr := r.file.Write(p[:n]); werr != nil {
			r.werr = werr
		}
		r.h.Write(p[:n])
		r.n += int64(n)
	}
	if err == io.EOF {
		r.eof = true
	}
	return n, err
}

func (r *keepingReader) Close() error {
	if !r.eof && r.werr == nil {
		// The rest the drill did not need (what follows a zlib stream, say): read it too.
		_, err := io.Copy(io.Discard, &recordingReader{ctx: r.ctx, r: r})
		if err != nil && r.werr == nil {
			r.werr = fmt.Errorf("reading the rest of it: %w", err)
		}
	}
	if r.werr == nil {
		r.werr = r.file.Sync()
	}
	if err := r.file.Close(); err != nil && r.werr == nil {
		r.werr = err
	}
	if r.werr == nil && !r.eof {
		r.werr = errors.New("it was not read to its end")
	}
	r.k.record(r.key, KeptObject{Key: r.key, Size: r.n, SHA256: hex.EncodeToString(r.h.Sum(nil))}, r.werr)
	return r.rc.Close()
}

func (k *Keeper) record(key string, o KeptObject, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		delete(k.objects, key)
		k.errs[key] = err
		return
	}
	delete(k.errs, key)
	k.objects[key] = o
}

// Keep keeps the set of the drill Run returned res and err for, read through Source: its full
// snapshot and deltas, if the drill passed (Report's Exact or Restorable), else nothing
// (ErrNothingKept). result is the drill's result as written to Kept.ResultFile, given the set.
// A set that exists by now is ErrKeptSetExists. The staging directory is removed in any case.
func (k *Keeper) Keep(res Result, err error, result func(Kept) ([]byte, error)) (Kept, error) {
	defer k.Discard()
	if o := Report("", time.Now(), res, err).Outcome; o != backupv1alpha1.OutcomeExact && o != backupv1alpha1.OutcomeRestorable {
		return Kept{}, fmt.Errorf("%w: the drill's result is %s, not %s or %s", ErrNothingKept, o, backupv1alpha1.OutcomeExact, backupv1alpha1.OutcomeRestorable)
	}
	if res.Full == "" {
		return Kept{}, fmt.Errorf("%w: the drill names no full snapshot", ErrNothingKept)
	}
	kept := Kept{Dir: k.dir, Bucket: k.bucket, ResultFile: k.resultFile(),
		BackupDataPath: filepath.Join(k.setDir(), gardener.EtcdMain, "v2")}
	set := filepath.Join(k.staging, "set")
	k.mu.Lock()
	defer k.mu.Unlock()
	// Only the proved objects move into the set, whatever else was read.
	for _, key := range append([]string{res.Full}, res.Deltas...) {
		o, ok := k.objects[key]
		if !ok {
			why := "the drill did not read it through the keeper"
			if err := k.errs[key]; err != nil {
				why = err.Error()
			}
			return Kept{}, fmt.Errorf("%w: keeping %s: %s", ErrNothingKept, key, why)
		}
		to := filepath.Join(set, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			return Kept{}, err
		}
		if err := os.Rename(filepath.Join(k.staging, "objects", filepath.FromSlash(key)), to); err != nil {
			return Kept{}, err
		}
		kept.Objects = append(kept.Objects, o)
	}
	data, err := result(kept)
	if err != nil {
		return Kept{}, err
	}
	staged := filepath.Join(k.staging, "result.json")
	if err := writeSynced(staged, data); err != nil {
		return Kept{}, err
	}
	if err := k.refuseExisting(); err != nil {
		return Kept{}, err
	}
	bucketDir := filepath.Join(k.dir, k.bucket)
	if err := os.MkdirAll(bucketDir, 0o700); err != nil {
		return Kept{}, err
	}
	if err := os.Rename(filepath.Join(set, k.entry), k.setDir()); err != nil {
		return Kept{}, fmt.Errorf("moving the set into place: %w", err)
	}
	if err := os.Rename(staged, k.resultFile()); err != nil {
		return Kept{}, fmt.Errorf("moving the drill's result into place: %w", err)
	}
	for _, d := range []string{bucketDir, k.dir} {
		if err := syncDir(d); err != nil {
			return Kept{}, err
		}
	}
	return kept, nil
}

// Discard removes what the keeper staged; the set Keep kept stays.
func (k *Keeper) Discard() { _ = os.RemoveAll(k.staging) }

func writeSynced(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
