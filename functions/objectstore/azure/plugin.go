package azure

import (
	"errors"
	"flag"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// Plugin links the Azure provider into a binary, with its flags for clouds the SDK does not
// know and for private endpoints.
var Plugin = objectstore.Plugin{Type: Type, Bind: bindFlags}

func bindFlags(fs *flag.FlagSet) func() (objectstore.Provider, error) {
	authority := fs.String("azure-authority-host", "", "Microsoft Entra ID authority host for Azure buckets provisioned from a service principal or workload identity, with --azure-resource-manager (Azure Stack Hub, a cloud the SDK does not know); empty: the bucket's cloud")
	arm := fs.String("azure-resource-manager", "", "Azure Resource Manager endpoint, with --azure-authority-host")
	serviceURL := fs.String("azure-blob-service-url", "", "blob service URL template published for provisioned accounts, {account} replaced (private endpoints); empty: https://<account>.<the cloud's blob domain>")
	return func() (objectstore.Provider, error) {
		if (*authority == "") != (*arm == "") {
			return nil, errors.New("--azure-authority-host and --azure-resource-manager go together")
		}
		return New(WithCustomCloud(*authority, *arm), WithServiceURL(*serviceURL)), nil
	}
}
