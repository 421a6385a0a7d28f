// Package local is the object store provider for a directory on this machine (spec.type
// "local"), for the local stack and for platforms without a cloud: a bucket is a directory
// <root>/<bucket>, an object key is a file path below it.
//
// Every file operation goes through an os.Root opened at the bucket directory, so neither a
// key nor a symbolic link inside the bucket can reach a file outside it. Keys that could
// mean another place ("", "/abs", "a/../b", "a//b", "a/./b", "a/") are rejected with
// objectstore.ErrInvalidKey before touching the disk.
//
// Unlike a blob store, a directory tree cannot hold both "a" and "a/b": the second Upload
// fails. etcd-backup-restore's key layout never does this.
//
// The secret for etcd-backup-restore: gardener's provider-local generates an empty bucket
// secret and gives each entry's etcd-backup the key hostPath, the directory that holds the
// bucket directories as the node running etcd sees it (its --container-mount-path);
// etcd-druid mounts <hostPath>/<bucket> into the etcd pod as a hostPath volume and runs
// etcd-backup-restore with --storage-provider=Local. BackupSecretData returns the same empty
// data and EntrySecretData that key, so the two extensions hand objects over with no change
// to either secret (see keys.go).
package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Type is the BackupBucket spec.type this provider serves.
const Type = "local"

// KeyHostPath is the key in the generated secret naming the directory that holds the bucket
// directories (etcd-druid's EtcdBackupSecretHostPath).
const KeyHostPath = "hostPath"

const (
	dirPerm  = 0o755
	filePerm = 0o644
	// BucketPerm is the mode of a bucket directory, as gardener's provider-local sets it
	// (whatever the umask): etcd-backup-restore runs as another user of the group.
	BucketPerm = 0o775
)

// Option configures the provider.
type Option func(*Provider)

// WithHostPath sets the hostPath written to every etcd-backup secret, for when the nodes that
// run etcd see the bucket directories at another path than this process (default: the
// root, made absolute): provider-local's --container-mount-path.
func WithHostPath(p string) Option { return func(pr *Provider) { pr.hostPath = p } }

// WithListPageSize sets how many keys a List page (and so a purge round) holds: at most
// objectstore.MaxPageSize, the default; values below 1 mean 1.
func WithListPageSize(n int) Option {
	return func(pr *Provider) { pr.pageSize = min(max(n, 1), objectstore.MaxPageSize) }
}

// Provider opens bucket directories under one root directory.
type Provider struct {
	root     string
	hostPath string
	pageSize int
}

var _ objectstore.EntrySecret = (*Provider)(nil)

// New returns the local provider for buckets under root. The root is created by the first
// Create.
func New(root string, opts ...Option) *Provider {
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	p := &Provider{root: filepath.Clean(root), pageSize: objectstore.MaxPageSize}
	for _, opt := range opts {
		opt(p)
	}
	if p.hostPath == "" {
		p.hostPath = p.root
	}
	return p
}

// Type returns "local".
func (p *Provider) Type() string { return Type }

// Root is the directory that holds the bucket directories.
func (p *Provider) Root() string { return p.root }

// Open returns the store for the directory <root>/<bucket>. No credentials are needed; any
// are accepted and ignored.
func (p *Provider) Open(bucket string, _ map[string][]byte) (objectstore.Store, error) {
	if err := objectstore.ValidateBucketName(bucket); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	return &store{root: p.root, name: bucket, pageSize: p.pageSize}, nil
}

// BackupSecretData returns no keys: provider-local's generated secret is empty, and so is
// this one, so that a hand-over in either direction leaves it as it was.
func (p *Provider) BackupSecretData(_ map[string][]byte) (map[string][]byte, error) {
	return map[string][]byte{}, nil
}

// EntrySecretData returns hostPath, the directory holding the bucket directories as etcd's
// node sees it, for every entry, as provider-local's backupentry actuator adds it: every
// etcd-backup written is complete whatever the generated secret holds (provider-local's empty
// one at a take-over, or the hostPath of an earlier housekeeper's).
func (p *Provider) EntrySecretData(objectstore.Entry) (map[string][]byte, error) {
	return map[string][]byte{KeyHostPath: []byte(p.hostPath)}, nil
}

// HostPath is the hostPath every etcd-backup secret gets.
func (p *Provider) HostPath() string { return p.hostPath }

