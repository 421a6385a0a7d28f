package entry

import (
	"maps"
	"slices"
	"testing"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/swift"
)

// upstreamKeys is what each type's upstream extension writes, for static credentials as
// upstream takes them: the generated secret's keys (nil: upstream writes none, and gardenlet
// copies the bucket's credentials secret into the entry's spec.secretRef instead, v1.150.0
// pkg/gardenlet/controller/backupentry/reconciler.go getGardenCredentials), and the keys of
// etcd-backup. etcd-backup is built by gardener's generic actuator (v1.150.0
// extensions/pkg/controller/backupentry/genericactuator/actuator.go deployEtcdBackupSecret:
// the entry secret's data, bucketName) and then the provider's GetETCDSecretData.
//
// Read at (repo, path, commit):
//   - local: github.com/gardener/gardener v1.150.0 pkg/provider-local/controller/backupbucket/actuator.go
//     (createBackupBucketGeneratedSecret: an empty generated secret) and
//     pkg/provider-local/controller/backupentry/actuator.go (GetETCDSecretData adds hostPath =
//     --container-mount-path; key name backupoptions.EtcdBackupSecretHostPath).
//   - azure: gardener/gardener-extension-provider-azure c0ad6149619718f638ebbc99fdc139843203c2f7
//     pkg/controller/backupbucket/secret.go (createOrUpdateBackupBucketGeneratedSecret:
//     storageAccount, storageKey, domain, always; pkg/azure/types.go StorageDomain = "domain"),
//     pkg/controller/backupentry/actuator.go (GetETCDSecretData adds nothing).
//   - aws: gardener/gardener-extension-provider-aws 2ff8d81837ddd58a79e23a579baa43623d43faa6
//     pkg/controller/backupbucket/actuator_reconcile.go (no generated secret),
//     pkg/controller/backupentry/actuator.go (GetETCDSecretData adds region = spec.region, and
//     roleARN for a workload identity); credentials accessKeyID, secretAccessKey (pkg/aws/types.go).
//   - gcp: gardener/gardener-extension-provider-gcp 2286e4a542d40764dc2eb1ccba2681709a1d9332
//     pkg/controller/backupbucket/actuator.go (no generated secret),
//     pkg/controller/backupentry/actuator.go (GetETCDSecretData adds nothing for a service
//     account key; projectID, credentialsConfig, serviceaccount.json for a workload identity);
//     credentials serviceaccount.json (pkg/gcp/types.go ServiceAccountJSONField).
//   - openstack: gardener/gardener-extension-provider-openstack 97400dd075b8c246c053f1fcdb6e52fb8ccef15e
//     pkg/controller/backupbucket/actuator.go (no generated secret),
//     pkg/controller/backupentry/actuator.go (GetETCDSecretData adds region = spec.region);
//     credentials authURL, domainName, tenantName, username, password (pkg/openstack/types.go).
var upstreamKeys = []struct {
	typ string
	// credentials is the bucket's secret, with upstream's keys.
	credentials map[string][]byte
	// generated is upstream's generated secret; nil where upstream writes none.
	generated []string
	// etcdBackup is upstream's etcd-backup.
	etcdBackup []string
}{
	{typ: "local", credentials: map[string][]byte{},
		generated: []string{}, etcdBackup: []string{"bucketName", "hostPath"}},
	// housekeeper provisions with a service principal or workload identity, as upstream; these
	// are the storage credentials the account hands back (account.go storageCredentials),
	// which BackupSecretData publishes.
	{typ: "azure", credentials: map[string][]byte{"storageAccount": []byte("acct"), "storageKey": []byte("a2V5"), "domain": []byte("blob.core.windows.net")},
		generated: []string{"storageAccount", "storageKey", "domain"}, etcdBackup: []string{"bucketName", "domain", "storageAccount", "storageKey"}},
	{typ: "aws", credentials: map[string][]byte{"accessKeyID": []byte("AKIA"), "secretAccessKey": []byte("s")},
		etcdBackup: []string{"accessKeyID", "bucketName", "region", "secretAccessKey"}},
	{typ: "gcp", credentials: map[string][]byte{"serviceaccount.json": []byte(`{"type":"service_account","project_id":"my-project-1","client_email":"a@my-project-1.iam.gserviceaccount.com","private_key":"k"}`)},
		etcdBackup: []string{"bucketName", "serviceaccount.json"}},
	{typ: "openstack", credentials: map[string][]byte{"authURL": []byte("https://keystone.example.com/v3"), "domainName": []byte("d"), "tenantName": []byte("t"), "username": []byte("u"), "password": []byte("p")},
		etcdBackup: []string{"authURL", "bucketName", "domainName", "password", "region", "tenantName", "username"}},
}

