package infra_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The chart's ValidatingAdmissionPolicy, created for real on a kube-apiserver, refuses a
// BackupEntry whose retention annotation is not a non-negative duration, at create and when the
// annotation is changed to such a value, with a message that names the annotation and the value;
// it takes every duration entry.Retention takes, and never blocks an object whose bad value
// predates it (its finalizers and status must still be writable).
func TestRetentionAdmissionPolicy(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	c := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	newEntry := func(name, retention string) *extensionsv1alpha1.BackupEntry {
		e := &extensionsv1alpha1.BackupEntry{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: extensionsv1alpha1.BackupEntrySpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "azure"}, BucketName: "bucket", Region: "westeurope",
				SecretRef: corev1.SecretReference{Name: "backup", Namespace: "garden"},
			},
		}
		if retention != "" {
			e.Annotations = map[string]string{entry.AnnotationRetention: retention}
		}
		return e
	}
	// Before the policy: an entry with a bad value, as an older installation may have.
	old := newEntry("shoot--dev--old--1a2b", "banana")
	if err := c.Create(ctx, old); err != nil {
		t.Fatal(err)
	}

	applied := 0
	for _, m := range render(t, "keda") {
		switch m.obj.GetKind() {
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			if m.obj.GetName() != "housekeeper-retention" {
				continue
			}
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(m.obj.DeepCopy()), fieldOwner, client.ForceOwnership); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
			applied++
		}
	}
	if applied != 2 {
		t.Fatalf("the chart renders %d admission objects, want the policy and its binding", applied)
	}

	// A policy takes effect asynchronously: wait until it refuses the first bad value.
	bad := newEntry("shoot--dev--bad--3c4d", "banana")
	var err error
	testenv.Eventually(t, 30*time.Second, "the policy refuses a bad retention", func() (bool, string) {
		err = c.Create(ctx, bad.DeepCopy())
		if err == nil {
			_ = c.Delete(ctx, bad.DeepCopy())
			return false, "still accepted"
		}
		return true, ""
	})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `housekeeper.dev/retention]: "banana" is not a non-negative duration`) {
		t.Errorf("a BackupEntry with retention banana: %v, want Invalid naming the annotation and the value", err)
	}
	for i, v := range []string{"-1h", "72", "1d", "", "3h-", " 1h"} {
		err := c.Create(ctx, newEntry("shoot--dev--bad--"+string(rune('a'+i)), v))
		if v == "" {
			// An empty value is set, and not a duration.
			err = c.Create(ctx, &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--empty", Annotations: map[string]string{entry.AnnotationRetention: ""}},
				Spec: newEntry("x", "").Spec})
		}
		if !apierrors.IsInvalid(err) {
			t.Errorf("retention %q: %v, want Invalid", v, err)
		}
	}
	for i, v := range []string{"72h", "0", "0s", "1h30m", "1.5h", "90m", "168h"} {
		good := newEntry("shoot--dev--good--"+string(rune('a'+i)), v)
		if err := c.Create(ctx, good); err != nil {
			t.Errorf("retention %q: %v, want it accepted", v, err)
			continue
		}
		if _, err := (entry.Retention{}).Of(good); err != nil {
			t.Errorf("retention %q: accepted by the policy, refused by the entry function: %v", v, err)
		}
	}

	// The old entry keeps working: a finalizer and a status write go through, its bad value
	// unchanged; changing it to another bad value is refused, to a good one accepted.
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), old); err != nil {
		t.Fatal(err)
	}
	old.Finalizers = append(old.Finalizers, "extensions.gardener.cloud/backupentry")
	if err := c.Update(ctx, old); err != nil {
		t.Errorf("updating an entry whose bad retention predates the policy: %v", err)
	}
	old.Annotations[entry.AnnotationRetention] = "apple"
	if err := c.Update(ctx, old); !apierrors.IsInvalid(err) {
		t.Errorf("changing a retention to another bad value: %v, want Invalid", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), old); err != nil {
		t.Fatal(err)
	}
	old.Annotations[entry.AnnotationRetention] = "24h"
	if err := c.Update(ctx, old); err != nil {
		t.Errorf("fixing a retention: %v", err)
	}
}

