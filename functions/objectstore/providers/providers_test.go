package providers_test

import (
	"flag"
	"slices"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
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

// Every provider says how etcd-backup-restore reads its buckets: a drill runs etcdbrctl's
// restore on any of them.
func TestEveryProviderConfiguresEtcdBackupRestore(t *testing.T) {
	want := map[string]string{"azure": "ABS", "aws": "S3", "gcp": "GCS", "openstack": "Swift", "local": "Local"}
	for _, plugin := range providers.All {
		fs := flag.NewFlagSet(plugin.Type, flag.ContinueOnError)
		build := plugin.Bind(fs)
		if err := fs.Parse([]string{"--local-root", t.TempDir()}); err != nil && plugin.Type == "local" {
			t.Fatal(err)
		}
		p, err := build()
		if err != nil || p == nil {
			t.Fatalf("%s: provider %v (%v)", plugin.Type, p, err)
		}
		ep, ok := p.(objectstore.EtcdbrProvider)
		if !ok {
			t.Errorf("%s: no etcd-backup-restore store", plugin.Type)
			continue
		}
		s, err := ep.EtcdbrStore(objectstore.Where{Type: plugin.Type, Bucket: "b"}, map[string][]byte{})
		if err != nil || s.Provider != want[plugin.Type] {
			t.Errorf("%s: etcd-backup-restore's store %+v (%v), want provider %s", plugin.Type, s, err, want[plugin.Type])
		}
	}
}
