package release

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/housekeeper-dev/housekeeper/scripts/images"
)

// buildImages builds ds with images.Build, as `make images` does (scripts/cmd/images), tagged
// v<version>: `make images TAG=v<version>` of the same commit gives the same digests. When the
// binaries are for this machine, each is run with --version, which must print the release:
// what `housekeeper --version` says, the tag and the chart agree.
func buildImages(ctx context.Context, o *Options, ds []images.Deployable, created time.Time) (map[string]v1.Image, error) {
	b := images.BuildOptions{
		Root:        o.Root,
		Arch:        o.Arch,
		Version:     "v" + o.Version,
		Revision:    o.Revision,
		Deployables: ds,
		Created:     created,
		Log:         o.logf,
	}
	if o.Arch == runtime.GOARCH && runtime.GOOS == "linux" {
		b.Check = func(d images.Deployable, binary string) error {
			out, err := exec.CommandContext(ctx, binary, "--version").Output()
			if err != nil {
				return fmt.Errorf("%s --version: %w", d.Name, err)
			}
			fields := strings.Fields(string(out))
			if len(fields) != 2 || fields[1] != o.Version {
				return fmt.Errorf("%s --version prints %q, not the release %s", d.Name, strings.TrimSpace(string(out)), o.Version)
			}
			o.logf("%s --version says %s", d.Name, o.Version)
			return nil
		}
	} else {
		o.logf("linux/%s binaries do not run here: --version not checked", o.Arch)
	}
	return images.Build(ctx, b)
}

func since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }
