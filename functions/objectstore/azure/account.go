package azure

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

var _ objectstore.Provisioner = (*Provider)(nil)

// AccountName is the storage account a bucket provisioned from management credentials lives
// in: "bkp" and the first 15 hex digits of the SHA-256 of the bucket's name, as upstream
// names it (so a bucket provider-azure made is adopted, not made twice).
func AccountName(bucket string) string {
	sum := sha256.Sum256([]byte(bucket))
	return "bkp" + hex.EncodeToString(sum[:])[:15]
}

// Manages reports whether credentials are a service principal or a workload identity (rather
// than a storage account key).
func (p *Provider) Manages(credentials map[string][]byte) bool { return isManagement(credentials) }

// Provision ensures, through Azure Resource Manager, the resource group named after the bucket
// in its region and the storage account in it (StorageV2, Standard_ZRS, Cool, HTTPS only, TLS
// 1.2, no public blob access, the key expiration policy of the rotationConfig), rotates the
// account's older key when the rotationConfig or the rotate annotation asks, and returns the
// newest key with the account and its domain. With immutability in the providerConfig it also
// creates the container (on the data plane, with that key) and gives it its immutability
// policy and the account the rule that deletes marked blobs; otherwise the container is made
// by the caller.
func (p *Provider) Provision(ctx context.Context, req objectstore.Provisioning) (objectstore.Provisioned, error) {
	a, err := p.connect(req)
	if err != nil {
		return objectstore.Provisioned{}, err
	}
	if req.Region == "" {
		return objectstore.Provisioned{}, fmt.Errorf("azure: %w: spec.region is required: the resource group for bucket %s is created there", objectstore.ErrInvalidConfig, req.Bucket)
	}
	if _, err := a.groups.CreateOrUpdate(ctx, a.group, armresources.ResourceGroup{Location: to.Ptr(req.Region)}, nil); err != nil {
		return objectstore.Provisioned{}, a.armError(err, "creating resource group "+a.group)
	}
	var notes []string
	deferred, err := a.ensureAccount(ctx, req.Region)
	if err != nil {
		return objectstore.Provisioned{}, err
	}
	keys, err := a.listKeys(ctx)
	if err != nil {
		return objectstore.Provisioned{}, err
	}
	keys, rotated, consumed, err := a.rotate(ctx, keys, req)
	if err != nil {
		return objectstore.Provisioned{}, err
	}
	if rotated != "" {
		notes = append(notes, "rotated storage key "+rotated)
		if deferred { // the regenerated key has a creation time now: the policy may apply
			if deferred, err = a.ensureAccount(ctx, req.Region); err != nil {
				return objectstore.Provisioned{}, err
			}
		}
	}
	if deferred {
		notes = append(notes, "key expiration policy deferred: a key of account "+a.account+" has no creation time until it is next rotated")
	}
	newest := newestKey(keys)
	if newest == nil || newest.Value == nil {
		return objectstore.Provisioned{}, fmt.Errorf("azure: storage account %s lists no keys", a.account)
	}
	credentials := a.storageCredentials(*newest.Value)
	if a.config.Immutability != nil {
		// The policy is the container's: the container comes first, on the data plane.
		opened, err := p.Open(req.Bucket, credentials)
		if err != nil {
			return objectstore.Provisioned{}, err
		}
		s := opened.(*store)
		if err := s.Create(ctx); err != nil {
			return objectstore.Provisioned{}, err
		}
		note, err := a.ensureImmutability(ctx, s)
		if err != nil {
			return objectstore.Provisioned{}, err
		}
		if note != "" {
			notes = append(notes, note)
		}
	}
	return objectstore.Provisioned{
		Credentials: credentials,
		Consumed:    consumed,
		Description: strings.Join(notes, "; "),
	}, nil
}

// Deprovision deletes the container (on the data plane, with a key listed through ARM), then
// the resource group with the account in it. A group or account already gone is fine; so is
// an interruption: the next call starts over and skips what is gone.
func (p *Provider) Deprovision(ctx context.Context, req objectstore.Provisioning) error {
	a, err := p.connect(req)
	if err != nil {
		return err
	}
	keys, err := a.listKeys(ctx)
	switch {
	case errors.Is(err, errNotFound):
		// The account (or its group) is gone, and the container with it.
	case err != nil:
		return err
	default:
		newest := newestKey(keys)
		if newest == nil || newest.Value == nil {
			return fmt.Errorf("azure: storage account %s lists no keys", a.account)
		}
		store, err := p.Open(req.Bucket, a.storageCredentials(*newest.Value))
		if err != nil {
			return err
		}
		if err := store.Delete(ctx); err != nil {
			return fmt.Errorf("deleting container %s in account %s: %w", req.Bucket, a.account, err)
		}
	}
	poller, err := a.groups.BeginDelete(ctx, a.group, nil)
	if err == nil {
		_, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.opts.pollFrequency})
	}
	if err != nil && !errors.Is(a.armError(err, ""), errNotFound) {
		return a.armError(err, "deleting resource group "+a.group)
	}
	return nil
}

// account is one provisioning: the ARM clients with their credentials, and the names.
type account struct {
	p          *Provider
	who        management
	env        environment
	config     BucketConfig
	group      string
	account    string
	container  string
	groups     *armresources.ResourceGroupsClient
	accounts   *armstorage.AccountsClient
	containers *armstorage.BlobContainersClient
	policies   *armstorage.ManagementPoliciesClient
}

func (p *Provider) connect(req objectstore.Provisioning) (*account, error) {
	config, err := ParseBucketConfig(req.Config)
	if err != nil {
		return nil, err
	}
	who, err := parseManagement(req.Credentials)
	if err != nil {
		return nil, err
	}
	env, err := environmentFor(config.cloudName(), req.Region)
	if err != nil {
		return nil, fmt.Errorf("azure: %w: %v", objectstore.ErrInvalidConfig, err)
	}
	if p.opts.customCloud != nil {
		env.config = *p.opts.customCloud
	}
	if err := objectstore.ValidateBucketName(req.Bucket); err != nil {
		return nil, fmt.Errorf("azure: %w", err)
	}
	name := AccountName(req.Bucket)
	if published := strings.TrimSpace(string(req.Published[KeyStorageAccount])); published != "" {
		name = published // the account already published stays, as upstream keeps it
	}
	clientOpts := azcore.ClientOptions{Transport: p.opts.managementTransport}
	cred, err := who.tokenCredential(env, p.opts.customCloud != nil, clientOpts)
	if err != nil {
		return nil, fmt.Errorf("azure: %w: %s: %v", objectstore.ErrInvalidCredentials, who, err)
	}
	armOpts := &arm.ClientOptions{ClientOptions: azcore.ClientOptions{Cloud: env.config, Transport: p.opts.managementTransport}}
	groups, err := armresources.NewResourceGroupsClient(who.subscriptionID, cred, armOpts)
	if err != nil {
		return nil, fmt.Errorf("azure: %w: %v", objectstore.ErrInvalidCredentials, err)
	}
	storage, err := armstorage.NewClientFactory(who.subscriptionID, cred, armOpts)
	if err != nil {
		return nil, fmt.Errorf("azure: %w: %v", objectstore.ErrInvalidCredentials, err)
	}
	return &account{p: p, who: who, env: env, config: config, group: req.Bucket, account: name, container: req.Bucket,
		groups: groups, accounts: storage.NewAccountsClient(), containers: storage.NewBlobContainersClient(), policies: storage.NewManagementPoliciesClient()}, nil
}

// ensureAccount creates or updates the storage account. An account whose keys have no
// creation time (they predate it, or were restored) makes Azure refuse a key expiration
// policy; then the account is written without one and deferred reports it, so that the
// bucket still works and the next rotation gives the keys their times.
func (a *account) ensureAccount(ctx context.Context, region string) (deferred bool, err error) {
	params := armstorage.AccountCreateParameters{
		Kind:     to.Ptr(armstorage.KindStorageV2),
		Location: to.Ptr(region),
		SKU:      &armstorage.SKU{Name: to.Ptr(armstorage.SKUNameStandardZRS)},
		Properties: &armstorage.AccountPropertiesCreateParameters{
			AccessTier:             to.Ptr(armstorage.AccessTierCool),
			AllowBlobPublicAccess:  to.Ptr(false),
			EnableHTTPSTrafficOnly: to.Ptr(true),
			MinimumTLSVersion:      to.Ptr(armstorage.MinimumTLSVersionTLS12),
		},
	}
	if r := a.config.RotationConfig; r != nil && r.ExpirationPeriodDays != nil {
		params.Properties.KeyPolicy = &armstorage.KeyPolicy{KeyExpirationPeriodInDays: to.Ptr(*r.ExpirationPeriodDays)}
	}
	err = a.createAccount(ctx, params)
	if params.Properties.KeyPolicy != nil && hasCode(err, "NoKeyCreationTime") {
		params.Properties.KeyPolicy = nil
		deferred, err = true, a.createAccount(ctx, params)
	}
	return deferred, err
}

func (a *account) createAccount(ctx context.Context, params armstorage.AccountCreateParameters) error {
	poller, err := a.accounts.BeginCreate(ctx, a.group, a.account, params, nil)
	if err == nil {
		_, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: a.p.opts.pollFrequency})
	}
	return a.armError(err, "creating storage account "+a.account+" in resource group "+a.group)
}

func (a *account) listKeys(ctx context.Context) ([]*armstorage.AccountKey, error) {
	resp, err := a.accounts.ListKeys(ctx, a.group, a.account, nil)
	if err != nil {
		return nil, a.armError(err, "listing the keys of storage account "+a.account)
	}
	return resp.Keys, nil
}

// rotate regenerates the older key when rotation is due: the newest key is older than
// rotationPeriodDays or has no creation time, or the rotate annotation asks for it. The
// annotation is ignored (and consumed) when the published key is no longer the newest: a
// rotation already happened and only its publication is pending, so another would take away
// the key entries still use. It returns the keys after rotation and the rotated key's name.
func (a *account) rotate(ctx context.Context, keys []*armstorage.AccountKey, req objectstore.Provisioning) ([]*armstorage.AccountKey, string, []string, error) {
	newest := newestKey(keys)
	if newest == nil || len(keys) < 2 {
		return keys, "", nil, nil
	}
	asked := strings.EqualFold(strings.TrimSpace(req.Annotations[AnnotationRotate]), "true")
	var consumed []string
	if asked {
		consumed = []string{AnnotationRotate}
		if published, ok := req.Published[KeyStorageKey]; ok && newest.Value != nil && string(published) != *newest.Value {
			asked = false
		}
	}
	due := false
	if r := a.config.RotationConfig; r != nil {
		period := time.Duration(r.RotationPeriodDays) * 24 * time.Hour
		due = newest.CreationTime == nil || a.p.opts.now().Sub(*newest.CreationTime) >= period
	}
	if !asked && !due {
		return keys, "", consumed, nil
	}
	older := olderKey(keys)
	resp, err := a.accounts.RegenerateKey(ctx, a.group, a.account, armstorage.AccountRegenerateKeyParameters{KeyName: older.KeyName}, nil)
	if err != nil {
		return nil, "", nil, a.armError(err, "regenerating key "+str(older.KeyName)+" of storage account "+a.account)
	}
	return resp.Keys, str(older.KeyName), consumed, nil
}

// byAge orders keys newest first; a key without a creation time counts as oldest, and the
// name breaks ties, so the order never depends on how Azure lists them.
func byAge(a, b *armstorage.AccountKey) int {
	switch {
	case a.CreationTime == nil && b.CreationTime != nil:
		return 1
	case a.CreationTime != nil && b.CreationTime == nil:
		return -1
	case a.CreationTime != nil && !a.CreationTime.Equal(*b.CreationTime):
		return b.CreationTime.Compare(*a.CreationTime)
	}
	return cmp.Compare(str(a.KeyName), str(b.KeyName))
}

func newestKey(keys []*armstorage.AccountKey) *armstorage.AccountKey {
	if len(keys) == 0 {
		return nil
	}
	return slices.MinFunc(keys, byAge)
}

func olderKey(keys []*armstorage.AccountKey) *armstorage.AccountKey {
	return slices.MaxFunc(keys, byAge)
}

// storageCredentials are what Open and etcd-backup-restore take for this account.
func (a *account) storageCredentials(key string) map[string][]byte {
	data := map[string][]byte{KeyStorageAccount: []byte(a.account), KeyStorageKey: []byte(key)}
	if t := a.p.opts.serviceURL; t != "" {
		data[KeyEndpoint] = []byte(strings.ReplaceAll(t, "{account}", a.account))
	} else {
		data[KeyDomain] = []byte(a.env.blobDomain)
	}
	return data
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