// ValidateKey applies objectstore.ValidateKey and the rules that keep a key a plain relative
// path inside the bucket directory.
func ValidateKey(key string) error {
	if err := objectstore.ValidateKey(key); err != nil {
		return err
	}
	if strings.HasPrefix(key, "/") {
		return fmt.Errorf("%w %q: absolute path", objectstore.ErrInvalidKey, key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w %q: empty path segment", objectstore.ErrInvalidKey, key)
		case ".", "..":
			return fmt.Errorf("%w %q: %q path segment", objectstore.ErrInvalidKey, key, seg)
		}
	}
	return nil
}

type store struct {
	root     string
	name     string
	pageSize int
}

var _ objectstore.Store = (*store)(nil)

func (s *store) dir() string { return filepath.Join(s.root, s.name) }

// openRoot returns an os.Root at the bucket directory, or ErrBucketNotFound.
func (s *store) openRoot() (*os.Root, error) {
	parent, err := os.OpenRoot(s.root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, s.notFound()
		}
		return nil, fmt.Errorf("local: opening %s: %w", s.root, err)
	}
	defer parent.Close()
	r, err := parent.OpenRoot(s.name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, s.notFound()
		}
		return nil, fmt.Errorf("local: bucket %q: opening %s: %w", s.name, s.dir(), err)
	}
	return r, nil
}

func (s *store) notFound() error {
	return fmt.Errorf("local: bucket %q: %w (no directory %s)", s.name, objectstore.ErrBucketNotFound, s.dir())
}

// Create makes the bucket directory (and the root); one that exists already is fine.
func (s *store) Create(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.MkdirAll(s.root, dirPerm); err != nil {
		return fmt.Errorf("local: creating root %s: %w", s.root, err)
	}
	parent, err := os.OpenRoot(s.root)
	if err != nil {
		return fmt.Errorf("local: opening %s: %w", s.root, err)
	}
	defer parent.Close()
	if err := parent.Mkdir(s.name, BucketPerm); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("local: bucket %q: %w", s.name, err)
		}
		if fi, err := parent.Stat(s.name); err != nil || !fi.IsDir() {
			return fmt.Errorf("local: bucket %q: %s exists and is not a directory", s.name, s.dir())
		}
	}
	// Again when it existed: a mode changed by hand is repaired, as upstream does.
	if err := parent.Chmod(s.name, BucketPerm); err != nil {
		return fmt.Errorf("local: bucket %q: %w", s.name, err)
	}
	return nil
}

// Delete removes the bucket directory with everything in it; a missing one is fine.
func (s *store) Delete(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	parent, err := os.OpenRoot(s.root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("local: opening %s: %w", s.root, err)
	}
	defer parent.Close()
	if err := parent.RemoveAll(s.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("local: bucket %q: deleting %s: %w", s.name, s.dir(), err)
	}
	return nil
}

// List walks the bucket directory in lexical key order: siblings are visited by their key
// prefix — a file by its name, a directory by its name and "/" — so "a-c" comes before
// "a/b" as it would in a blob store. Directories that cannot hold keys under prefix are
// skipped.
func (s *store) List(ctx context.Context, prefix string, fn func(keys []string) error) error {
	r, err := s.openRoot()
	if err != nil {
		return err
	}
	defer r.Close()
	page := make([]string, 0, s.pageSize)
	flush := func() error {
		if len(page) == 0 {
			return nil
		}
		out := slices.Clone(page)
		page = page[:0]
		return fn(out)
	}
	emit := func(key string) error {
		page = append(page, key)
		if len(page) == s.pageSize {
			return flush()
		}
		return nil
	}
	if err := s.walk(ctx, r, "", prefix, emit); err != nil {
		return err
	}
	return flush()
}

type entry struct {
	key   string // the key, or for a directory its key prefix ending in "/"
	isDir bool
}