// The chart's policy for azure BackupBuckets refuses, on a real kube-apiserver, the
// providerConfig the bucket function would refuse, with the same words, and lets everything
// else (other types, no providerConfig, a finalizer on an object whose config predates it) pass.
func TestAzureBucketConfigAdmissionPolicy(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	c := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	newBucket := func(name, providerType, config string) *extensionsv1alpha1.BackupBucket {
		b := &extensionsv1alpha1.BackupBucket{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: extensionsv1alpha1.BackupBucketSpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: providerType}, Region: "westeurope",
				SecretRef: corev1.SecretReference{Name: "backup", Namespace: "garden"},
			},
		}
		if config != "" {
			b.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(config)}
		}
		return b
	}
	old := newBucket("old", "azure", `{"rotationConfig":{"rotationPeriodDays":1}}`)
	if err := c.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	applied := 0
	for _, m := range render(t, "keda") {
		if m.obj.GetName() == "housekeeper-azure-bucket-config" {
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(m.obj.DeepCopy()), fieldOwner, client.ForceOwnership); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
			applied++
		}
	}
	if applied != 2 {
		t.Fatalf("the chart renders %d objects named housekeeper-azure-bucket-config, want the policy and its binding", applied)
	}
	var err error
	testenv.Eventually(t, 30*time.Second, "the policy refuses a short rotation period", func() (bool, string) {
		b := newBucket("probe", "azure", `{"rotationConfig":{"rotationPeriodDays":1}}`)
		if err = c.Create(ctx, b); err == nil {
			_ = c.Delete(ctx, b)
			return false, "still accepted"
		}
		return true, ""
	})
	for i, tc := range []struct{ config, mention string }{
		{`{"rotationConfig":{"rotationPeriodDays":1}}`, "rotationPeriodDays: must be at least 2"},
		{`{"rotationConfig":{"rotationPeriodDays":7,"expirationPeriodDays":7}}`, "expirationPeriodDays: must be greater"},
		{`{"cloudConfiguration":{"name":"AzureMars"}}`, "cloudConfiguration.name: must be one of"},
	} {
		err := c.Create(ctx, newBucket(fmt.Sprintf("bad-%d", i), "azure", tc.config))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("providerConfig %s: %v, want Invalid mentioning %q", tc.config, err, tc.mention)
		}
	}
	for i, tc := range []struct{ providerType, config string }{
		{"azure", ""},
		{"azure", `{"rotationConfig":{"rotationPeriodDays":2,"expirationPeriodDays":3}}`},
		{"azure", `{"cloudConfiguration":{"name":"azurechina"}}`},
		{"azure", `{"immutability":{"retentionType":"bucket","retentionPeriod":"24h","locked":true}}`},
		{"aws", `{"rotationConfig":{"rotationPeriodDays":1}}`},
	} {
		if err := c.Create(ctx, newBucket(fmt.Sprintf("good-%d", i), tc.providerType, tc.config)); err != nil {
			t.Errorf("%s providerConfig %q: %v, want it accepted", tc.providerType, tc.config, err)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), old); err != nil {
		t.Fatal(err)
	}
	old.Finalizers = append(old.Finalizers, "extensions.gardener.cloud/backupbucket")
	if err := c.Update(ctx, old); err != nil {
		t.Errorf("a finalizer on a bucket whose config predates the policy: %v", err)
	}
}

