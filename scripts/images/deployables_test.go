package images

import (
	"slices"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/providers"
)

// The images are the bridge, housekeeper, and housekeeper-<type> for every linked provider but
// local; the functions' images name every function of the registry.
func TestDeployablesAreTheRegistrysAndTheProviders(t *testing.T) {
	want := []string{"housekeeper-bridge", "housekeeper"}
	for _, p := range providers.All {
		if p.Type != local.Type {
			want = append(want, "housekeeper-"+p.Type)
		}
	}
	got := Names(Deployables())
	if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("the deployables are %v, want %v", got, want)
	}
	for _, d := range Deployables()[1:] {
		if !strings.Contains(d.Description, "("+strings.Join(all.NamesOf(all.Functions), ", ")+")") {
			t.Errorf("%s: %q does not name the registry's functions %v", d.Name, d.Description, all.NamesOf(all.Functions))
		}
	}
}
