package local

import (
	"flag"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Plugin links the local provider into a binary; it is configured by --local-root.
var Plugin = objectstore.Plugin{Type: Type, Bind: func(fs *flag.FlagSet) func() (objectstore.Provider, error) {
	root := fs.String("local-root", "", "directory of the local provider's buckets; empty: no local provider")
	return func() (objectstore.Provider, error) {
		if *root == "" {
			return nil, nil
		}
		return New(*root), nil
	}
}}
