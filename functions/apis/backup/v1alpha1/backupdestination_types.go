package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Destination provider types: the same as a BackupBucket's spec.type, served by the same
// object-store providers.
const (
	DestinationAzure = "azure"
	DestinationAWS   = "aws"
	DestinationLocal = "local"
)

// BackupDestination is one place backups can go: a bucket of an object store with its own
// credentials. Several may exist per cluster; an EtcdBackupConfig names one.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=bdest,categories=housekeeper
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.spec.bucket`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.endpoint`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BackupDestination struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BackupDestinationSpec `json:"spec"`
}

// BackupDestinationSpec says which bucket, where, and with which credentials.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'local' || has(self.credentialsSecretRef)",message="credentialsSecretRef is required for types azure and aws"
// +kubebuilder:validation:XValidation:rule="self.type == 'aws' || !has(self.region)",message="region is only for type aws"
type BackupDestinationSpec struct {
	// Type is the object-store provider: azure (Azure Blob), aws (S3 or an S3-compatible
	// endpoint) or local (a directory of the functions' --local-root).
	// +kubebuilder:validation:Enum=azure;aws;local
	Type string `json:"type"`
	// Bucket is the container (azure), bucket (aws) or directory (local); it must exist.
	// Backups go under <config namespace>/<config name>/ in it.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9]|-[a-z0-9])*$`
	Bucket string `json:"bucket"`
	// Endpoint overrides the store's service URL (an emulator, an S3-compatible server); it
	// wins over an endpoint key in the credentials.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	Endpoint string `json:"endpoint,omitempty"`
	// Region is the bucket's region (aws); it wins over a region key in the credentials.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Region string `json:"region,omitempty"`
	// CredentialsSecretRef names the secret with the provider's credential keys (the keys a
	// BackupBucket's secret has for the same type). Required for azure and aws.
	// +optional
	CredentialsSecretRef *SecretReference `json:"credentialsSecretRef,omitempty"`
}

// SecretReference names a secret in a namespace.
type SecretReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
}

// BackupDestinationList is a list of BackupDestinations.
//
// +kubebuilder:object:root=true
type BackupDestinationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackupDestination `json:"items"`
}
