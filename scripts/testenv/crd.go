package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
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

// DeleteCRD deletes the CRD name and waits until the API server no longer has it; it returns
// the CRD as it was, for RestoreCRD.
func DeleteCRD(ctx context.Context, t testing.TB, cfg *rest.Config, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	c := crdClient(t, cfg)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 30*time.Second, "CRD "+name+" is gone", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	return crd
}

// RestoreCRD creates crd, as DeleteCRD returned it, again.
func RestoreCRD(ctx context.Context, t testing.TB, cfg *rest.Config, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	crd = crd.DeepCopy()
	crd.ResourceVersion, crd.UID, crd.CreationTimestamp, crd.Status = "", "", metav1.Time{}, apiextensionsv1.CustomResourceDefinitionStatus{}
	if err := crdClient(t, cfg).Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
}

func crdClient(t testing.TB, cfg *rest.Config) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
