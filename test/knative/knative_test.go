package knative_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"knative.dev/pkg/apis"
	"knative.dev/pkg/configmap"
	"knative.dev/pkg/webhook"
	"knative.dev/pkg/webhook/resourcesemantics"
	"knative.dev/pkg/webhook/resourcesemantics/defaulting"
	"knative.dev/pkg/webhook/resourcesemantics/validation"

	// The fakes of the clients and informers Knative's admission controllers get by injection.
	_ "knative.dev/pkg/client/injection/kube/client/fake"
	_ "knative.dev/pkg/client/injection/kube/informers/admissionregistration/v1/mutatingwebhookconfiguration/fake"
	_ "knative.dev/pkg/client/injection/kube/informers/admissionregistration/v1/validatingwebhookconfiguration/fake"
	_ "knative.dev/pkg/injection/clients/namespacedkube/informers/core/v1/secret/fake"
	_ "knative.dev/pkg/system/testing"

	logtesting "knative.dev/pkg/logging/testing"
	rtesting "knative.dev/pkg/reconciler/testing"

	autoscalingv1alpha1 "knative.dev/serving/pkg/apis/autoscaling/v1alpha1"
	apisconfig "knative.dev/serving/pkg/apis/config"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	cfgresources "knative.dev/serving/pkg/reconciler/configuration/resources"
	revconfig "knative.dev/serving/pkg/reconciler/revision/config"
	revresources "knative.dev/serving/pkg/reconciler/revision/resources"
	svcresources "knative.dev/serving/pkg/reconciler/service/resources"
	extravalidation "knative.dev/serving/pkg/webhook"
)

// The modules whose released configuration the tests read: Knative Serving's, pinned by go.mod
// (the version infra/manifests_test.go takes the CRDs from), and its networking's.
const (
	servingModule    = "knative.dev/serving"
	networkingModule = "knative.dev/networking"
	// knativeNamespace is where Knative Serving runs (its released manifests').
	knativeNamespace = "knative-serving"
)

// The resources Knative's webhook (cmd/webhook) defaults and validates, and its extra callbacks.
var (
	webhookTypes = map[schema.GroupVersionKind]resourcesemantics.GenericCRD{
		servingv1.SchemeGroupVersion.WithKind("Revision"):      &servingv1.Revision{},
		servingv1.SchemeGroupVersion.WithKind("Configuration"): &servingv1.Configuration{},
		servingv1.SchemeGroupVersion.WithKind("Route"):         &servingv1.Route{},
		servingv1.SchemeGroupVersion.WithKind("Service"):       &servingv1.Service{},
	}
	callbacks = map[schema.GroupVersionKind]validation.Callback{
		servingv1.SchemeGroupVersion.WithKind("Service"):       validation.NewCallback(extravalidation.ValidateService, webhook.Create, webhook.Update),
		servingv1.SchemeGroupVersion.WithKind("Configuration"): validation.NewCallback(extravalidation.ValidateConfiguration, webhook.Create, webhook.Update),
	}
)

// cluster is Knative Serving as configured in a cluster: its ConfigMaps, the config stores its
// webhook and revision reconciler build from them, and its webhook's admission controllers.
type cluster struct {
	apis       *apisconfig.Store
	revision   *revconfig.Store
	defaulting webhook.AdmissionController
	validation webhook.AdmissionController
}

// newCluster is Knative Serving with its released ConfigMaps, config-features overlaid with
// features (flag: state).
func newCluster(t *testing.T, features map[string]string) *cluster {
	t.Helper()
	cms := releasedConfigMaps(t)
	for _, cm := range cms {
		if cm.Name == apisconfig.FeaturesConfigName {
			for k, v := range features {
				cm.Data[k] = v
			}
		}
	}
	watcher := configmap.NewStaticWatcher(cms...)
	logger := logtesting.TestLogger(t)
	c := &cluster{apis: apisconfig.NewStore(logger), revision: revconfig.NewStore(logger)}
	c.apis.WatchConfigs(watcher)
	c.revision.WatchConfigs(watcher)
	if err := watcher.Start(nil); err != nil {
		t.Fatal(err)
	}

	// As cmd/webhook builds them, over fake clients (they only reconcile webhook configurations
	// and certificates, which Admit does not touch).
	ctx, _ := rtesting.SetupFakeContext(t)
	ctx = webhook.WithOptions(ctx, webhook.Options{ServiceName: "webhook", Port: 8443, SecretName: "webhook-certs"})
	c.defaulting = defaulting.NewAdmissionController(ctx, "webhook.serving.knative.dev", "/defaulting",
		webhookTypes, c.apis.ToContext, false).Reconciler.(webhook.AdmissionController)
	c.validation = validation.NewAdmissionController(ctx, "validation.webhook.serving.knative.dev", "/resource-validation",
		webhookTypes, c.apis.ToContext, false, callbacks).Reconciler.(webhook.AdmissionController)
	return c
}

// admission is what Knative's webhook answered to the creation of an object.
type admission struct {
	// Refused is the message of the refusal ("" when admitted): Knative's own words, as
	// kubectl would print them after "admission webhook ... denied the request:".
	Refused  string
	Warnings []string
	// Object is the object as stored: defaulted by Knative's mutating webhook.
	Object []byte
}

