package entry

import (
	"fmt"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// seedNamespace is a shoot's control-plane namespace as a seed labels and annotates it, and
// the metadata of its etcd-backup secret: what the entry function's cache holds per entry.
func seedNamespace(i int) (ns, secret *metav1.PartialObjectMetadata) {
	name := fmt.Sprintf("shoot--project-%d--cluster", i)
	ns = metadataOf("Namespace")
	ns.ObjectMeta = metav1.ObjectMeta{Name: name, UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)), ResourceVersion: fmt.Sprint(1000 + i),
		Labels: map[string]string{
			"gardener.cloud/role": "shoot", "shoot.gardener.cloud/provider": "aws", "networking.shoot.gardener.cloud/provider": "calico",
			"extensions.gardener.cloud/aws": "true", "extensions.gardener.cloud/calico": "true", "extensions.gardener.cloud/shoot-cert-service": "true",
			"extensions.gardener.cloud/shoot-dns-service": "true", "backup.gardener.cloud/provider": "aws", "seed.gardener.cloud/provider": "aws",
			"high-availability-config.resources.gardener.cloud/consider": "true", "kubernetes.io/metadata.name": name,
		},
		Annotations: map[string]string{
			gardener.ShootUIDAnnotation:                               fmt.Sprintf("11111111-0000-0000-0000-%012d", i),
			"shoot.gardener.cloud/purpose":                            "production",
			"high-availability-config.resources.gardener.cloud/zones": "eu-west-1a,eu-west-1b,eu-west-1c",
			"networking.resources.gardener.cloud/from-world-to-ports": `[{"protocol":"TCP","port":443}]`,
		},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "gardenlet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{},"f:labels":{}}}`)}},
	}
	secret = metadataOf("Secret")
	secret.ObjectMeta = metav1.ObjectMeta{Namespace: name, Name: SecretName, UID: types.UID(fmt.Sprintf("22222222-0000-0000-0000-%012d", i)), ResourceVersion: fmt.Sprint(2000 + i),
		Annotations: map[string]string{AnnotationCreatedBy: fmt.Sprintf("entry-%d", i)},
		Labels:      map[string]string{"gardener.cloud/purpose": "etcd-backup"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "housekeeper-entry", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:data":{},"f:metadata":{"f:annotations":{}}}`)}},
	}
	return ns, secret
}

// BenchmarkMetadataCachePerEntry measures the heap the entry function's metadata cache holds
// per BackupEntry (its namespace and its etcd-backup secret, in a client-go indexer as the
// controller-runtime cache keeps them), with the metadata as the API server sends it (what a
// cache without a transform keeps) and as cachedMetadata trims it.
func BenchmarkMetadataCachePerEntry(b *testing.B) {
	const entries = 10_000
	heldPerEntry := func(transform func(any) (any, error)) float64 {
		store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range entries {
			ns, secret := seedNamespace(i)
			for _, obj := range []any{ns, secret} {
				kept, err := transform(obj)
				if err != nil {
					b.Fatal(err)
				}
				if err := store.Add(kept); err != nil {
					b.Fatal(err)
				}
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(store)
		return float64(after.HeapAlloc-before.HeapAlloc) / entries
	}
	for range b.N {
		full := heldPerEntry(func(obj any) (any, error) { return obj, nil })
		trimmed := heldPerEntry(cachedMetadata)
		b.ReportMetric(full, "B/entry-untrimmed")
		b.ReportMetric(trimmed, "B/entry")
		if b.N == 1 {
			fmt.Printf("\n| metadata cache, %d entries | heap per entry |\n|---|---:|\n| as the API server sends it (seed labels, managed fields) | %.0f B |\n| trimmed (cachedMetadata) | %.0f B |\n\n", entries, full, trimmed)
		}
	}
}
