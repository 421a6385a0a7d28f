package azure

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// The BackupBucket's spec.providerConfig, in provider-azure's shape.
const (
	ConfigAPIVersion = "azure.provider.extensions.gardener.cloud/v1alpha1"
	ConfigKind       = "BackupBucketConfig"
	// AnnotationRotate on a BackupBucket asks for its storage key to be rotated now (with a
	// rotationConfig); it is removed once the rotation is done.
	AnnotationRotate = objectstore.AnnotationAzureRotate
	// MinRotationPeriodDays is the shortest rotation period a rotationConfig may ask for.
	MinRotationPeriodDays = 2
)

// BucketConfig is the BackupBucket's providerConfig.
type BucketConfig struct {
	APIVersion         string              `json:"apiVersion,omitempty"`
	Kind               string              `json:"kind,omitempty"`
	CloudConfiguration *CloudConfiguration `json:"cloudConfiguration,omitempty"`
	RotationConfig     *RotationConfig     `json:"rotationConfig,omitempty"`
	Immutability       *Immutability       `json:"immutability,omitempty"`
}

// Immutability asks for a time-based retention policy on the container: no blob can be
// deleted or overwritten until it is RetentionPeriod old. Azure sets it through Resource
// Manager, so it needs management credentials (a service principal or a workload identity).
type Immutability struct {
	// RetentionType is "bucket": the policy is the container's.
	RetentionType string `json:"retentionType"`
	// RetentionPeriod is whole days, at least one (Azure counts the period in days).
	RetentionPeriod string `json:"retentionPeriod"`
	// Locked makes the policy irreversible: it can then only be extended.
	Locked bool `json:"locked,omitempty"`
}

// retention is a parsed immutability policy.
type retention struct {
	days   int32
	locked bool
}

func (r retention) String() string {
	if r.locked {
		return fmt.Sprintf("%d days, locked", r.days)
	}
	return fmt.Sprintf("%d days, unlocked", r.days)
}

func (im Immutability) retention() (retention, error) {
	if im.RetentionType != "bucket" {
		return retention{}, fmt.Errorf("retentionType %q: must be bucket", im.RetentionType)
	}
	days, err := objectstore.RetentionDays(im.RetentionPeriod)
	if err != nil {
		return retention{}, err
	}
	return retention{days: days, locked: im.Locked}, nil
}

// union protects as much as a and b both: the longer period, locked if either is.
func union(a, b retention) retention {
	return retention{days: max(a.days, b.days), locked: a.locked || b.locked}
}

// CloudConfiguration names the Azure cloud.
type CloudConfiguration struct {
	Name string `json:"name"`
}

// RotationConfig rotates the storage account's keys: the older key is regenerated and the
// newer one published once the newest is RotationPeriodDays old; ExpirationPeriodDays sets the
// account's key expiration policy.
type RotationConfig struct {
	RotationPeriodDays   int32  `json:"rotationPeriodDays"`
	ExpirationPeriodDays *int32 `json:"expirationPeriodDays,omitempty"`
}

// ParseBucketConfig decodes and validates raw (nil or empty means no configuration). Unknown
// fields are errors: a misspelt field would otherwise be a setting silently not applied.
// Errors wrap objectstore.ErrInvalidConfig and name the field.
func ParseBucketConfig(raw []byte) (BucketConfig, error) {
	var c BucketConfig
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return c, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("azure: %w: providerConfig: %v", objectstore.ErrInvalidConfig, err)
	}
	if err := c.validate(); err != nil {
		return c, fmt.Errorf("azure: %w: providerConfig.%v", objectstore.ErrInvalidConfig, err)
	}
	return c, nil
}

func (c BucketConfig) validate() error {
	if c.APIVersion != "" && c.APIVersion != ConfigAPIVersion {
		return fmt.Errorf("apiVersion %q: want %s", c.APIVersion, ConfigAPIVersion)
	}
	if c.Kind != "" && c.Kind != ConfigKind {
		return fmt.Errorf("kind %q: want %s", c.Kind, ConfigKind)
	}
	if c.CloudConfiguration != nil {
		if _, err := environmentFor(c.CloudConfiguration.Name, ""); err != nil || c.CloudConfiguration.Name == "" {
			return fmt.Errorf("cloudConfiguration.name %q: must be one of %v", c.CloudConfiguration.Name, CloudNames())
		}
	}
	if r := c.RotationConfig; r != nil {
		if r.RotationPeriodDays < MinRotationPeriodDays {
			return fmt.Errorf("rotationConfig.rotationPeriodDays %d: must be at least %d", r.RotationPeriodDays, MinRotationPeriodDays)
		}
		if r.ExpirationPeriodDays != nil && *r.ExpirationPeriodDays <= r.RotationPeriodDays {
			return fmt.Errorf("rotationConfig.expirationPeriodDays %d: must be greater than rotationPeriodDays (%d)", *r.ExpirationPeriodDays, r.RotationPeriodDays)
		}
	}
	if c.Immutability != nil {
		if _, err := c.Immutability.retention(); err != nil {
			return fmt.Errorf("immutability.%w", err)
		}
	}
	return nil
}

// cloudName is the configured cloud name, "" if none.
func (c BucketConfig) cloudName() string {
	if c.CloudConfiguration == nil {
		return ""
	}
	return c.CloudConfiguration.Name
}
