package s3

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Keys of a workload identity's secret (gardenlet writes config, its token requestor token)
// and the role etcd-backup-restore assumes with the token (its S3 store reads the files
// region, roleARN and token).
const (
	KeyConfig  = "config"
	KeyToken   = "token"
	KeyRoleARN = "roleARN"

	WorkloadIdentityConfigKind = "WorkloadIdentityConfig"
)

// workloadIdentityConfig is provider-aws's WorkloadIdentityConfig, the WorkloadIdentity's
// spec.targetSystem.providerConfig that gardenlet copies into the secret's config.
type workloadIdentityConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	RoleARN    string `json:"roleARN"`
}

// roleARN returns the role of an aws workload identity's config (YAML or JSON).
func roleARN(config []byte) (string, error) {
	var c workloadIdentityConfig
	if err := yaml.Unmarshal(config, &c); err != nil {
		return "", fmt.Errorf("s3: %w: %q is not a WorkloadIdentityConfig: %v", objectstore.ErrInvalidCredentials, KeyConfig, err)
	}
	if c.Kind != WorkloadIdentityConfigKind {
		return "", fmt.Errorf("s3: %w: %q has kind %q, want %s", objectstore.ErrInvalidCredentials, KeyConfig, c.Kind, WorkloadIdentityConfigKind)
	}
	if !strings.HasPrefix(c.RoleARN, "arn:") {
		return "", fmt.Errorf("s3: %w: %q: roleARN %q is not an ARN", objectstore.ErrInvalidCredentials, KeyConfig, c.RoleARN)
	}
	return c.RoleARN, nil
}

var _ objectstore.EntrySecret = (*Provider)(nil)

// EntrySecretData is what provider-aws adds to an entry's etcd-backup: the region
// etcd-backup-restore's S3 store needs (spec.region), and with a workload identity the role it
// assumes with the token (web identity).
func (p *Provider) EntrySecretData(e objectstore.Entry) (map[string][]byte, error) {
	data := map[string][]byte{}
	if e.Region != "" {
		data[KeyRegion] = []byte(e.Region)
	}
	if e.WorkloadIdentity != nil {
		role, err := roleARN(e.WorkloadIdentity)
		if err != nil {
			return nil, err
		}
		data[KeyRoleARN] = []byte(role)
	}
	return data, nil
}
