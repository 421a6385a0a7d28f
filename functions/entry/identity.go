package entry

import (
	"fmt"
	"maps"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	securityv1alpha1constants "github.com/gardener/gardener/pkg/apis/security/v1alpha1/constants"
	corev1 "k8s.io/api/core/v1"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// workloadIdentity is what marks an entry's secret as a WorkloadIdentity's, as gardenlet writes
// it: the purpose label, the provider label and the WorkloadIdentity's name, namespace and
// context object. gardenlet's token requestor fills the token of every secret so marked, so
// etcd-backup carries the marks too, and keeps the token and its renew timestamp the requestor
// wrote there.
type workloadIdentity struct {
	labels, annotations map[string]string
}

// workloadIdentityOf returns the marks of a workload identity's secret, nil for a secret of
// static credentials, and an error for a secret marked as one that misses what the token
// requestor needs.
func workloadIdentityOf(secret *corev1.Secret) (*workloadIdentity, error) {
	if secret.Labels[securityv1alpha1constants.LabelPurpose] != securityv1alpha1constants.LabelPurposeWorkloadIdentityTokenRequestor {
		return nil, nil
	}
	wi := &workloadIdentity{
		labels:      map[string]string{securityv1alpha1constants.LabelPurpose: securityv1alpha1constants.LabelPurposeWorkloadIdentityTokenRequestor},
		annotations: map[string]string{},
	}
	for _, required := range []struct {
		from map[string]string
		to   map[string]string
		key  string
		kind string
	}{
		{secret.Labels, wi.labels, securityv1alpha1constants.LabelWorkloadIdentityProvider, "label"},
		{secret.Annotations, wi.annotations, securityv1alpha1constants.AnnotationWorkloadIdentityName, "annotation"},
		{secret.Annotations, wi.annotations, securityv1alpha1constants.AnnotationWorkloadIdentityNamespace, "annotation"},
	} {
		v := required.from[required.key]
		if v == "" {
			return nil, gardener.Permanent(fmt.Errorf("secret %s/%s is a workload identity's (label %s) but has no %s %s",
				secret.Namespace, secret.Name, securityv1alpha1constants.LabelPurpose, required.kind, required.key), gardencorev1beta1.ErrorConfigurationProblem)
		}
		required.to[required.key] = v
	}
	if v := secret.Annotations[securityv1alpha1constants.AnnotationWorkloadIdentityContextObject]; v != "" {
		wi.annotations[securityv1alpha1constants.AnnotationWorkloadIdentityContextObject] = v
	}
	if len(secret.Data[KeyConfig]) == 0 {
		return nil, gardener.Permanent(fmt.Errorf("secret %s/%s is a workload identity's but has no %q", secret.Namespace, secret.Name, KeyConfig), gardencorev1beta1.ErrorConfigurationProblem)
	}
	return wi, nil
}

// Data keys of a workload identity's secret.
const (
	KeyConfig = securityv1alpha1constants.DataKeyConfig
	KeyToken  = securityv1alpha1constants.DataKeyToken
)

// apply gives etcd-backup the marks, keeping the token and its renew timestamp that the token
// requestor wrote into have (the secret as read).
func (wi *workloadIdentity) apply(have *corev1.Secret, labels, annotations map[string]string, data map[string][]byte) {
	maps.Copy(labels, wi.labels)
	maps.Copy(annotations, wi.annotations)
	if t, ok := have.Annotations[securityv1alpha1constants.AnnotationWorkloadIdentityTokenRenewTimestamp]; ok {
		annotations[securityv1alpha1constants.AnnotationWorkloadIdentityTokenRenewTimestamp] = t
	}
	if token, ok := have.Data[KeyToken]; ok {
		data[KeyToken] = token
	}
}
