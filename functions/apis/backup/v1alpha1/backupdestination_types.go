package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Destination provider types: the same as a BackupBucket's spec.type, served by the same
// object-store providers.
const (
	DestinationAzure     = "azure"
	DestinationAWS       = "aws"
	DestinationGCP       = "gcp"
	DestinationOpenStack = "openstack"
	DestinationLocal     = "local"
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
// +kubebuilder:validation:XValidation:rule="self.type == 'local' || has(self.credentialsSecretRef)",message="credentialsSecretRef is required for every type but local"
// +kubebuilder:validation:XValidation:rule="self.type in ['aws', 'openstack'] || !has(self.region)",message="region is only for types aws and openstack"
// +kubebuilder:validation:XValidation:rule="self.type != 'openstack' || !has(self.endpoint)",message="endpoint is not for type openstack: Swift's endpoint comes from the catalog of the authURL in the credentials"
type BackupDestinationSpec struct {
	// Type is the object-store provider: azure (Azure Blob), aws (S3 or an S3-compatible
	// endpoint), gcp (Google Cloud Storage or a GCS-compatible endpoint), openstack (Swift) or
	// local (a directory of the functions' --local-root).
	// +kubebuilder:validation:Enum=azure;aws;gcp;openstack;local
	Type string `json:"type"`
	// Bucket is the container (azure, openstack), bucket (aws, gcp) or directory (local); it
	// must exist. Backups go under <config namespace>/<config name>/ in it.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9]|-[a-z0-9])*$`
	Bucket string `json:"bucket"`
	// Endpoint overrides the store's service URL (an emulator, an S3-compatible server). For
	// azure and aws it wins over an endpoint key in the credentials; for gcp it is the JSON
	// API's URL, as a BackupBucket's providerConfig store.endpointOverride (/storage/v1/ is
	// added to a URL without a path). Not for openstack, whose Swift endpoint is the one
	// Keystone's catalog at the credentials' authURL lists for the region.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	Endpoint string `json:"endpoint,omitempty"`
	// Region is the bucket's region: for aws, it wins over a region key in the credentials;
	// for openstack, it picks the object-store endpoint of Keystone's catalog (and is the
	// region etcd-backup-restore reads). Not for the other types.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Region string `json:"region,omitempty"`
	// CredentialsSecretRef names the secret with the provider's credential keys, the keys a
	// BackupBucket's secret has for the same type: azure storageAccount and storageKey
	// (domain, endpoint optional); aws accessKeyID and secretAccessKey (region, endpoint,
	// s3ForcePathStyle optional); gcp serviceaccount.json (projectID optional), or a workload
	// identity's config and token; openstack authURL, domainName, tenantName, and username
	// with password or an application credential (applicationCredentialSecret with
	// applicationCredentialID, or with applicationCredentialName and username); caCert and
	// insecure optional. Required for every type but local.
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
