package infra_test

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	gardencorev1 "github.com/gardener/gardener/pkg/apis/core/v1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	chartutils "github.com/gardener/gardener/pkg/utils/chart"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/garden"
)

// registryConfig is a Docker config JSON, as `kubectl create secret docker-registry` writes it.
const registryConfig = `{"auths":{"registry.example.com":{"username":"robot","password":"s3cret","auth":"cm9ib3Q6czNjcmV0"}}}`

// A registry that requires a login: every pod the chart renders — the bridge, the setup Job,
// each function (a Deployment KEDA scales, or a Knative Service) and the forwarder — names the
// Secrets of imagePullSecrets and the one the chart makes from image.pullCredentials, in the
// hand-installed renderings and as gardenlet installs it with the credentials substituted from a
// garden Secret as infra/docs/deploy.md ("Private registries") has the operator create it. Without
// either value no pod names any and no Secret is rendered; what is not a Docker config is refused.
func TestEveryPodPullsWithTheGivenCredentials(t *testing.T) {
	want := []any{map[string]any{"name": "registry"}, map[string]any{"name": "housekeeper-image-pull"}}
	check := func(t *testing.T, ns string, values map[string]any, want []any) {
		t.Helper()
		r, err := chart.Render(ns, values, kubeVersion(t))
		if err != nil {
			t.Fatal(err)
		}
		pods, secret := 0, (*unstructured.Unstructured)(nil)
		for _, u := range decodeYAMLBytes(t, ns, r.Manifest()) {
			if u.GetKind() == "Secret" && u.GetName() == "housekeeper-image-pull" {
				secret = u
			}
			path := podSpecPath(u)
			if path == nil {
				continue
			}
			pods++
			got, _, _ := unstructured.NestedSlice(u.Object, append(path, "imagePullSecrets")...)
			if !reflect.DeepEqual(got, want) && (len(got) != 0 || len(want) != 0) {
				t.Errorf("%s %s: imagePullSecrets %v, want %v", u.GetKind(), u.GetName(), got, want)
			}
		}
		if pods < 3 {
			t.Fatalf("%d pod templates rendered: not the chart's workloads", pods)
		}
		if len(want) == 0 {
			if secret != nil {
				t.Error("renders housekeeper-image-pull without image.pullCredentials")
			}
			return
		}
		if secret == nil {
			t.Fatal("does not render the Secret housekeeper-image-pull")
		}
		typ, _, _ := unstructured.NestedString(secret.Object, "type")
		data, _, _ := unstructured.NestedString(secret.Object, "data", corev1.DockerConfigJsonKey)
		config, _ := base64.StdEncoding.DecodeString(data)
		if typ != string(corev1.SecretTypeDockerConfigJson) || string(config) != registryConfig || secret.GetNamespace() != ns {
			t.Errorf("Secret %s/housekeeper-image-pull: type %q, %s %q; want %s, the credentials given", secret.GetNamespace(), typ, corev1.DockerConfigJsonKey, config, corev1.SecretTypeDockerConfigJson)
		}
	}
	withCredentials := func(values map[string]any) map[string]any {
		values["imagePullSecrets"] = []any{map[string]any{"name": "registry"}}
		values["image"] = map[string]any{"pullCredentials": registryConfig}
		return values
	}
	for _, name := range []string{"keda", "knative", withoutEtcdBackups} {
		t.Run(name, func(t *testing.T) {
			ns, values := variant(t, name)
			check(t, ns, withCredentials(values), want)
			delete(values, "imagePullSecrets")
			delete(values, "image")
			check(t, ns, values, nil)
		})
	}

	t.Run("gardenlet", func(t *testing.T) {
		// The ControllerDeployment as infra/docs/deploy.md extends it: the garden Secret housekeeper-registry
		// referenced, its key dockerconfigjson substituted into image.pullCredentials.
		_, dep := registration(t)
		var values map[string]any
		if err := json.Unmarshal(dep.Helm.Values.Raw, &values); err != nil {
			t.Fatal(err)
		}
		values["image"] = map[string]any{"pullCredentials": "{{ .resources.registry.data.dockerconfigjson }}"}
		refs := append(dep.Resources, gardencorev1.NamedResourceReference{Name: "registry",
			ResourceRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "v1", Kind: "Secret", Name: "housekeeper-registry"}})
		issued, err := gardenIdentities()
		if err != nil {
			t.Fatal(err)
		}
		registry := &corev1.Secret{}
		registry.Name, registry.Namespace = "housekeeper-registry", garden.Namespace
		registry.Labels = map[string]string{v1beta1constants.GardenRole: v1beta1constants.GardenRoleResourceReference}
		registry.Data = map[string][]byte{"dockerconfigjson": []byte(registryConfig)}
		objs := []client.Object{gardenSecretFromNATSAuth(t, issued), registry}
		rendered, err := chartutils.RenderHelmValues(t.Context(), fake.NewClientBuilder().WithObjects(objs...).Build(), values, garden.Namespace, refs)
		if err != nil {
			t.Fatalf("gardenlet's substitution: %v", err)
		}
		rendered["gardener"] = map[string]any{"seed": map[string]any{"name": gardenerSeed}}
		check(t, "extension-housekeeper-3c7a1", rendered, want[1:])
	})

	t.Run("refused", func(t *testing.T) {
		ns, values := variant(t, "keda")
		values["image"] = map[string]any{"pullCredentials": "robot:s3cret"}
		if _, err := chart.Render(ns, values, kubeVersion(t)); err == nil || !strings.Contains(err.Error(), "image.pullCredentials is not a Docker config JSON") {
			t.Errorf("image.pullCredentials robot:s3cret: %v, want refused, named", err)
		}
		values["image"] = map[string]any{}
		values["imagePullSecrets"] = []any{"registry"}
		if _, err := chart.Render(ns, values, kubeVersion(t)); err == nil || !strings.Contains(err.Error(), "imagePullSecrets") {
			t.Errorf("imagePullSecrets [registry]: %v, want refused, named", err)
		}
	})
}
