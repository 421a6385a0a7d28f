package images

import (
	"fmt"
	"slices"
	"strings"
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
// run: the bridge; housekeeper-<type>, the functions, setup and the operators' tool linking only
// that provider's SDK; housekeeper, every provider and local. (A list, not derived: functions'
// tests start the stack, which builds these images; deployables_test checks it against the
// registry and the linked providers.) All serve /healthz, /readyz and
// /metrics (and in http mode the CloudEvents) on :8080.
func Deployables() []Deployable {
	const fn = "housekeeper's functions (bucket, entry, purge, schedule, snapshot, drill, copy), setup and operators' tool"
	return []Deployable{
		{"housekeeper-bridge", "./bridge/cmd/housekeeper-bridge", "/usr/local/bin/housekeeper-bridge",
			"housekeeper's bridge: BackupBucket and BackupEntry changes as CloudEvents on NATS JetStream"},
		{"housekeeper", "./functions/cmd/housekeeper", "/usr/local/bin/housekeeper", fn + ", every object store provider and local"},
		{"housekeeper-aws", "./functions/cmd/housekeeper-aws", "/usr/local/bin/housekeeper", fn + ", linking only the aws provider"},
		{"housekeeper-azure", "./functions/cmd/housekeeper-azure", "/usr/local/bin/housekeeper", fn + ", linking only the azure provider"},
		{"housekeeper-gcp", "./functions/cmd/housekeeper-gcp", "/usr/local/bin/housekeeper", fn + ", linking only the gcp provider"},
		{"housekeeper-openstack", "./functions/cmd/housekeeper-openstack", "/usr/local/bin/housekeeper", fn + ", linking only the openstack provider"},
	}
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
