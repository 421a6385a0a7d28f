package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InstallOpenCRD serves the namespaced kind gvk (plural: its resource) with any content, as a
// CRD whose schema keeps unknown fields, and waits until the API server lists it: for a kind
// of another project that the code reads as unstructured (etcd-druid's Etcd).
func InstallOpenCRD(ctx context.Context, t testing.TB, c client.Client, gvk schema.GroupVersionKind, plural string) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + gvk.Group},
		"spec": map[string]any{
			"group": gvk.Group, "scope": "Namespaced",
			"names": map[string]any{"kind": gvk.Kind, "plural": plural, "singular": strings.ToLower(gvk.Kind), "listKind": gvk.Kind + "List"},
			"versions": []any{map[string]any{"name": gvk.Version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := c.List(ctx, list)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the %s CRD is not served: %v", gvk.Kind, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