// The chart's policy for gcp BackupBuckets and BackupEntries refuses, on a real kube-apiserver,
// the providerConfig the gcs provider refuses, and lets the upstream shape and other types pass.
func TestGCPBucketConfigAdmissionPolicy(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	c := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	newBucket := func(name, providerType, config string) *extensionsv1alpha1.BackupBucket {
		return &extensionsv1alpha1.BackupBucket{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: extensionsv1alpha1.BackupBucketSpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: providerType, ProviderConfig: &runtime.RawExtension{Raw: []byte(config)}},
				Region:      "europe-west1", SecretRef: corev1.SecretReference{Name: "backup", Namespace: "garden"},
			},
		}
	}
	applied := 0
	for _, m := range render(t, "keda") {
		if m.obj.GetName() == "housekeeper-gcp-bucket-config" {
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(m.obj.DeepCopy()), fieldOwner, client.ForceOwnership); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
			applied++
		}
	}
	if applied != 2 {
		t.Fatalf("the chart renders %d objects named housekeeper-gcp-bucket-config, want the policy and its binding", applied)
	}
	const immutable = `{"kind":"BackupBucketConfig","immutability":{"retentionType":"bucket","retentionPeriod":"24h"}}`
	testenv.Eventually(t, 30*time.Second, "the policy refuses an immutability", func() (bool, string) {
		b := newBucket("probe", "gcp", immutable)
		if err := c.Create(ctx, b); err == nil {
			_ = c.Delete(ctx, b)
			return false, "still accepted"
		}
		return true, ""
	})
	for i, tc := range []struct{ config, mention string }{
		{immutable, "immutability: housekeeper does not keep gcp buckets immutable"},
		{`{"kind":"BucketConfig"}`, "must be provider-gcp's BackupBucketConfig"},
		{`{"kind":"BackupBucketConfig","store":{"endpointOverride":"storage.example.com"}}`, "endpointOverride: must be an http(s) URL"},
		{`{"kind":"BackupBucketConfig","store":{"endpointOverride":"https://user@storage.example.com"}}`, "endpointOverride: must be an http(s) URL"},
	} {
		err := c.Create(ctx, newBucket(fmt.Sprintf("bad-%d", i), "gcp", tc.config))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("providerConfig %s: %v, want Invalid mentioning %q", tc.config, err, tc.mention)
		}
	}
	for i, tc := range []struct{ providerType, config string }{
		{"gcp", `{"apiVersion":"gcp.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupBucketConfig","store":{"endpointOverride":"https://storage.europe-west3.rep.googleapis.com"}}`},
		{"gcp", `{"kind":"BackupBucketConfig","store":{"endpointOverride":"http://127.0.0.1:4443/storage/v1/"}}`},
		{"aws", immutable},
	} {
		if err := c.Create(ctx, newBucket(fmt.Sprintf("good-%d", i), tc.providerType, tc.config)); err != nil {
			t.Errorf("%s providerConfig %q: %v, want it accepted", tc.providerType, tc.config, err)
		}
	}
}

