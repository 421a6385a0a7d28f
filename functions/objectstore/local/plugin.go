package local

import (
	"flag"
	"fmt"
	"path/filepath"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Plugin links the local provider into a binary; it is configured by --local-root and
// --local-host-path.
var Plugin = objectstore.Plugin{Type: Type, Bind: func(fs *flag.FlagSet) func() (objectstore.Provider, error) {
	root := fs.String("local-root", "", "directory of the local provider's buckets; empty: no local provider")
	hostPath := fs.String("local-host-path", "", "the local provider's buckets as etcd's node sees them, written as hostPath into every etcd-backup secret (provider-local's --container-mount-path; default: --local-root)")
	return func() (objectstore.Provider, error) {
		if *root == "" {
			return nil, nil
		}
		if *hostPath == "" {
			return New(*root), nil
		}
		if !filepath.IsAbs(*hostPath) {
			return nil, fmt.Errorf("--local-host-path %q: must be an absolute path (etcd-druid mounts <hostPath>/<bucket> on the node)", *hostPath)
		}
		return New(*root, WithHostPath(filepath.Clean(*hostPath))), nil
	}
}}
