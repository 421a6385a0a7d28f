package azure_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/azurecloud"
)

const (
	tenant       = "tenant-1"
	subscription = "subscription-1"
	spClient     = "sp-client"
	spSecret     = "sp-secret-value-never-printed"
	wiClient     = "wi-client"
	wiToken      = "wi-token-value-never-printed"
	region       = "westeurope"
)

func servicePrincipal() map[string][]byte {
	return map[string][]byte{
		azure.KeyTenantID: []byte(tenant), azure.KeyClientID: []byte(spClient),
		azure.KeyClientSecret: []byte(spSecret), azure.KeySubscriptionID: []byte(subscription),
	}
}

func workloadIdentity(token string) map[string][]byte {
	return map[string][]byte{
		azure.KeyConfig: []byte(fmt.Sprintf("apiVersion: azure.provider.extensions.gardener.cloud/v1alpha1\nkind: WorkloadIdentityConfig\nclientID: %s\ntenantID: %s\nsubscriptionID: %s\n", wiClient, tenant, subscription)),
		azure.KeyToken:  []byte(token),
	}
}

// clock is a settable clock shared by the provider and the fake cloud.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type armWorld struct {
	cloud    *azurecloud.Cloud
	provider *azure.Provider
	clock    *clock
}

// Buckets here each get their own account, so rotations in one test do not use up another's
// Azurite keys.
var provisionBuckets = []string{"sp-bucket", "wi-bucket", "rotate-age", "rotate-annotation", "rotate-published", "no-key-times", "china-bucket", "deleting", "deprovision", "bad-input", "over-https", "immutable"}