// The chart's immutability policy refuses, on a real kube-apiserver, a malformed
// immutability and every update that would weaken one (removal, a shorter period, compliance to
// governance), and accepts extension and a finalizer.
func TestBucketImmutabilityAdmissionPolicy(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	c := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	immutable := func(period, mode string) string {
		return fmt.Sprintf(`{"immutability":{"retentionType":"bucket","retentionPeriod":%q,"mode":%q}}`, period, mode)
	}
	azureImmutable := func(period string, locked any) string {
		return fmt.Sprintf(`{"immutability":{"retentionType":"bucket","retentionPeriod":%q,"locked":%v}}`, period, locked)
	}
	newBucket := func(name, config string) *extensionsv1alpha1.BackupBucket {
		providerType := "aws"
		if n, ok := strings.CutPrefix(name, "azure-"); ok {
			providerType, name = "azure", "azure-"+n
		}
		b := &extensionsv1alpha1.BackupBucket{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: extensionsv1alpha1.BackupBucketSpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: providerType}, Region: "eu-west-1",
				SecretRef: corev1.SecretReference{Name: "backup", Namespace: "garden"},
			},
		}
		if config != "" {
			b.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(config)}
		}
		return b
	}
	applied := 0
	for _, m := range render(t, "keda") {
		if m.obj.GetName() == "housekeeper-bucket-immutability" {
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(m.obj.DeepCopy()), fieldOwner, client.ForceOwnership); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
			applied++
		}
	}
	if applied != 2 {
		t.Fatalf("the chart renders %d objects named housekeeper-bucket-immutability, want the policy and its binding", applied)
	}
	testenv.Eventually(t, 30*time.Second, "the policy refuses a period of 12h", func() (bool, string) {
		b := newBucket("probe", immutable("12h", "governance"))
		if err := c.Create(ctx, b); err == nil {
			_ = c.Delete(ctx, b)
			return false, "still accepted"
		}
		return true, ""
	})
	for i, tc := range []struct{ config, mention string }{
		{immutable("12h", "governance"), "retentionPeriod: must be a whole number of days"},
		{immutable("36h", "governance"), "retentionPeriod: must be a whole number of days"},
		{immutable("1d", "governance"), "retentionPeriod: must be a whole number of days"},
		{immutable("24h", "legal"), "mode: must be governance or compliance"},
		{`{"immutability":{"retentionType":"object","retentionPeriod":"24h","mode":"governance"}}`, "retentionType: must be bucket"},
	} {
		if err := c.Create(ctx, newBucket(fmt.Sprintf("bad-%d", i), tc.config)); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: %v, want Invalid mentioning %q", tc.config, err, tc.mention)
		}
	}
	for i, tc := range []struct{ config, mention string }{
		{azureImmutable("36h", true), "retentionPeriod: must be a whole number of days"},
		{azureImmutable("24h", `"yes"`), "locked: must be true or false"},
	} {
		if err := c.Create(ctx, newBucket(fmt.Sprintf("azure-bad-%d", i), tc.config)); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("azure %s: %v, want Invalid mentioning %q", tc.config, err, tc.mention)
		}
	}
	// Another provider's bucket is not this installation's to judge.
	other := newBucket("other-provider", immutable("12h", "legal"))
	other.Spec.Type = "gcp"
	if err := c.Create(ctx, other); err != nil {
		t.Errorf("a gcp bucket (a type this installation does not serve): %v, want it left alone", err)
	}
	if err := c.Create(ctx, newBucket("locked", immutable("48h", "compliance"))); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, newBucket("azure-locked", azureImmutable("48h", true))); err != nil {
		t.Fatal(err)
	}
	updateBucket := func(name, config string) error {
		cur := &extensionsv1alpha1.BackupBucket{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, cur); err != nil {
			t.Fatal(err)
		}
		cur.Spec.ProviderConfig = nil
		if config != "" {
			cur.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(config)}
		}
		return c.Update(ctx, cur)
	}
	update := func(config string) error { return updateBucket("locked", config) }
	for _, tc := range []struct{ config, mention string }{
		{"", "cannot be removed"},
		{`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1"}`, "cannot be removed"},
		{immutable("24h", "compliance"), "cannot be shortened"},
		{immutable("48h", "governance"), "compliance cannot become governance"},
	} {
		if err := update(tc.config); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || err == nil || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("update to %q: %v, want it refused mentioning %q", tc.config, err, tc.mention)
		}
	}
	if err := update(immutable("168h", "compliance")); err != nil {
		t.Errorf("extending the period: %v", err)
	}
	for _, tc := range []struct{ config, mention string }{
		{"", "cannot be removed"},
		{azureImmutable("24h", true), "cannot be shortened"},
		{azureImmutable("48h", false), "a locked policy cannot be unlocked"},
		{`{"immutability":{"retentionType":"bucket","retentionPeriod":"48h"}}`, "a locked policy cannot be unlocked"},
	} {
		if err := updateBucket("azure-locked", tc.config); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || err == nil || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("azure update to %q: %v, want it refused mentioning %q", tc.config, err, tc.mention)
		}
	}
	if err := updateBucket("azure-locked", azureImmutable("72h", true)); err != nil {
		t.Errorf("extending a locked Azure policy: %v", err)
	}
	cur := &extensionsv1alpha1.BackupBucket{}
	if err := c.Get(ctx, client.ObjectKey{Name: "locked"}, cur); err != nil {
		t.Fatal(err)
	}
	cur.Finalizers = append(cur.Finalizers, "extensions.gardener.cloud/backupbucket")
	if err := c.Update(ctx, cur); err != nil {
		t.Errorf("a finalizer: %v", err)
	}
	if err := c.Create(ctx, newBucket("no-config", "")); err != nil {
		t.Errorf("a bucket without providerConfig: %v", err)
	}
}