// admit sends the creation of u through Knative's defaulting then validating webhook, as the
// API server would (by a gardenlet-like user).
func (c *cluster) admit(t *testing.T, u *unstructured.Unstructured) admission {
	t.Helper()
	gvk := u.GroupVersionKind()
	raw := asJSON(t, u)
	req := &admissionv1.AdmissionRequest{
		UID:       "housekeeper-test",
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:  metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: strings.ToLower(gvk.Kind) + "s"},
		Name:      u.GetName(),
		Namespace: u.GetNamespace(),
		Operation: admissionv1.Create,
		UserInfo:  authenticationv1.UserInfo{Username: "system:serviceaccount:garden:gardenlet"},
		Object:    runtime.RawExtension{Raw: raw},
	}
	ctx := logtesting.TestContextWithLogger(t)
	var out admission
	resp := c.defaulting.Admit(ctx, req)
	out.Warnings = append(out.Warnings, resp.Warnings...)
	if !resp.Allowed {
		out.Refused = "defaulting: " + message(resp)
		return out
	}
	if len(resp.Patch) > 0 {
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			t.Fatalf("Knative's defaulting patch: %v", err)
		}
		if raw, err = patch.Apply(raw); err != nil {
			t.Fatalf("applying Knative's defaulting patch: %v", err)
		}
	}
	req.Object.Raw = raw
	resp = c.validation.Admit(ctx, req)
	out.Warnings = append(out.Warnings, resp.Warnings...)
	if !resp.Allowed {
		out.Refused = message(resp)
		return out
	}
	out.Object = raw
	return out
}

func message(resp *admissionv1.AdmissionResponse) string {
	if resp.Result == nil {
		return "(no message)"
	}
	return resp.Result.Message
}

// derived is what Knative's controllers make of an admitted Service.
type derived struct {
	Service       *servingv1.Service
	Revision      *servingv1.Revision
	Deployment    *appsv1.Deployment
	PodAutoscaler *autoscalingv1alpha1.PodAutoscaler
}

// derive runs Knative's controllers' builders on an admitted Service: the Service reconciler's
// Configuration, the Configuration reconciler's first Revision (through the webhook's defaulting,
// as the API server stores it), the Revision reconciler's Deployment and PodAutoscaler.
func (c *cluster) derive(t *testing.T, admitted []byte) derived {
	t.Helper()
	var d derived
	d.Service = &servingv1.Service{}
	if err := json.Unmarshal(admitted, d.Service); err != nil {
		t.Fatal(err)
	}
	cfg := svcresources.MakeConfiguration(d.Service)
	cfg.Generation = 1
	ctx := c.revision.ToContext(context.Background())
	d.Revision = cfgresources.MakeRevision(ctx, cfg, time.Unix(0, 0))
	d.Revision.SetDefaults(apis.WithinCreate(c.apis.ToContext(context.Background())))
	if err := d.Revision.Validate(apis.WithinCreate(c.apis.ToContext(context.Background()))); err != nil {
		t.Errorf("Knative refuses the Revision it derives from %s: %v", d.Service.Name, err)
	}
	var err error
	if d.Deployment, err = revresources.MakeDeployment(d.Revision, c.revision.Load()); err != nil {
		t.Fatalf("Knative's revision reconciler cannot make the Deployment of %s: %v", d.Revision.Name, err)
	}
	d.PodAutoscaler = revresources.MakePA(d.Revision, d.Deployment)
	return d
}

var modDirs sync.Map // module path → directory

// moduleDir is the directory of a module of this module's build list (go list -m).
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	if dir, ok := modDirs.Load(module); ok {
		return dir.(string)
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	modDirs.Store(module, dir)
	return dir
}

// releasedConfigMaps are the ConfigMaps Knative Serving's release installs in knative-serving,
// the ones its webhook and revision reconciler read: config-features, config-defaults,
// config-autoscaler, config-deployment, config-logging, config-observability (Knative Serving's
// config/core/configmaps) and config-network (Knative networking's config).
func releasedConfigMaps(t *testing.T) []*corev1.ConfigMap {
	t.Helper()
	serving := filepath.Join(moduleDir(t, servingModule), "config/core/configmaps")
	files := []string{
		filepath.Join(serving, "features.yaml"), filepath.Join(serving, "defaults.yaml"), filepath.Join(serving, "autoscaler.yaml"),
		filepath.Join(serving, "deployment.yaml"), filepath.Join(serving, "logging.yaml"), filepath.Join(serving, "observability.yaml"),
		filepath.Join(moduleDir(t, networkingModule), "config/config-network.yaml"),
	}
	var cms []*corev1.ConfigMap
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range decode(t, f, data) {
			if u.GetKind() != "ConfigMap" {
				continue
			}
			cm := &corev1.ConfigMap{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cm); err != nil {
				t.Fatal(err)
			}
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cms = append(cms, cm)
		}
	}
	return cms
}

// releasedPodLabels are the pod labels of a Deployment of Knative Serving's release
// (config/core/deployments/<name>.yaml): who sends traffic to the functions' pods.
func releasedPodLabels(t *testing.T, name string) map[string]string {
	t.Helper()
	f := filepath.Join(moduleDir(t, servingModule), "config/core/deployments", name+".yaml")
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range decode(t, f, data) {
		if u.GetKind() == "Deployment" && u.GetName() == name {
			labels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
			if u.GetNamespace() != knativeNamespace || len(labels) == 0 {
				t.Fatalf("%s: Deployment %s/%s without pod labels", f, u.GetNamespace(), name)
			}
			return labels
		}
	}
	t.Fatalf("%s: no Deployment %s", f, name)
	return nil
}
