package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	gardencorev1 "github.com/gardener/gardener/pkg/apis/core/v1"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	operatorv1alpha1 "github.com/gardener/gardener/pkg/apis/operator/v1alpha1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/yaml"
)

// ExtensionFile is the shipped Extension for gardener-operator, relative to the repository's
// root: the registration of a landscape gardener-operator runs, and the install path into the
// garden runtime cluster.
const ExtensionFile = "infra/gardener/extension.yaml"

// RuntimePriorityClassName is the priority class gardener-operator gives an extension in the
// garden runtime cluster (gardener v1.150: v1beta1constants.PriorityClassNameGardenSystem200, in
// pkg/operator/controller/extension/extension/runtime).
const RuntimePriorityClassName = "gardener-garden-system-200"

// RuntimeValues are the values gardener-operator renders the chart with in the garden runtime
// cluster: the Extension's runtimeClusterValues and what it merges into them,
// gardener.runtimeCluster (enabled, a string there, and the priority class). test/conformance
// (TestGardenRuntime) runs gardener-operator's own controller, which renders them itself.
func RuntimeValues(ext *operatorv1alpha1.Extension) (map[string]any, error) {
	values := map[string]any{}
	if d := ext.Spec.Deployment; d != nil && d.ExtensionDeployment != nil && d.ExtensionDeployment.RuntimeClusterValues != nil {
		if err := json.Unmarshal(d.ExtensionDeployment.RuntimeClusterValues.Raw, &values); err != nil {
			return nil, fmt.Errorf("the Extension's runtimeClusterValues: %w", err)
		}
	}
	gardener, _ := values["gardener"].(map[string]any)
	gardener = maps.Clone(gardener)
	if gardener == nil {
		gardener = map[string]any{}
	}
	gardener["runtimeCluster"] = map[string]any{"enabled": "true", "priorityClassName": RuntimePriorityClassName}
	values["gardener"] = gardener
	return values, nil
}

// operatorScheme decodes gardener-operator's Extension.
var operatorScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := operatorv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// DecodeExtension decodes an Extension (its YAML) into gardener-operator's type, strictly (an
// unknown or duplicate field is an error): exactly one operator.gardener.cloud/v1alpha1
// Extension whose spec.deployment.extension has a chart in an OCI repository, values (the
// seeds') and runtimeClusterValues (the garden runtime cluster's).
func DecodeExtension(data []byte) (*operatorv1alpha1.Extension, error) {
	docs, err := splitYAML(data)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("%d documents, want one Extension", len(docs))
	}
	obj, gvk, err := serializer.NewCodecFactory(operatorScheme, serializer.EnableStrict).UniversalDeserializer().Decode(docs[0], nil, nil)
	if err != nil {
		return nil, err
	}
	ext, ok := obj.(*operatorv1alpha1.Extension)
	if !ok {
		return nil, fmt.Errorf("unexpected %s, want an operator.gardener.cloud/v1alpha1 Extension", gvk)
	}
	switch d := ext.Spec.Deployment; {
	case d == nil || d.ExtensionDeployment == nil || d.ExtensionDeployment.Helm == nil || d.ExtensionDeployment.Helm.OCIRepository == nil:
		return nil, errors.New("the Extension has no spec.deployment.extension.helm.ociRepository")
	case d.ExtensionDeployment.Values == nil:
		return nil, errors.New("the Extension has no spec.deployment.extension.values (the seeds')")
	case d.ExtensionDeployment.RuntimeClusterValues == nil:
		return nil, errors.New("the Extension has no spec.deployment.extension.runtimeClusterValues (the garden runtime cluster's)")
	}
	return ext, nil
}

