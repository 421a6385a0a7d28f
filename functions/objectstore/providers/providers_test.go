package providers_test

import (
	"slices"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/providers"
)

// The providers linked are the types housekeeper says it implements: a provider added to one
// list and not the other fails here.
func TestEveryImplementedTypeIsLinked(t *testing.T) {
	var linked []string
	for _, p := range providers.All {
		linked = append(linked, p.Type)
	}
	slices.Sort(linked)
	if want := slices.Sorted(slices.Values(gardener.ImplementedTypes)); !slices.Equal(linked, want) {
		t.Errorf("providers.All links %v, gardener.ImplementedTypes says %v", linked, want)
	}
}
