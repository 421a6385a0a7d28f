package release

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	gardencorev1 "github.com/gardener/gardener/pkg/apis/core/v1"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// RegistrationFile is the shipped registration, relative to the repository's root: the
// ControllerRegistration and the ControllerDeployment whose values a release keeps.
const RegistrationFile = "infra/gardener/controller-registration.yaml"

// Registration is what a release puts into the shipped registration.
type Registration struct {
	Version string
	// Registry and Tag are the chart's image.registry and image.tag (v<Version>); Digests its
	// image.digests, by image name, which the chart prefers to the tag.
	Registry, Tag string
	Digests       map[string]string
	// ChartRef is helm.ociRepository.ref (repository:version@digest); when empty, Chart (the
	// .tgz) goes inline as helm.rawChart instead.
	ChartRef string
	Chart    []byte
}

// Write is the shipped registration (shipped: its YAML) for r: every document as it is but the
// ControllerDeployment's helm section, whose chart is r's (ociRepository.ref or rawChart) and
// whose values are the shipped ones with image.registry, image.tag and image.digests set.
func (r Registration) Write(shipped []byte) ([]byte, error) {
	docs, err := splitYAML(shipped)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", RegistrationFile, err)
	}
	var out bytes.Buffer
	out.WriteString(r.header())
	deployments := 0
	for i, doc := range docs {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", RegistrationFile, i+1, err)
		}
		if obj["kind"] == "ControllerDeployment" {
			deployments++
			if err := r.setHelm(obj); err != nil {
				return nil, fmt.Errorf("%s: the ControllerDeployment: %w", RegistrationFile, err)
			}
		}
		data, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(data)
	}
	if deployments != 1 {
		return nil, fmt.Errorf("%s holds %d ControllerDeployments, want one", RegistrationFile, deployments)
	}
	return out.Bytes(), nil
}

func (r Registration) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# housekeeper %s, registered for the garden cluster: written by `make release`\n", r.Version)
	fmt.Fprintf(&b, "# (scripts/release) from %s, whose values it keeps.\n", RegistrationFile)
	if r.ChartRef != "" {
		fmt.Fprintf(&b, "# The chart: %s (helm.ociRepository.ref,\n# the digest wins over the tag).\n", r.ChartRef)
	} else {
		b.WriteString("# The chart inline (helm.rawChart, the .tgz in base64), for a landscape without a chart registry.\n")
	}
	fmt.Fprintf(&b, "# The images: %s/<name>, pinned by digest (image.digests win over image.tag %s).\n", r.Registry, r.Tag)
	b.WriteString("# Apply it in the garden cluster once the provider extension stopped being primary for the\n")
	b.WriteString("# backup kinds (infra/docs/deploy.md, \"Deploy into a Gardener landscape\"); keep `types` in the values\n")
	b.WriteString("# equal to the ControllerRegistration's resources' types.\n")
	return b.String()
}

func (r Registration) setHelm(obj map[string]any) error {
	helm, ok := obj["helm"].(map[string]any)
	if !ok {
		return errors.New("no helm section")
	}
	values, ok := helm["values"].(map[string]any)
	if !ok {
		return errors.New("no helm.values")
	}
	r.setImage(values)
	delete(helm, "ociRepository")
	delete(helm, "rawChart")
	switch {
	case r.ChartRef != "":
		helm["ociRepository"] = map[string]any{"ref": r.ChartRef}
	case len(r.Chart) > 0:
		helm["rawChart"] = base64.StdEncoding.EncodeToString(r.Chart)
	default:
		return errors.New("neither a chart reference nor a chart to put inline")
	}
	return nil
}

// gardenScheme decodes the garden's objects of a registration.
var gardenScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{gardencorev1.AddToScheme, gardencorev1beta1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// DecodeRegistration decodes a registration into gardener's types, strictly (an unknown or
// duplicate field is an error), as gardener-apiserver would take it: exactly one
// core.gardener.cloud/v1beta1 ControllerRegistration and one core.gardener.cloud/v1
// ControllerDeployment with a helm section and values.
func DecodeRegistration(data []byte) (*gardencorev1beta1.ControllerRegistration, *gardencorev1.ControllerDeployment, error) {
	docs, err := splitYAML(data)
	if err != nil {
		return nil, nil, err
	}
	decoder := serializer.NewCodecFactory(gardenScheme, serializer.EnableStrict).UniversalDeserializer()
	var reg *gardencorev1beta1.ControllerRegistration
	var dep *gardencorev1.ControllerDeployment
	for i, doc := range docs {
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		switch o := obj.(type) {
		case *gardencorev1beta1.ControllerRegistration:
			if reg != nil {
				return nil, nil, errors.New("two ControllerRegistrations")
			}
			reg = o
		case *gardencorev1.ControllerDeployment:
			if dep != nil {
				return nil, nil, errors.New("two ControllerDeployments")
			}
			dep = o
		default:
			return nil, nil, fmt.Errorf("document %d: unexpected %s", i+1, gvk)
		}
	}
	switch {
	case reg == nil:
		return nil, nil, errors.New("no core.gardener.cloud/v1beta1 ControllerRegistration")
	case dep == nil:
		return nil, nil, errors.New("no core.gardener.cloud/v1 ControllerDeployment")
	case dep.Helm == nil || dep.Helm.Values == nil:
		return nil, nil, errors.New("the ControllerDeployment has no helm section with values")
	case reg.Spec.Deployment == nil || !slices.ContainsFunc(reg.Spec.Deployment.DeploymentRefs, func(r gardencorev1beta1.DeploymentRef) bool { return r.Name == dep.Name }):
		return nil, nil, fmt.Errorf("the ControllerRegistration %s does not refer to the ControllerDeployment %s", reg.Name, dep.Name)
	}
	return reg, dep, nil
}

// Values are the ControllerDeployment's helm values.
func Values(dep *gardencorev1.ControllerDeployment) (map[string]any, error) {
	var values map[string]any
	if err := json.Unmarshal(dep.Helm.Values.Raw, &values); err != nil {
		return nil, fmt.Errorf("the ControllerDeployment's values: %w", err)
	}
	return values, nil
}

// splitYAML is the non-empty documents of a YAML stream.
func splitYAML(data []byte) ([][]byte, error) {
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}