func TestProvisionThroughARM(t *testing.T) {
	cloud := azurecloud.New(provisionBuckets...)
	env := testenv.Start(t, testenv.WithAzuriteAccounts(cloud.AzuriteAccounts()...))
	cloud.AddServicePrincipal(spClient, spSecret)
	cloud.AddWorkloadIdentity(wiClient, wiToken)
	clk := &clock{t: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	cloud.SetClock(clk.now)
	w := armWorld{
		cloud: cloud, clock: clk,
		provider: azure.New(azure.WithManagementTransport(cloud.Transport()), azure.WithServiceURL(env.Azurite.ServiceURL),
			azure.WithPollFrequency(10*time.Millisecond), azure.WithClock(clk.now)),
	}
	t.Run("ServicePrincipal", w.testServicePrincipal)
	t.Run("WorkloadIdentity", w.testWorkloadIdentity)
	t.Run("RotationByAge", w.testRotationByAge)
	t.Run("RotationByAnnotation", w.testRotationByAnnotation)
	t.Run("RotationAlreadyPublished", w.testRotationAlreadyPublished)
	t.Run("KeysWithoutCreationTime", w.testKeysWithoutCreationTime)
	t.Run("CloudFromRegion", w.testCloudFromRegion)
	t.Run("ResourceGroupBeingDeleted", w.testResourceGroupBeingDeleted)
	t.Run("Deprovision", w.testDeprovision)
	t.Run("BadInput", w.testBadInput)
	t.Run("Immutability", w.testImmutability)
	t.Run("OverHTTPS", func(t *testing.T) { w.testOverHTTPS(t, env.Azurite.ServiceURL) })
}

// The cloud served over HTTPS, as processes reach it, through a custom cloud's endpoints.
func (w armWorld) testOverHTTPS(t *testing.T, serviceURL string) {
	const bucket = "over-https"
	srv, err := w.cloud.Serve(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p := azure.New(azure.WithCustomCloud(srv.URL, srv.URL), azure.WithManagementTransport(srv.Client()), azure.WithServiceURL(serviceURL))
	req := objectstore.Provisioning{Bucket: bucket, Region: region, Credentials: servicePrincipal(), Annotations: map[string]string{azure.AnnotationRotate: "true"}}
	out, err := p.Provision(ctxFor(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Description, "rotated") {
		t.Fatalf("description %q: want a rotation", out.Description)
	}
	w.roundTrip(t, bucket, out.Credentials, "over/https")
	req.Published = out.Credentials
	if err := p.Deprovision(ctxFor(t), req); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.cloud.Group(bucket); ok {
		t.Fatal("the resource group is still there")
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (w armWorld) provision(t *testing.T, req objectstore.Provisioning) objectstore.Provisioned {
	t.Helper()
	if req.Region == "" {
		req.Region = region
	}
	out, err := w.provider.Provision(ctxFor(t), req)
	if err != nil {
		t.Fatalf("Provision %s: %v", req.Bucket, err)
	}
	return out
}

// roundTrip opens the bucket with storage credentials, creates it and writes and lists an
// object in Azurite: the key is one Azurite really accepts for that account.
func (w armWorld) roundTrip(t *testing.T, bucket string, creds map[string][]byte, key string) {
	t.Helper()
	store, err := w.provider.Open(bucket, creds)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	if err := store.Create(ctx); err != nil {
		t.Fatalf("Create %s with the provisioned key: %v", bucket, err)
	}
	if err := objectstore.PutBytes(ctx, store, key, []byte("snapshot")); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	if _, err := store.Stat(ctx, key); err != nil {
		t.Fatalf("Stat: %v", err)
	}
}

func (w armWorld) testServicePrincipal(t *testing.T) {
	const bucket = "sp-bucket"
	out := w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal()})
	if loc, ok := w.cloud.Group(bucket); !ok || loc != region {
		t.Fatalf("resource group %s: exists %v in %q, want it in %s", bucket, ok, loc, region)
	}
	params, keys, ok := w.cloud.Account(bucket, azure.AccountName(bucket))
	if !ok {
		t.Fatalf("no storage account %s in group %s", azure.AccountName(bucket), bucket)
	}
	p := params.Properties
	if *params.Kind != armstorage.KindStorageV2 || *params.SKU.Name != armstorage.SKUNameStandardZRS || *p.AccessTier != armstorage.AccessTierCool ||
		!*p.EnableHTTPSTrafficOnly || *p.AllowBlobPublicAccess || *p.MinimumTLSVersion != armstorage.MinimumTLSVersionTLS12 || p.KeyPolicy != nil {
		t.Fatalf("account parameters: %+v %+v", params, p)
	}
	if got := string(out.Credentials[azure.KeyStorageAccount]); got != azure.AccountName(bucket) {
		t.Fatalf("storageAccount = %q, want %q", got, azure.AccountName(bucket))
	}
	if got := string(out.Credentials[azure.KeyStorageKey]); got != keys["key1"] {
		t.Fatal("storageKey is not the newest key (key1)")
	}
	w.roundTrip(t, bucket, out.Credentials, "shoot--a/etcd-main/v2/Full-1")

	calls := len(w.cloud.Calls())
	again := w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal(), Published: out.Credentials})
	if string(again.Credentials[azure.KeyStorageKey]) != string(out.Credentials[azure.KeyStorageKey]) || again.Description != "" {
		t.Fatalf("a second Provision changed the outcome: %q", again.Description)
	}
	if regenerated := slices.Contains(w.cloud.Calls()[calls:], "AccountsClient.RegenerateKey"); regenerated {
		t.Fatal("a second Provision without rotation config regenerated a key")
	}
}

func (w armWorld) testWorkloadIdentity(t *testing.T) {
	const bucket = "wi-bucket"
	_, err := w.provider.Provision(ctxFor(t), objectstore.Provisioning{Bucket: bucket, Region: region, Credentials: workloadIdentity("")})
	if !errors.Is(err, objectstore.ErrNotReady) || !strings.Contains(err.Error(), `"token"`) {
		t.Fatalf("without a token: %v, want ErrNotReady naming the token", err)
	}
	out := w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: workloadIdentity(wiToken)})
	w.roundTrip(t, bucket, out.Credentials, "shoot--b/etcd-main/v2/Full-1")

	_, err = w.provider.Provision(ctxFor(t), objectstore.Provisioning{Bucket: bucket, Region: region, Credentials: workloadIdentity("expired-token")})
	if !errors.Is(err, objectstore.ErrUnauthenticated) {
		t.Fatalf("with a token Entra ID refuses: %v, want ErrUnauthenticated", err)
	}
	if strings.Contains(err.Error(), "expired-token") {
		t.Fatalf("the error carries the token: %v", err)
	}
}

