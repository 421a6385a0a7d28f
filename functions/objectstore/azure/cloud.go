package azure

import (
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
)

// Cloud names, as providerConfig.cloudConfiguration.name spells them upstream.
const (
	CloudPublic     = "AzurePublic"
	CloudChina      = "AzureChina"
	CloudGovernment = "AzureGovernment"
)

// environment is one Azure cloud: where to authenticate, where ARM is, and the blob domain.
type environment struct {
	name       string
	config     cloud.Configuration
	blobDomain string
}

var environments = []environment{
	{CloudPublic, cloud.AzurePublic, DefaultDomain},
	{CloudChina, cloud.AzureChina, "blob.core.chinacloudapi.cn"},
	{CloudGovernment, cloud.AzureGovernment, "blob.core.usgovcloudapi.net"},
}

// CloudNames lists the cloud names a BackupBucketConfig may give.
func CloudNames() []string {
	names := make([]string, len(environments))
	for i, e := range environments {
		names[i] = e.name
	}
	return names
}

// environmentFor returns the cloud named (case-insensitively, as upstream compares), or the one
// the region belongs to when no name is given: US Government regions start with usgov, usdod
// or ussec, China's with china.
func environmentFor(name, region string) (environment, error) {
	if name == "" {
		r := strings.ToLower(region)
		switch {
		case strings.HasPrefix(r, "usgov"), strings.HasPrefix(r, "usdod"), strings.HasPrefix(r, "ussec"):
			name = CloudGovernment
		case strings.HasPrefix(r, "china"):
			name = CloudChina
		default:
			name = CloudPublic
		}
	}
	for _, e := range environments {
		if strings.EqualFold(e.name, name) {
			return e, nil
		}
	}
	return environment{}, fmt.Errorf("cloudConfiguration.name %q is not one of %s", name, strings.Join(CloudNames(), ", "))
}