// TestUpstreamKeys compares the keys housekeeper's generated secret and etcd-backup carry with
// upstream's, type by type, so that a hand-over in either direction changes no key etcd-druid
// and etcd-backup-restore read. The generated secret is compared where upstream writes one;
// where it writes none, gardenlet passes the credentials through and housekeeper's generated
// secret may hold only keys of upstream's etcd-backup (aws adds region to it, which upstream
// adds to etcd-backup).
func TestUpstreamKeys(t *testing.T) {
	providers := objectstore.NewRegistry(local.New(t.TempDir(), local.WithHostPath("/etc/gardener/local-backupbuckets")),
		azure.New(), s3.New(), gcs.New(), swift.New())
	for _, u := range upstreamKeys {
		t.Run(u.typ, func(t *testing.T) {
			p, err := providers.Provider(objectstore.Where{Type: u.typ, Region: "region-1", Bucket: "bucket-1"})
			if err != nil {
				t.Fatal(err)
			}
			generated, err := p.BackupSecretData(u.credentials)
			if err != nil {
				t.Fatal(err)
			}
			if u.generated != nil {
				if got, want := sortedKeys(generated), sorted(u.generated); !slices.Equal(got, want) {
					t.Errorf("generated secret keys %q, upstream writes %q", got, want)
				}
			} else if extra := slices.DeleteFunc(sortedKeys(generated), func(k string) bool { return slices.Contains(u.etcdBackup, k) }); len(extra) > 0 {
				t.Errorf("generated secret has %q, which upstream's etcd-backup does not", extra)
			}
			e := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: "shoot--p--s--0000"},
				Spec: extensionsv1alpha1.BackupEntrySpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: u.typ}, Region: "region-1", BucketName: "bucket-1"}}
			// gardenlet's entry secret: a copy of housekeeper's generated secret, and at a
			// take-over a copy of upstream's (the credentials where upstream generates none).
			sources := map[string]map[string][]byte{"housekeeper's generated secret": generated, "upstream's entry secret": u.credentials}
			if u.generated != nil {
				sources["upstream's entry secret"] = upstreamGenerated(u.generated, u.credentials)
			}
			for from, data := range sources {
				got, err := EtcdBackupData(providers, e, &corev1.Secret{Data: maps.Clone(data)})
				if err != nil {
					t.Fatal(err)
				}
				if keys, want := sortedKeys(got), sorted(u.etcdBackup); !slices.Equal(keys, want) {
					t.Errorf("etcd-backup from %s: keys %q, upstream writes %q", from, keys, want)
				}
				if u.typ == local.Type && string(got[local.KeyHostPath]) != "/etc/gardener/local-backupbuckets" {
					t.Errorf("etcd-backup from %s: hostPath %q, want --local-host-path", from, got[local.KeyHostPath])
				}
			}
		})
	}
}

// upstreamGenerated is the generated secret upstream writes: its keys, with the values the
// storage credentials give (none for local's empty secret).
func upstreamGenerated(keys []string, credentials map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for _, k := range keys {
		out[k] = credentials[k]
	}
	return out
}

func sortedKeys(m map[string][]byte) []string { return slices.Sorted(maps.Keys(m)) }

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }
