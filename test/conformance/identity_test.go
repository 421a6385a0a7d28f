package conformance

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	securityv1alpha1 "github.com/gardener/gardener/pkg/apis/security/v1alpha1"
	securityv1alpha1constants "github.com/gardener/gardener/pkg/apis/security/v1alpha1/constants"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// workloadIdentityAudience is the audience of the scenario's WorkloadIdentity.
const workloadIdentityAudience = "housekeeper-conformance"

// 10-workload-identity-entry: an entry whose secret is a WorkloadIdentity's, as gardenlet
// writes it: gardenlet's token requestor fills etcd-backup's token from gardener-apiserver's
// token subresource, the token survives the extension's reconciles, and a renewal lands there.
func (r *run) workloadIdentityEntry(t *testing.T) {
	ctx := context.Background()
	shoot := r.shoot(t, "wi", gardencorev1beta1.ShootPurposeEvaluation, r.src)
	name := technicalID(shoot) + "--" + string(shoot.UID)
	wi := &securityv1alpha1.WorkloadIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: "backup-" + shoot.Name, Namespace: r.ns},
		Spec: securityv1alpha1.WorkloadIdentitySpec{
			Audiences:    []string{workloadIdentityAudience},
			TargetSystem: securityv1alpha1.TargetSystem{Type: "local"},
		},
	}
	if err := r.g.client.Create(ctx, wi); err != nil {
		t.Fatalf("creating WorkloadIdentity: %v", err)
	}
	// The entry's secret on the seed, as gardenlet's workloadidentity.Deploy writes it.
	entrySecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "entry-" + name, Namespace: "garden",
			Labels: map[string]string{
				securityv1alpha1constants.LabelPurpose:                  securityv1alpha1constants.LabelPurposeWorkloadIdentityTokenRequestor,
				securityv1alpha1constants.LabelWorkloadIdentityProvider: "local",
			},
			Annotations: map[string]string{
				securityv1alpha1constants.AnnotationWorkloadIdentityName:      wi.Name,
				securityv1alpha1constants.AnnotationWorkloadIdentityNamespace: wi.Namespace,
			},
		},
		Data: map[string][]byte{securityv1alpha1constants.DataKeyConfig: []byte("generation: 1\n")},
	}
	if err := r.src.client.Create(ctx, entrySecret); err != nil {
		t.Fatal(err)
	}
	// The extension BackupEntry as gardenlet deploys it (with the operation annotation); its
	// bucket is none of the world's, so the bucket deletion scenario is not held up by it.
	be := &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{v1beta1constants.GardenerOperation: v1beta1constants.GardenerOperationReconcile}},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, BucketName: "workload-identity-" + r.project, Region: "local",
			SecretRef: corev1.SecretReference{Name: entrySecret.Name, Namespace: entrySecret.Namespace},
		},
	}
	if err := r.src.client.Create(ctx, be); err != nil {
		t.Fatal(err)
	}

	read := func() *corev1.Secret {
		s := &corev1.Secret{}
		if err := r.src.client.Get(ctx, client.ObjectKey{Namespace: technicalID(shoot), Name: "etcd-backup"}, s); err != nil {
			return nil
		}
		return s
	}
	var first *corev1.Secret
	r.eventually(t, "etcd-backup with a token gardener-apiserver issued for the WorkloadIdentity", func() error {
		first = read()
		if first == nil {
			return fmt.Errorf("no etcd-backup yet")
		}
		return checkToken(first.Data[securityv1alpha1constants.DataKeyToken])
	})
	for _, k := range []string{securityv1alpha1constants.AnnotationWorkloadIdentityName, securityv1alpha1constants.AnnotationWorkloadIdentityNamespace} {
		if first.Annotations[k] != entrySecret.Annotations[k] {
			t.Errorf("etcd-backup annotation %s=%q, want %q", k, first.Annotations[k], entrySecret.Annotations[k])
		}
	}
	if first.Labels[securityv1alpha1constants.LabelWorkloadIdentityProvider] != "local" {
		t.Errorf("etcd-backup labels %v: want the workload identity's provider", first.Labels)
	}
	token := string(first.Data[securityv1alpha1constants.DataKeyToken])

	// A change the extension copies: it writes etcd-backup again, and the token stays.
	rewrite := func(generation int) *corev1.Secret {
		t.Helper()
		live := &corev1.Secret{}
		if err := r.src.client.Get(ctx, client.ObjectKeyFromObject(entrySecret), live); err != nil {
			t.Fatal(err)
		}
		live.Data[securityv1alpha1constants.DataKeyConfig] = []byte(fmt.Sprintf("generation: %d\n", generation))
		if err := r.src.client.Update(ctx, live); err != nil {
			t.Fatal(err)
		}
		entry := &extensionsv1alpha1.BackupEntry{}
		if err := r.src.client.Get(ctx, client.ObjectKey{Name: name}, entry); err != nil {
			t.Fatal(err)
		}
		base := entry.DeepCopy()
		metav1.SetMetaDataAnnotation(&entry.ObjectMeta, v1beta1constants.GardenerOperation, v1beta1constants.GardenerOperationReconcile)
		if err := r.src.client.Patch(ctx, entry, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		var got *corev1.Secret
		r.eventually(t, fmt.Sprintf("etcd-backup with config generation %d", generation), func() error {
			got = read()
			if got == nil || !strings.Contains(string(got.Data[securityv1alpha1constants.DataKeyConfig]), fmt.Sprintf("generation: %d", generation)) {
				return fmt.Errorf("config not copied yet")
			}
			return checkToken(got.Data[securityv1alpha1constants.DataKeyToken])
		})
		return got
	}
	second := rewrite(2)
	if string(second.Data[securityv1alpha1constants.DataKeyToken]) != token {
		t.Fatalf("the extension's reconcile changed the token: it must keep the requestor's")
	}
	t.Logf("etcd-backup resourceVersion %s with the requestor's token, %s after the extension wrote it again: token kept (%d bytes)",
		first.ResourceVersion, second.ResourceVersion, len(token))

	// Past half the token's lifetime gardenlet renews it on the next event, here the extension's
	// next write; the renewed token lands in etcd-backup and survives the write after it.
	r.clk.Shift(45 * time.Minute)
	defer r.clk.Shift(0)
	third := rewrite(3)
	r.eventually(t, "a renewed token in etcd-backup", func() error {
		third = read()
		if string(third.Data[securityv1alpha1constants.DataKeyToken]) == token {
			return fmt.Errorf("still the first token (renew timestamp %s)", third.Annotations[securityv1alpha1constants.AnnotationWorkloadIdentityTokenRenewTimestamp])
		}
		return checkToken(third.Data[securityv1alpha1constants.DataKeyToken])
	})
	renewed := string(third.Data[securityv1alpha1constants.DataKeyToken])
	fourth := rewrite(4)
	// gardenlet's requestor may renew once more on the events of these writes (its cache can
	// still show the renewal due): then etcd-backup holds a newer token still, never an older one.
	renewedAt := func(s *corev1.Secret) time.Time {
		at, err := time.Parse(time.RFC3339, s.Annotations[securityv1alpha1constants.AnnotationWorkloadIdentityTokenRenewTimestamp])
		if err != nil {
			t.Fatalf("etcd-backup's renew timestamp: %v", err)
		}
		return at
	}
	if got := string(fourth.Data[securityv1alpha1constants.DataKeyToken]); got == token || got != renewed && renewedAt(fourth).Before(renewedAt(third)) {
		t.Fatalf("the extension's reconcile after the renewal did not keep the renewed token")
	} else if got != renewed {
		t.Logf("gardenlet renewed the token once more; etcd-backup holds the newer one")
	}
	t.Logf("renewed token in etcd-backup at resourceVersion %s, kept at %s after the next write", third.ResourceVersion, fourth.ResourceVersion)
}

// checkToken says what is wrong with a token: it must be a JWT from the garden's issuer for the
// WorkloadIdentity's audience.
func checkToken(token []byte) error {
	parts := strings.Split(string(token), ".")
	if len(parts) != 3 {
		return fmt.Errorf("token is not a JWT (%d bytes)", len(token))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return fmt.Errorf("token payload: %v", err)
	}
	var claims struct {
		Issuer   string          `json:"iss"`
		Audience json.RawMessage `json:"aud"` // a string or a list (RFC 7519)
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return fmt.Errorf("token claims: %v", err)
	}
	var audiences []string
	if err := json.Unmarshal(claims.Audience, &audiences); err != nil {
		var one string
		if err := json.Unmarshal(claims.Audience, &one); err != nil {
			return fmt.Errorf("token audience %s: %v", claims.Audience, err)
		}
		audiences = []string{one}
	}
	if claims.Issuer != workloadIdentityIssuer || !slices.Contains(audiences, workloadIdentityAudience) {
		return fmt.Errorf("token from %q for %v, want %s for %s", claims.Issuer, audiences, workloadIdentityIssuer, workloadIdentityAudience)
	}
	return nil
}
