package infra_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/infra"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The CRDs in infra/crds must be byte for byte what the pinned Gardener version generated.
func TestCRDsEqualUpstreamGenerated(t *testing.T) {
	version := goOutput(t, "list", "-m", "-f", "{{.Version}}", "github.com/gardener/gardener/pkg/apis")
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal([]byte(goOutput(t, "mod", "download", "-json", "github.com/gardener/gardener@"+version)), &mod); err != nil || mod.Dir == "" {
		t.Fatalf("downloading gardener %s: %v %s", version, err, mod.Error)
	}
	files, err := infra.CRDFiles()
	if err != nil {
		t.Fatal(err)
	}
	gardenerCRDs := 0
	for name, ours := range files {
		if !strings.HasPrefix(filepath.Base(name), "extensions.gardener.cloud_") {
			continue // housekeeper's own (backup.housekeeper.dev), generated from its types
		}
		gardenerCRDs++
		upstreamName := strings.Replace(filepath.Base(name), "extensions.gardener.cloud_", "crd-extensions.gardener.cloud_", 1)
		upstream, err := os.ReadFile(filepath.Join(mod.Dir, "pkg/component/extensions/crds/assets", upstreamName))
		if err != nil {
			t.Fatalf("%s has no upstream counterpart in gardener %s: %v", name, version, err)
		}
		if !bytes.Equal(ours, upstream) {
			t.Errorf("infra/%s drifted from gardener %s's generated %s: run `make crds`", name, version, upstreamName)
		}
	}
	if gardenerCRDs != 2 {
		t.Fatalf("infra/crds holds %d Gardener CRDs, want BackupBucket and BackupEntry", gardenerCRDs)
	}
}

func goOutput(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// The upstream schema, served by a real kube-apiserver, accepts well-formed objects and rejects
// ones missing required fields with the API server's own validation message.
func TestCRDsOnAPIServer(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	c := env.Client(t)
	ctx := context.Background()

	secretRef := corev1.SecretReference{Name: "backup-credentials", Namespace: "garden"}
	bucket := &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: "seed-bucket"},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "azure"},
			Region:      "westeurope",
			SecretRef:   secretRef,
		},
	}
	if err := c.Create(ctx, bucket); err != nil {
		t.Fatalf("creating BackupBucket: %v", err)
	}
	entry := &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--app--6f1c"},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "azure"},
			BucketName:  bucket.Name,
			Region:      "westeurope",
			SecretRef:   secretRef,
		},
	}
	if err := c.Create(ctx, entry); err != nil {
		t.Fatalf("creating BackupEntry: %v", err)
	}

	// Status is a subresource: lastOperation is accepted there with all its required fields.
	got := &extensionsv1alpha1.BackupEntry{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(entry), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.BucketName != "seed-bucket" || got.UID == "" {
		t.Fatalf("BackupEntry read back as %+v", got.Spec)
	}

	// Go's typed client always sends bucketName (the field has no omitempty), so the schema's
	// "required" is tested the way kubectl would send a manifest without it.
	err := c.Create(ctx, unstructuredWithout(t, entry, "bucketName"))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("BackupEntry without bucketName: got %v, want an Invalid error from the API server", err)
	}
	if !strings.Contains(err.Error(), "spec.bucketName: Required value") {
		t.Errorf("validation message %q does not name spec.bucketName", err)
	}
	err = c.Create(ctx, unstructuredWithout(t, bucket, "region"))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.region: Required value") {
		t.Errorf("BackupBucket without region: got %v, want Invalid naming spec.region", err)
	}
}

// unstructuredWithout converts obj to an unstructured object under a new name, with the spec
// field removed.
func unstructuredWithout(t *testing.T, obj client.Object, field string) *unstructured.Unstructured {
	t.Helper()
	data, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: data}
	u.SetName(obj.GetName() + "-without-" + strings.ToLower(field))
	u.SetResourceVersion("")
	u.SetUID("")
	gvk, err := apiutil.GVKForObject(obj, kube.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	u.SetGroupVersionKind(gvk)
	unstructured.RemoveNestedField(u.Object, "spec", field)
	return u
}