func rotationConfig(period, expiration int) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"azure.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupBucketConfig","rotationConfig":{"rotationPeriodDays":%d,"expirationPeriodDays":%d}}`, period, expiration))
}

func (w armWorld) testRotationByAge(t *testing.T) {
	const bucket = "rotate-age"
	config := rotationConfig(2, 3)
	first := w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal(), Config: config})
	params, _, _ := w.cloud.Account(bucket, azure.AccountName(bucket))
	if kp := params.Properties.KeyPolicy; kp == nil || *kp.KeyExpirationPeriodInDays != 3 {
		t.Fatalf("key policy %+v, want expiration after 3 days", kp)
	}
	w.roundTrip(t, bucket, first.Credentials, "before/rotation")

	w.clock.advance(24 * time.Hour)
	if out := w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal(), Config: config, Published: first.Credentials}); out.Description != "" {
		t.Fatalf("rotated after one day of two: %q", out.Description)
	}
	w.clock.advance(24 * time.Hour)
	second := w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal(), Config: config, Published: first.Credentials})
	if !strings.Contains(second.Description, "rotated storage key key2") {
		t.Fatalf("after two days: description %q, want the older key (key2) rotated", second.Description)
	}
	if string(second.Credentials[azure.KeyStorageKey]) == string(first.Credentials[azure.KeyStorageKey]) {
		t.Fatal("the published key did not change")
	}
	// The new key writes; the data written with the old one is still there.
	w.roundTrip(t, bucket, second.Credentials, "after/rotation")
	store, _ := w.provider.Open(bucket, second.Credentials)
	if _, err := store.Stat(ctxFor(t), "before/rotation"); err != nil {
		t.Fatalf("the object written before the rotation: %v", err)
	}
}

func (w armWorld) testRotationByAnnotation(t *testing.T) {
	const bucket = "rotate-annotation"
	first := w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal()})
	asked := map[string]string{azure.AnnotationRotate: "true"}
	second := w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal(), Published: first.Credentials, Annotations: asked})
	if !slices.Equal(second.Consumed, []string{azure.AnnotationRotate}) {
		t.Fatalf("consumed %v, want the rotate annotation", second.Consumed)
	}
	if string(second.Credentials[azure.KeyStorageKey]) == string(first.Credentials[azure.KeyStorageKey]) {
		t.Fatal("the annotation did not rotate the key")
	}
	w.roundTrip(t, bucket, second.Credentials, "after/annotation")
}

func (w armWorld) testRotationAlreadyPublished(t *testing.T) {
	const bucket = "rotate-published"
	first := w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal()})
	asked := map[string]string{azure.AnnotationRotate: "true"}
	second := w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal(), Published: first.Credentials, Annotations: asked})
	// The rotation happened but, say, the generated secret was not written: the retry finds
	// the published key no longer the newest and must not rotate the key entries still use.
	calls := len(w.cloud.Calls())
	third := w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal(), Published: first.Credentials, Annotations: asked})
	if slices.Contains(w.cloud.Calls()[calls:], "AccountsClient.RegenerateKey") {
		t.Fatal("rotated again although the published key was no longer the newest")
	}
	if string(third.Credentials[azure.KeyStorageKey]) != string(second.Credentials[azure.KeyStorageKey]) || !slices.Equal(third.Consumed, []string{azure.AnnotationRotate}) {
		t.Fatalf("the retry should publish the rotated key and consume the annotation: consumed %v", third.Consumed)
	}
}

func (w armWorld) testKeysWithoutCreationTime(t *testing.T) {
	const bucket = "no-key-times"
	config := rotationConfig(30, 60)
	first := w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal(), Config: config})
	w.cloud.ForgetKeyCreationTimes(azure.AccountName(bucket))
	second := w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal(), Config: config, Published: first.Credentials})
	if !strings.Contains(second.Description, "key expiration policy deferred") || !strings.Contains(second.Description, "rotated storage key") {
		t.Fatalf("description %q: want the rotation of a key without creation time and the deferred policy", second.Description)
	}
	w.roundTrip(t, bucket, second.Credentials, "after/rolled")
	// Once the key Azure refused the policy for is rotated, the policy applies again.
	third := w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal(), Config: config, Published: second.Credentials, Annotations: map[string]string{azure.AnnotationRotate: "true"}})
	if strings.Contains(third.Description, "deferred") || !strings.Contains(third.Description, "rotated storage key") {
		t.Fatalf("after the second rotation: %q, want a rotation and no deferral", third.Description)
	}
	params, _, _ := w.cloud.Account(bucket, azure.AccountName(bucket))
	if params.Properties.KeyPolicy == nil {
		t.Fatal("the key expiration policy is still not applied after both keys were regenerated")
	}
}

func (w armWorld) testCloudFromRegion(t *testing.T) {
	const bucket = "china-bucket"
	p := azure.New(azure.WithManagementTransport(w.cloud.Transport()), azure.WithPollFrequency(10*time.Millisecond))
	out, err := p.Provision(ctxFor(t), objectstore.Provisioning{Bucket: bucket, Region: "chinanorth3", Credentials: servicePrincipal()})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out.Credentials[azure.KeyDomain]); got != "blob.core.chinacloudapi.cn" {
		t.Fatalf("domain %q for chinanorth3, want blob.core.chinacloudapi.cn", got)
	}
	cfg := []byte(`{"cloudConfiguration":{"name":"AzureGovernment"}}`)
	out, err = p.Provision(ctxFor(t), objectstore.Provisioning{Bucket: bucket, Region: "chinanorth3", Credentials: servicePrincipal(), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out.Credentials[azure.KeyDomain]); got != "blob.core.usgovcloudapi.net" {
		t.Fatalf("domain %q with cloudConfiguration AzureGovernment, want blob.core.usgovcloudapi.net", got)
	}
}

func (w armWorld) testResourceGroupBeingDeleted(t *testing.T) {
	const bucket = "deleting"
	w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal()})
	w.cloud.MarkDeleting(bucket)
	_, err := w.provider.Provision(ctxFor(t), objectstore.Provisioning{Bucket: bucket, Region: region, Credentials: servicePrincipal()})
	if err == nil || !strings.Contains(err.Error(), "ResourceGroupBeingDeleted") || !strings.Contains(err.Error(), "creating resource group deleting") {
		t.Fatalf("err = %v, want the group's deletion named", err)
	}
	for _, s := range []error{objectstore.ErrInvalidConfig, objectstore.ErrUnauthorized, objectstore.ErrUnauthenticated} {
		if errors.Is(err, s) {
			t.Fatalf("a group being deleted is a wait, not %v", s)
		}
	}
}

func (w armWorld) testDeprovision(t *testing.T) {
	const bucket = "deprovision"
	out := w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal()})
	w.roundTrip(t, bucket, out.Credentials, "shoot--c/etcd-main/v2/Full-1")
	req := objectstore.Provisioning{Bucket: bucket, Region: region, Credentials: servicePrincipal(), Published: out.Credentials}
	if err := w.provider.Deprovision(ctxFor(t), req); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.cloud.Group(bucket); ok {
		t.Fatal("the resource group is still there")
	}
	store, _ := w.provider.Open(bucket, out.Credentials)
	err := store.List(ctxFor(t), "", func([]string) error { return nil })
	if !errors.Is(err, objectstore.ErrBucketNotFound) {
		t.Fatalf("listing the container after Deprovision: %v, want ErrBucketNotFound", err)
	}
	if err := w.provider.Deprovision(ctxFor(t), req); err != nil {
		t.Fatalf("a second Deprovision (all gone): %v", err)
	}
}

func (w armWorld) testBadInput(t *testing.T) {
	without := func(key string) map[string][]byte {
		c := servicePrincipal()
		delete(c, key)
		return c
	}
	wrongSecret := servicePrincipal()
	wrongSecret[azure.KeyClientSecret] = []byte("wrong-secret-value")
	denied := servicePrincipal()
	denied[azure.KeyClientID] = []byte("denied-client")
	w.cloud.AddServicePrincipal("denied-client", spSecret)
	w.cloud.Deny("denied-client")

	for _, tc := range []struct {
		name    string
		creds   map[string][]byte
		config  string
		want    error
		mention string
	}{
		{"missing clientSecret", without(azure.KeyClientSecret), "", objectstore.ErrMissingCredentials, `"clientSecret"`},
		{"missing subscriptionID", without(azure.KeySubscriptionID), "", objectstore.ErrMissingCredentials, `"subscriptionID"`},
		{"wrong client secret", wrongSecret, "", objectstore.ErrUnauthenticated, "AADSTS7000215"},
		{"no role on the subscription", denied, "", objectstore.ErrUnauthorized, "AuthorizationFailed"},
		{"unknown cloud", servicePrincipal(), `{"cloudConfiguration":{"name":"AzureMars"}}`, objectstore.ErrInvalidConfig, "AzureMars"},
		{"rotation period too short", servicePrincipal(), `{"rotationConfig":{"rotationPeriodDays":1}}`, objectstore.ErrInvalidConfig, "rotationPeriodDays"},
		{"expiration not after rotation", servicePrincipal(), `{"rotationConfig":{"rotationPeriodDays":7,"expirationPeriodDays":7}}`, objectstore.ErrInvalidConfig, "expirationPeriodDays"},
		{"misspelt field", servicePrincipal(), `{"rotationConfg":{}}`, objectstore.ErrInvalidConfig, "rotationConfg"},
		{"retention not whole days", servicePrincipal(), `{"immutability":{"retentionType":"bucket","retentionPeriod":"36h"}}`, objectstore.ErrInvalidConfig, "immutability.retentionPeriod"},
		{"retention shorter than a day", servicePrincipal(), `{"immutability":{"retentionType":"bucket","retentionPeriod":"12h"}}`, objectstore.ErrInvalidConfig, "immutability.retentionPeriod"},
		{"retention type", servicePrincipal(), `{"immutability":{"retentionType":"object","retentionPeriod":"24h"}}`, objectstore.ErrInvalidConfig, "immutability.retentionType"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := w.provider.Provision(ctxFor(t), objectstore.Provisioning{Bucket: "bad-input", Region: region, Credentials: tc.creds, Config: []byte(tc.config)})
			t.Log(err)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("err = %v, want %v mentioning %s", err, tc.want, tc.mention)
			}
			for _, secret := range []string{spSecret, "wrong-secret-value", wiToken} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error carries a secret: %v", err)
				}
			}
		})
	}
}

// An immutability policy from the providerConfig: created, locked, extended, never weakened,
// with the account's rule for marked blobs beside the operator's; then marking on Azurite's
// blob index tags, and a deletion that empties the container first.
func (w armWorld) testImmutability(t *testing.T) {
	const bucket = "immutable"
	account := azure.AccountName(bucket)
	config := func(period string, locked bool) []byte {
		return []byte(fmt.Sprintf(`{"immutability":{"locked":%v,"retentionPeriod":%q,"retentionType":"bucket"}}`, locked, period))
	}
	policy := func(wantDays int32, wantLocked bool) {
		t.Helper()
		days, locked, ok := w.cloud.ImmutabilityPolicy(bucket, account, bucket)
		if !ok || days != wantDays || locked != wantLocked {
			t.Fatalf("immutability policy: exists %v, %d days, locked %v; want %d days, locked %v", ok, days, locked, wantDays, wantLocked)
		}
	}
	provision := func(config []byte, published map[string][]byte) objectstore.Provisioned {
		t.Helper()
		return w.provision(t, objectstore.Provisioning{Bucket: bucket, Credentials: servicePrincipal(), Config: config, Published: published})
	}

	out := provision(nil, nil)
	if _, _, ok := w.cloud.ImmutabilityPolicy(bucket, account, bucket); ok {
		t.Fatal("a policy was set without immutability in the providerConfig")
	}
	operatorRule := &armstorage.ManagementPolicyRule{Name: to.Ptr("operator-archive"), Type: to.Ptr(armstorage.RuleTypeLifecycle), Enabled: to.Ptr(true)}
	if !w.cloud.AddManagementRule(bucket, account, operatorRule) {
		t.Fatal("no account to add the operator's rule to")
	}

	out = provision(config("24h", false), out.Credentials)
	policy(1, false)
	if !strings.Contains(out.Description, "immutability policy set: 1 days, unlocked") {
		t.Fatalf("description %q", out.Description)
	}
	var names []string
	for _, r := range w.cloud.ManagementRules(bucket, account) {
		names = append(names, *r.Name)
		if *r.Name == azure.LifecycleRule {
			f := r.Definition.Filters
			if len(f.BlobIndexMatch) != 1 || *f.BlobIndexMatch[0].Name != azure.MarkTag || *f.BlobIndexMatch[0].Value != azure.MarkValue ||
				*r.Definition.Actions.BaseBlob.Delete.DaysAfterCreationGreaterThan != 0 {
				t.Fatalf("rule %s: %+v", azure.LifecycleRule, r.Definition)
			}
		}
	}
	if !slices.Equal(names, []string{"operator-archive", azure.LifecycleRule}) {
		t.Fatalf("management policy rules %v: want the operator's kept and %s added", names, azure.LifecycleRule)
	}

	provision(config("48h", true), out.Credentials)
	policy(2, true)
	out = provision(config("24h", false), out.Credentials)
	policy(2, true)
	if !strings.Contains(out.Description, "keeps its immutability policy (2 days, locked): the asked 1 days, unlocked would weaken it") {
		t.Fatalf("a weaker ask: description %q", out.Description)
	}
	provision(config("72h", true), out.Credentials)
	policy(3, true)
	out = provision(nil, out.Credentials)
	policy(3, true)

	// A storage key alone cannot ask for immutability.
	keyOnly := map[string][]byte{azure.KeyStorageAccount: out.Credentials[azure.KeyStorageAccount], azure.KeyStorageKey: out.Credentials[azure.KeyStorageKey], azure.KeyEndpoint: out.Credentials[azure.KeyEndpoint]}
	store, err := w.provider.Open(bucket, keyOnly)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.(objectstore.Configurable).CreateWithConfig(ctxFor(t), config("24h", false)); !errors.Is(err, objectstore.ErrInvalidConfig) || !strings.Contains(err.Error(), "service-principal") {
		t.Fatalf("CreateWithConfig with a storage key asking for immutability: %v, want ErrInvalidConfig naming the credentials needed", err)
	}

	// Marking, on Azurite's blob index tags; the lock's end is the blob's creation plus the
	// period the container records.
	ctx := ctxFor(t)
	before := time.Now().Add(-time.Minute)
	for _, k := range []string{"shoot--d/etcd-main/v2/Full-1", "shoot--d/etcd-main/v2/Incr-2", "shoot--e/etcd-main/v2/Full-1"} {
		if err := objectstore.PutBytes(ctx, store, k, []byte("snapshot")); err != nil {
			t.Fatal(err)
		}
	}
	locking := store.(objectstore.Locking)
	until, note, err := locking.Mark(ctx, []string{"shoot--d/etcd-main/v2/Full-1", "shoot--d/etcd-main/v2/Incr-2"})
	if err != nil || note != "" {
		t.Fatalf("Mark: %v (note %q)", err, note)
	}
	if lo, hi := before.Add(72*time.Hour), time.Now().Add(72*time.Hour+time.Minute); until.Before(lo) || until.After(hi) {
		t.Fatalf("Mark: locked until %s, want the blobs' creation plus 3 days (%s..%s)", until, lo, hi)
	}
	for k, want := range map[string]bool{"shoot--d/etcd-main/v2/Full-1": true, "shoot--d/etcd-main/v2/Incr-2": true, "shoot--e/etcd-main/v2/Full-1": false, "shoot--d/gone": false} {
		if got, err := locking.Marked(ctx, k); err != nil || got != want {
			t.Fatalf("Marked(%s) = %v, %v; want %v", k, got, err, want)
		}
	}

	// Deletion empties the immutable container first (Azurite enforces no policy: everything
	// goes), then deletes it and the resource group.
	if err := w.provider.Deprovision(ctx, objectstore.Provisioning{Bucket: bucket, Region: region, Credentials: servicePrincipal(), Published: out.Credentials}); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.cloud.Group(bucket); ok {
		t.Fatal("the resource group is still there")
	}
}
