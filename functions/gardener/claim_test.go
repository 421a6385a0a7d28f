package gardener

import (
	"testing"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The claim's JSON patch tests, on the live object, every field the decision to claim read
// from the event's copy, and changes only the finalizers and a reconcile annotation.
func TestClaimPatchProvesWhatTheCopySays(t *testing.T) {
	const finalizer = "extensions.gardener.cloud/backupentry"
	meta := func(finalizers []string, annotations map[string]string) *extensionsv1alpha1.BackupEntry {
		return &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{
			Name: "e", UID: "u-1", ResourceVersion: "42", Finalizers: finalizers, Annotations: annotations}}
	}
	proof := `{"op":"test","path":"/metadata/uid","value":"u-1"},{"op":"test","path":"/metadata/resourceVersion","value":"42"},` +
		`{"op":"test","path":"/metadata/deletionTimestamp","value":null},{"op":"test","path":"/status","value":null},`
	for _, tc := range []struct {
		name string
		obj  *extensionsv1alpha1.BackupEntry
		want string
	}{
		{"new, bare", meta(nil, nil), `[` + proof +
			`{"op":"test","path":"/metadata/finalizers","value":null},{"op":"test","path":"/metadata/annotations","value":null},` +
			`{"op":"add","path":"/metadata/finalizers","value":["` + finalizer + `"]}]`},
		{"another controller's finalizer, reconcile annotation", meta([]string{"x/y"}, map[string]string{AnnotationOperation: OperationReconcile}), `[` + proof +
			`{"op":"test","path":"/metadata/finalizers","value":["x/y"]},` +
			`{"op":"test","path":"/metadata/annotations/gardener.cloud~1operation","value":"reconcile"},` +
			`{"op":"remove","path":"/metadata/annotations/gardener.cloud~1operation","value":null},` +
			`{"op":"add","path":"/metadata/finalizers","value":["x/y","` + finalizer + `"]}]`},
		{"restore annotation stays", meta(nil, map[string]string{AnnotationOperation: OperationRestore}), `[` + proof +
			`{"op":"test","path":"/metadata/finalizers","value":null},` +
			`{"op":"test","path":"/metadata/annotations/gardener.cloud~1operation","value":"restore"},` +
			`{"op":"add","path":"/metadata/finalizers","value":["` + finalizer + `"]}]`},
		{"other annotations, none for the operation", meta(nil, map[string]string{"a": "b"}), `[` + proof +
			`{"op":"test","path":"/metadata/finalizers","value":null},` +
			`{"op":"test","path":"/metadata/annotations/gardener.cloud~1operation","value":null},` +
			`{"op":"add","path":"/metadata/finalizers","value":["` + finalizer + `"]}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := claimPatch(tc.obj, finalizer)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("patch\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
