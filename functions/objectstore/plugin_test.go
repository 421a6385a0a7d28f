package objectstore_test

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
)

// A linked provider left unconfigured is known to the registry (an entry function can serve
// its type) but opens nothing; a flag a plugin refuses fails the registry.
func TestBindPlugins(t *testing.T) {
	refusing := objectstore.Plugin{Type: "refusing", Bind: func(fs *flag.FlagSet) func() (objectstore.Provider, error) {
		v := fs.String("refusing-flag", "", "")
		return func() (objectstore.Provider, error) {
			if *v != "" {
				return nil, errors.New("--refusing-flag refused")
			}
			return local.New(t.TempDir()), nil
		}
	}}
	parse := func(args ...string) (objectstore.Registry, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		build := objectstore.BindPlugins(fs, local.Plugin, refusing)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return build()
	}
	r, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if !r.Links(local.Type) || r.Links("aws") {
		t.Errorf("Links: local %t, aws %t; want true, false", r.Links(local.Type), r.Links("aws"))
	}
	if _, err := r.Get(local.Type); !errors.Is(err, objectstore.ErrUnknownType) || !strings.Contains(err.Error(), "not configured") {
		t.Errorf("Get of the unconfigured local provider: %v, want ErrUnknownType saying it is not configured", err)
	}
	if r, err = parse("--local-root", t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(local.Type); err != nil {
		t.Errorf("Get of the local provider with --local-root: %v", err)
	}
	if _, err := parse("--refusing-flag", "x"); err == nil || !strings.Contains(err.Error(), "--refusing-flag") {
		t.Errorf("a refused flag: %v, want the plugin's error", err)
	}
}
