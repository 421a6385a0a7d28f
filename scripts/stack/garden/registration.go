package garden

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	gardencorev1 "github.com/gardener/gardener/pkg/apis/core/v1"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	"github.com/gardener/gardener/pkg/client/kubernetes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// RegistrationFile is housekeeper's ControllerRegistration and ControllerDeployment, relative to
// the repository's root.
const RegistrationFile = "infra/gardener/controller-registration.yaml"

// ReadRegistration decodes RegistrationFile with the garden's scheme, the chart inline: no OCI
// registry serves it here, so it travels in the ControllerDeployment as helm.rawChart (the chart
// of this checkout, chart.Archive) in place of helm.ociRepository.
func ReadRegistration() (*gardencorev1beta1.ControllerRegistration, *gardencorev1.ControllerDeployment, error) {
	root, err := stack.RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	reg, dep, err := DecodeRegistration(filepath.Join(root, RegistrationFile))
	if err != nil {
		return nil, nil, err
	}
	archive, err := chart.Archive()
	if err != nil {
		return nil, nil, err
	}
	dep.Helm.OCIRepository, dep.Helm.RawChart = nil, archive
	return reg, dep, nil
}

// DecodeRegistration decodes a registration file (RegistrationFile, or one `make release` wrote)
// with the garden's scheme, as it is: its chart where the file says.
func DecodeRegistration(file string) (*gardencorev1beta1.ControllerRegistration, *gardencorev1.ControllerDeployment, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	decoder := serializer.NewCodecFactory(kubernetes.GardenScheme).UniversalDeserializer()
	var reg *gardencorev1beta1.ControllerRegistration
	var dep *gardencorev1.ControllerDeployment
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", file, err)
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", file, err)
		}
		switch o := obj.(type) {
		case *gardencorev1beta1.ControllerRegistration:
			reg = o
		case *gardencorev1.ControllerDeployment:
			dep = o
		default:
			return nil, nil, fmt.Errorf("%s: unexpected %T", file, obj)
		}
	}
	if reg == nil || dep == nil || dep.Helm == nil {
		return nil, nil, fmt.Errorf("%s lacks the registration or the deployment's helm section", file)
	}
	return reg, dep, nil
}

// NATSIdentitiesName is the garden Secret housekeeper's ControllerDeployment references
// (resources: nats) for the NATS identities of every seed's installation.
const NATSIdentitiesName = "housekeeper-nats"

// NATSIdentities is that Secret in the garden namespace, with data (`housekeeper nats-auth`'s
// <out>/garden: a key per identity, and ca) and the label gardener requires of a referenced
// resource (gardener.cloud/role: resource-reference).
func NATSIdentities(data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: NATSIdentitiesName, Namespace: Namespace,
			Labels: map[string]string{v1beta1constants.GardenRole: v1beta1constants.GardenRoleResourceReference}},
		Data: data,
	}
}

// PlaceholderNATSIdentities is NATSIdentities with a placeholder per key (identities and ca),
// for a garden whose seeds run no workload: the chart renders from it, nothing connects.
func PlaceholderNATSIdentities(identities []string) *corev1.Secret {
	data := map[string][]byte{"ca": []byte("placeholder CA")}
	for _, id := range identities {
		data[id] = []byte("placeholder credentials of " + id)
	}
	return NATSIdentities(data)
}