func (s *store) walk(ctx context.Context, r *os.Root, dir, prefix string, emit func(string) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	name := dir
	if name == "" {
		name = "."
	}
	f, err := r.Open(name)
	if err != nil {
		if dir != "" && errors.Is(err, fs.ErrNotExist) {
			return nil // removed while we walked
		}
		return fmt.Errorf("local: bucket %q: listing %q: %w", s.name, dir, err)
	}
	dirents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("local: bucket %q: listing %q: %w", s.name, dir, err)
	}
	entries := make([]entry, 0, len(dirents))
	for _, d := range dirents {
		key := d.Name()
		if dir != "" {
			key = dir + "/" + key
		}
		if d.IsDir() { // not a symbolic link to one: links are listed, never followed
			key += "/"
			if !strings.HasPrefix(key, prefix) && !strings.HasPrefix(prefix, key) {
				continue
			}
			entries = append(entries, entry{key: key, isDir: true})
			continue
		}
		if strings.HasPrefix(key, prefix) {
			entries = append(entries, entry{key: key})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	for _, e := range entries {
		if e.isDir {
			if err := s.walk(ctx, r, strings.TrimSuffix(e.key, "/"), prefix, emit); err != nil {
				return err
			}
			continue
		}
		if err := emit(e.key); err != nil {
			return err
		}
	}
	return nil
}

// DeleteKeys removes the files named by keys and then every directory below the bucket
// directory that this left empty. A missing key, or one naming a directory (which holds
// no object of that name), counts as deleted.
func (s *store) DeleteKeys(ctx context.Context, keys []string) (map[string]error, error) {
	if len(keys) == 0 {
		return nil, ctx.Err()
	}
	r, err := s.openRoot()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	todo, failed := objectstore.KeysToDelete(keys)
	for _, key := range todo {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := ValidateKey(key); err != nil { // the rules of a path, beyond every store's
			failed[key] = err
			continue
		}
		if err := s.remove(r, key); err != nil {
			failed[key] = err
			continue
		}
		s.prune(r, path.Dir(key))
	}
	return objectstore.Failed(failed), nil
}

func (s *store) remove(r *os.Root, key string) error {
	fi, err := r.Lstat(key)
	switch {
	case missing(err):
		return nil
	case err != nil:
		return s.keyError("delete", key, err)
	case fi.IsDir():
		return nil // a "directory" is not an object
	}
	if err := r.Remove(key); err != nil && !missing(err) {
		return s.keyError("delete", key, err)
	}
	return nil
}

// prune removes dir and its parents while they are empty directories, stopping below the
// bucket directory. A directory that is not empty (or a concurrent Upload's) stays.
func (s *store) prune(r *os.Root, dir string) {
	for ; dir != "." && dir != "/" && dir != ""; dir = path.Dir(dir) {
		fi, err := r.Lstat(dir)
		if err != nil || !fi.IsDir() {
			return
		}
		if err := r.Remove(dir); err != nil {
			return
		}
	}
}

func (s *store) keyError(op, key string, err error) error {
	if strings.Contains(err.Error(), "escapes from parent") {
		// os.Root refused a path that leaves the bucket (through a symbolic link).
		return fmt.Errorf("local: bucket %q: %s %q: %w: %v", s.name, op, key, objectstore.ErrInvalidKey, err)
	}
	if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR) {
		// A directory cannot be a file too: "a" and "a/b" cannot both be keys here.
		return fmt.Errorf("local: bucket %q: %s %q: %w: a key and the directory of other keys cannot share a name in a local bucket", s.name, op, key, objectstore.ErrInvalidKey)
	}
	return fmt.Errorf("local: bucket %q: %s %q: %w", s.name, op, key, err)
}

// missing reports an error saying the path does not exist, including a path through a file
// ("a/b" when "a" is a file).
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// CreateWithConfig is Create for a bucket without settings: a local directory cannot be made
// immutable, so a providerConfig that asks for immutability is an error, as is one that is not
// a JSON object.
func (s *store) CreateWithConfig(ctx context.Context, config []byte) (string, error) {
	if t := bytes.TrimSpace(config); len(t) > 0 && string(t) != "null" {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(t, &fields); err != nil {
			return "", fmt.Errorf("local: %w: providerConfig: %v", objectstore.ErrInvalidConfig, err)
		}
		if im, ok := fields["immutability"]; ok && string(im) != "null" {
			return "", fmt.Errorf("local: %w: providerConfig.immutability: local buckets cannot be immutable", objectstore.ErrInvalidConfig)
		}
	}
	return "", s.Create(ctx)
}

// EtcdbrStore: etcd-backup-restore's Local store, whose $HOME holds the bucket directory: this
// provider's root, or the secret's hostPath for a provider without one.
func (p *Provider) EtcdbrStore(_ objectstore.Where, credentials map[string][]byte) (objectstore.EtcdbrStore, error) {
	home := p.root
	if home == "" {
		home = string(credentials[KeyHostPath])
	}
	if home == "" {
		return objectstore.EtcdbrStore{}, errors.New("etcd-backup-restore's Local store needs the directory that holds the bucket: none known")
	}
	return objectstore.EtcdbrStore{Provider: "Local", Home: home}, nil
}
