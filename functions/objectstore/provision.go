package objectstore

import "context"

// AnnotationAzureRotate on a BackupBucket asks its provisioner for a key rotation now
// (provider-azure's annotation); the bucket function removes it once done. Declared here, not
// in package azure, so that the bridge, which must not link the Azure SDK, knows it as one a
// function consumes.
const AnnotationAzureRotate = "azure.provider.extensions.gardener.cloud/rotate"

// Provisioner is a Provider whose bucket secret may hold management credentials instead of
// storage ones: Azure's service principal or workload identity, with which the account that
// holds the bucket is created and its keys are read. The bucket function then provisions
// first and works with the storage credentials Provision returns; entries only ever see
// those (through the generated secret).
type Provisioner interface {
	Provider
	// Manages reports whether credentials are management credentials this provider
	// provisions with, rather than storage credentials Open takes as they are.
	Manages(credentials map[string][]byte) bool
	// Provision creates or repairs what holds the bucket (an idempotent, level-triggered
	// step run on every reconcile), rotates keys when due and returns the storage credentials
	// to open the bucket with and to publish.
	Provision(ctx context.Context, p Provisioning) (Provisioned, error)
	// Deprovision deletes the bucket and what holds it; what is already gone is fine, and an
	// interrupted call resumes where it stopped.
	Deprovision(ctx context.Context, p Provisioning) error
}

// Provisioning is what a provisioner works from.
type Provisioning struct {
	Bucket, Region string
	// Credentials is the data of the BackupBucket's spec.secretRef secret.
	Credentials map[string][]byte
	// Published is the data of the generated secret as it is now, nil if there is none yet:
	// its account is kept and its key tells whether a rotation has been published.
	Published map[string][]byte
	// Config is spec.providerConfig, nil if none.
	Config []byte
	// Annotations are the BackupBucket's (a rotation may be asked for by annotation).
	Annotations map[string]string
}

// Provisioned is the outcome of Provision.
type Provisioned struct {
	// Credentials are the storage credentials: pass them to Open and BackupSecretData.
	Credentials map[string][]byte
	// Consumed names the annotations Provision acted on; the caller removes them.
	Consumed []string
	// Description says what Provision did worth telling (a rotated key), "" if nothing.
	Description string
}

// AsProvisioner returns p as a Provisioner if it is one and credentials are management
// credentials for it.
func AsProvisioner(p Provider, credentials map[string][]byte) (Provisioner, bool) {
	pv, ok := p.(Provisioner)
	if !ok || !pv.Manages(credentials) {
		return nil, false
	}
	return pv, true
}