// WriteExtension is the shipped Extension (shipped: its YAML) for r: as it is but
// spec.deployment.extension, whose chart is r.ChartRef (an Extension has no inline chart) and
// whose values and runtimeClusterValues are the shipped ones with image.registry, image.tag and
// image.digests r's.
func (r Registration) WriteExtension(shipped []byte) ([]byte, error) {
	if r.ChartRef == "" {
		return nil, errors.New("an Extension takes its chart from an OCI repository only: no chart reference")
	}
	docs, err := splitYAML(shipped)
	if err != nil || len(docs) != 1 {
		return nil, fmt.Errorf("%s: want one document (%v)", ExtensionFile, err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(docs[0], &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", ExtensionFile, err)
	}
	spec, _ := obj["spec"].(map[string]any)
	deployment, _ := spec["deployment"].(map[string]any)
	ext, _ := deployment["extension"].(map[string]any)
	if ext == nil {
		return nil, fmt.Errorf("%s: no spec.deployment.extension", ExtensionFile)
	}
	ext["helm"] = map[string]any{"ociRepository": map[string]any{"ref": r.ChartRef}}
	for _, key := range []string{"values", "runtimeClusterValues"} {
		values, ok := ext[key].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: no spec.deployment.extension.%s", ExtensionFile, key)
		}
		r.setImage(values)
	}
	data, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# housekeeper %s for gardener-operator: written by `make release` (scripts/release)\n", r.Version)
	fmt.Fprintf(&b, "# from %s, whose values it keeps.\n", ExtensionFile)
	fmt.Fprintf(&b, "# The chart: %s (the digest wins over the tag).\n", r.ChartRef)
	fmt.Fprintf(&b, "# The images: %s/<name>, pinned by digest (image.digests win over image.tag %s).\n", r.Registry, r.Tag)
	b.WriteString("# Apply it in the garden runtime cluster, in place of the registration (README.md, \"Deploy into a\n")
	b.WriteString("# Gardener landscape\"); keep `types` in both values equal to the resources' types.\n")
	return append([]byte(b.String()), data...), nil
}

// setImage sets image.registry, image.tag and image.digests of values to r's.
func (r Registration) setImage(values map[string]any) {
	image, _ := values["image"].(map[string]any)
	image = maps.Clone(image)
	if image == nil {
		image = map[string]any{}
	}
	image["registry"] = r.Registry
	image["tag"] = r.Tag
	digests := map[string]any{}
	for _, n := range slices.Sorted(maps.Keys(r.Digests)) {
		digests[n] = r.Digests[n]
	}
	image["digests"] = digests
	values["image"] = image
}

// VerifyExtension checks an Extension (its YAML) the way gardener-operator would use it: it
// decodes strictly (DecodeExtension); the ControllerRegistration and ControllerDeployment
// gardener-operator writes from it into the virtual garden (ControllerRegistrationFor) hold as
// Verify checks a registration, against the
// registry; and the chart, rendered for the garden runtime cluster (runtimeClusterValues and
// RuntimeValues' additions), runs only images Verify found, by digest. The Verified is the
// seeds' registration's.
func VerifyExtension(ctx context.Context, data []byte, kubeVersion string, opts ...remote.Option) (*Verified, error) {
	ext, err := DecodeExtension(data)
	if err != nil {
		return nil, fmt.Errorf("the Extension: %w", err)
	}
	if len(ext.Spec.Deployment.ExtensionDeployment.Helm.OCIRepository.GetURL()) == 0 {
		return nil, errors.New("the Extension's helm.ociRepository names no chart")
	}
	reg, dep := ControllerRegistrationFor(ext)
	var registration []byte
	for i, obj := range []any{reg, dep} {
		doc, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			registration = append(registration, "---\n"...)
		}
		registration = append(registration, doc...)
	}
	v, err := Verify(ctx, registration, kubeVersion, opts...)
	if err != nil {
		return nil, fmt.Errorf("the registration gardener-operator writes from it for the seeds: %w", err)
	}
	values, err := RuntimeValues(ext)
	if err != nil {
		return nil, err
	}
	manifest, err := renderChart(v.Chart, values, RuntimeNamespace, kubeVersion)
	if err != nil {
		return nil, fmt.Errorf("the chart with the runtimeClusterValues: %w", err)
	}
	images := ContainerImages(manifest)
	if len(images) == 0 {
		return nil, errors.New("the chart renders no container with the runtimeClusterValues")
	}
	var problems []error
	for _, img := range images {
		if !slices.Contains(v.Images, img) {
			problems = append(problems, fmt.Errorf("in the garden runtime cluster the chart runs the image %s, which the seeds' values do not (checked there: pinned by digest, served, labelled with the release)", img))
		}
	}
	return v, errors.Join(problems...)
}

// RuntimeNamespace is where gardener-operator installs the Extension housekeeper in the garden
// runtime cluster (gardener's operator.ExtensionRuntimeNamespaceName; infra's test compares).
const RuntimeNamespace = "runtime-extension-housekeeper"

// ControllerRegistrationFor is the ControllerRegistration and ControllerDeployment
// gardener-operator writes into the virtual garden for ext, as gardener v1.150's
// pkg/utils/gardener/operator.ControllerRegistrationForExtension builds them for a resource of
// a backup kind (infra's test compares the two). That package is not imported here: it registers
// a global flag -version, which the release command's own would then redefine.
func ControllerRegistrationFor(ext *operatorv1alpha1.Extension) (*gardencorev1beta1.ControllerRegistration, *gardencorev1.ControllerDeployment) {
	d := ext.Spec.Deployment.ExtensionDeployment
	dep := &gardencorev1.ControllerDeployment{
		TypeMeta:               metav1.TypeMeta{APIVersion: "core.gardener.cloud/v1", Kind: "ControllerDeployment"},
		ObjectMeta:             metav1.ObjectMeta{Name: ext.Name},
		Helm:                   &gardencorev1.HelmControllerDeployment{Values: d.Values, OCIRepository: d.Helm.OCIRepository},
		InjectGardenKubeconfig: d.InjectGardenKubeconfig,
	}
	reg := &gardencorev1beta1.ControllerRegistration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "core.gardener.cloud/v1beta1", Kind: "ControllerRegistration"},
		ObjectMeta: metav1.ObjectMeta{Name: ext.Name},
		Spec: gardencorev1beta1.ControllerRegistrationSpec{
			Resources: ext.Spec.Resources,
			Deployment: &gardencorev1beta1.ControllerRegistrationDeployment{
				Policy: d.Policy, SeedSelector: d.SeedSelector, DeploymentRefs: []gardencorev1beta1.DeploymentRef{{Name: dep.Name}},
			},
		},
	}
	return reg, dep
}
