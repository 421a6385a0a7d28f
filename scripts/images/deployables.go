package images

import (
	"fmt"
	"slices"
	"strings"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/providers"
)

// Deployable is one of housekeeper's images: a main package of this module, built static into
// the binary its entrypoint runs.
type Deployable struct {
	Name        string // the image's name under the registry: <registry>/<Name>:<tag>
	Package     string // the main package, relative to the module's root
	Path        string // the binary in the image, the entrypoint
	Description string // org.opencontainers.image.description
}

// Deployables are the images the chart (infra/chart/templates/_helpers.tpl) and docker compose
// run: the bridge; housekeeper, every provider and local; housekeeper-<type> for each provider
// of providers.All but local, the functions, setup and the operators' tool linking only that
// provider's SDK (functions/cmd/housekeeper-<type>). All serve /healthz, /readyz and /metrics
// (and in http mode the CloudEvents) on :8080.
func Deployables() []Deployable {
	fn := "housekeeper's functions (" + strings.Join(all.NamesOf(all.Functions), ", ") + "), setup and operators' tool"
	out := []Deployable{
		{"housekeeper-bridge", "./bridge/cmd/housekeeper-bridge", "/usr/local/bin/housekeeper-bridge",
			"housekeeper's bridge: BackupBucket and BackupEntry changes as CloudEvents on NATS JetStream"},
		{"housekeeper", "./functions/cmd/housekeeper", "/usr/local/bin/housekeeper", fn + ", every object store provider and local"},
	}
	var types []string
	for _, p := range providers.All {
		if p.Type != local.Type { // the housekeeper image's alone: no seed's backups are on local
			types = append(types, p.Type)
		}
	}
	slices.Sort(types)
	for _, t := range types {
		out = append(out, Deployable{"housekeeper-" + t, "./functions/cmd/housekeeper-" + t, "/usr/local/bin/housekeeper",
			fn + ", linking only the " + t + " provider"})
	}
	return out
}

// Select are the deployables named, in that order, each once; none named: every one.
func Select(names ...string) ([]Deployable, error) {
	all := Deployables()
	if len(names) == 0 {
		return all, nil
	}
	var out []Deployable
	for _, n := range names {
		i := slices.IndexFunc(all, func(d Deployable) bool { return d.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("no image %q (there are %s)", n, strings.Join(Names(all), ", "))
		}
		if !slices.ContainsFunc(out, func(d Deployable) bool { return d.Name == n }) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// Names are ds' names.
func Names(ds []Deployable) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Name
	}
	return out
}
