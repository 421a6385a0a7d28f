// Package azurecloud is Azure's management plane for tests: Microsoft Entra ID's token
// endpoint and the Azure Resource Manager calls housekeeper makes (resource groups, storage
// accounts and their keys), served by the Azure SDK's own fake servers with state behind them.
// The data plane is a real Azurite: the accounts the fake "creates" are the ones Azurite was
// started with (AzuriteAccounts), so a key ListKeys returns really opens a container there.
//
// Azurite knows two keys per account. An account starts with the first as its newest key and
// a second, older key that Azurite does not know; the first regeneration hands out Azurite's
// second key, and any later one a key Azurite refuses.
package azurecloud

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources"
	resourcesfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage"
	storagefake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage/fake"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
)

// Cloud is one fake Azure tenant's management plane. Methods are safe for concurrent use.
type Cloud struct {
	mu         sync.Mutex
	secrets    map[string]string // clientID → client secret
	assertions map[string]string // clientID → the workload identity token it accepts
	denied     map[string]bool   // clientID → has no role on the subscription
	groups     map[string]*group
	azurite    map[string][]string // account → the two keys Azurite knows
	handedOut  map[string]int      // account → how many of them were handed out
	calls      []string
	now        func() time.Time

	resources *resourcesfake.ServerFactoryTransport
	storage   *storagefake.ServerFactoryTransport
}

type group struct {
	location string
	deleting bool
	accounts map[string]*account
}

type account struct {
	params     armstorage.AccountCreateParameters
	keys       []*armstorage.AccountKey
	policies   map[string]*immutabilityPolicy // container → its policy
	management *armstorage.ManagementPolicySchema
}

// immutabilityPolicy is a container's time-based retention policy; etag counts its versions.
type immutabilityPolicy struct {
	days   int32
	locked bool
	etag   int
}

// New returns a cloud whose storage accounts can be those of buckets (named as
// azure.AccountName names them); start Azurite with AzuriteAccounts.
func New(buckets ...string) *Cloud {
	c := &Cloud{
		secrets: map[string]string{}, assertions: map[string]string{}, denied: map[string]bool{},
		groups: map[string]*group{}, azurite: map[string][]string{}, handedOut: map[string]int{},
		now: time.Now,
	}
	for _, b := range buckets {
		c.azurite[azure.AccountName(b)] = []string{randomKey(), randomKey()}
	}
	c.resources = resourcesfake.NewServerFactoryTransport(&resourcesfake.ServerFactory{ResourceGroupsServer: c.resourceGroups()})
	c.storage = storagefake.NewServerFactoryTransport(&storagefake.ServerFactory{
		AccountsServer: c.accounts(), BlobContainersServer: c.containers(), ManagementPoliciesServer: c.managementPolicies(),
	})
	return c
}

// AzuriteAccounts is the AZURITE_ACCOUNTS entries for the buckets' accounts, each with the two
// keys the fake hands out.
func (c *Cloud) AzuriteAccounts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for name, keys := range c.azurite {
		out = append(out, name+":"+strings.Join(keys, ":"))
	}
	slices.Sort(out)
	return out
}

// AddServicePrincipal lets clientID authenticate with secret.
func (c *Cloud) AddServicePrincipal(clientID, secret string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.secrets[clientID] = secret
}

// AddWorkloadIdentity lets clientID authenticate with token as its client assertion.
func (c *Cloud) AddWorkloadIdentity(clientID, token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.assertions[clientID] = token
}

// Deny takes clientID's role on the subscription away: it authenticates, ARM refuses it.
func (c *Cloud) Deny(clientID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.denied[clientID] = true
}

// MarkDeleting puts the resource group into deletion, as Azure shows a group being deleted.
func (c *Cloud) MarkDeleting(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.groups[name]; ok {
		g.deleting = true
	}
}

// ForgetKeyCreationTimes makes the account's keys lose their creation times, as keys do after
// credentials were rolled (provider-azure#1157); Azure then refuses a key expiration policy.
func (c *Cloud) ForgetKeyCreationTimes(accountName string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.groups {
		if a, ok := g.accounts[accountName]; ok {
			for _, k := range a.keys {
				k.CreationTime = nil
			}
		}
	}
}

// SetClock sets the clock key creation times are taken from.
func (c *Cloud) SetClock(now func() time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
}

// Group reports whether the resource group exists, and its location.
func (c *Cloud) Group(name string) (location string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[name]
	if !ok {
		return "", false
	}
	return g.location, true
}

// Account returns the storage account's create parameters and its keys (name → value).
func (c *Cloud) Account(groupName, accountName string) (armstorage.AccountCreateParameters, map[string]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[groupName]
	if !ok {
		return armstorage.AccountCreateParameters{}, nil, false
	}
	a, ok := g.accounts[accountName]
	if !ok {
		return armstorage.AccountCreateParameters{}, nil, false
	}
	keys := map[string]string{}
	for _, k := range a.keys {
		keys[*k.KeyName] = *k.Value
	}
	return a.params, keys, true
}

// ImmutabilityPolicy returns the container's immutability policy: its period and whether it
// is locked; ok is false when it has none.
func (c *Cloud) ImmutabilityPolicy(groupName, accountName, container string) (days int32, locked, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, _ := c.account(groupName, accountName)
	if a == nil || a.policies[container] == nil {
		return 0, false, false
	}
	p := a.policies[container]
	return p.days, p.locked, true
}

// ManagementRules returns the rules of the account's management policy.
func (c *Cloud) ManagementRules(groupName, accountName string) []*armstorage.ManagementPolicyRule {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, _ := c.account(groupName, accountName)
	if a == nil || a.management == nil {
		return nil
	}
	return slices.Clone(a.management.Rules)
}

// AddManagementRule adds a rule to the account's management policy, as an operator would.
func (c *Cloud) AddManagementRule(groupName, accountName string, rule *armstorage.ManagementPolicyRule) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, _ := c.account(groupName, accountName)
	if a == nil {
		return false
	}
	if a.management == nil {
		a.management = &armstorage.ManagementPolicySchema{}
	}
	a.management.Rules = append(a.management.Rules, rule)
	return true
}

// Calls lists the ARM operations served so far, like "AccountsClient.RegenerateKey".
func (c *Cloud) Calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// Transport serves Entra ID's and ARM's requests; pass it to azure.WithManagementTransport.
func (c *Cloud) Transport() policy.Transporter { return transport{c} }

type transport struct{ c *Cloud }

func (t transport) Do(req *http.Request) (*http.Response, error) {
	api, ok := req.Context().Value(azruntime.CtxAPINameKey{}).(string)
	if !ok { // not an ARM client: the credential talking to Entra ID
		rec := httptest.NewRecorder()
		t.c.entra(rec, req)
		return rec.Result(), nil
	}
	clientID, status, code := t.c.caller(req)
	if status != 0 {
		return armError(req, status, code), nil
	}
	t.c.mu.Lock()
	t.c.calls = append(t.c.calls, api)
	t.c.mu.Unlock()
	_ = clientID
	if strings.HasPrefix(api, "ResourceGroupsClient.") {
		return t.c.resources.Do(req)
	}
	return t.c.storage.Do(req)
}

// caller checks the bearer token the fake issued and the caller's role.
func (c *Cloud) caller(req *http.Request) (clientID string, status int, code string) {
	clientID, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer fake-token-for-")
	c.mu.Lock()
	defer c.mu.Unlock()
	_, sp := c.secrets[clientID]
	_, wi := c.assertions[clientID]
	switch {
	case !ok || (!sp && !wi):
		return "", http.StatusUnauthorized, "InvalidAuthenticationToken"
	case c.denied[clientID]:
		return clientID, http.StatusForbidden, "AuthorizationFailed"
	}
	return clientID, 0, ""
}

func armError(req *http.Request, status int, code string) *http.Response {
	body := fmt.Sprintf(`{"error":{"code":%q,"message":"fake Azure Resource Manager: %s"}}`, code, code)
	return &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Header: http.Header{"Content-Type": {"application/json"}, "X-Ms-Error-Code": {code}},
		Body:   io.NopCloser(strings.NewReader(body)), Request: req, ContentLength: int64(len(body)),
	}
}

// entra answers what MSAL asks of Microsoft Entra ID: instance discovery, the tenant's OpenID
// configuration, and tokens for the client credentials grant with a secret or an assertion.
func (c *Cloud) entra(w http.ResponseWriter, r *http.Request) {
	base := "https://" + r.URL.Host
	path := r.URL.Path
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasSuffix(path, "/discovery/instance"):
		tenant := "common"
		if u, err := url.Parse(r.URL.Query().Get("authorization_endpoint")); err == nil {
			if parts := strings.Split(strings.Trim(u.Path, "/"), "/"); len(parts) > 0 && parts[0] != "" {
				tenant = parts[0]
			}
		}
		writeJSON(w, map[string]any{
			"tenant_discovery_endpoint": base + "/" + tenant + "/v2.0/.well-known/openid-configuration",
			"api-version":               "1.1",
			"metadata":                  []map[string]any{{"preferred_network": r.URL.Host, "preferred_cache": r.URL.Host, "aliases": []string{r.URL.Host}}},
		})
	case strings.HasSuffix(path, "/.well-known/openid-configuration"):
		tenant := strings.Split(strings.Trim(path, "/"), "/")[0]
		writeJSON(w, map[string]any{
			"token_endpoint":         base + "/" + tenant + "/oauth2/v2.0/token",
			"authorization_endpoint": base + "/" + tenant + "/oauth2/v2.0/authorize",
			"issuer":                 base + "/" + tenant + "/v2.0",
		})
	case strings.HasSuffix(path, "/oauth2/v2.0/token") && r.Method == http.MethodPost:
		if err := r.ParseForm(); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		clientID := r.PostForm.Get("client_id")
		c.mu.Lock()
		secret, sp := c.secrets[clientID]
		assertion, wi := c.assertions[clientID]
		c.mu.Unlock()
		ok := (sp && r.PostForm.Get("client_secret") == secret) ||
			(wi && r.PostForm.Get("client_assertion") == assertion)
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			writeJSON(w, map[string]any{"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided.", "error_codes": []int{7000215}})
			return
		}
		writeJSON(w, map[string]any{"token_type": "Bearer", "expires_in": 3600, "ext_expires_in": 3600, "access_token": "fake-token-for-" + clientID})
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func writeJSON(w http.ResponseWriter, v any) { _ = json.NewEncoder(w).Encode(v) }

func (c *Cloud) resourceGroups() resourcesfake.ResourceGroupsServer {
	return resourcesfake.ResourceGroupsServer{
		CreateOrUpdate: func(_ context.Context, name string, params armresources.ResourceGroup, _ *armresources.ResourceGroupsClientCreateOrUpdateOptions) (resp azfake.Responder[armresources.ResourceGroupsClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
			c.mu.Lock()
			defer c.mu.Unlock()
			g, ok := c.groups[name]
			switch {
			case ok && g.deleting:
				errResp.SetResponseError(http.StatusConflict, "ResourceGroupBeingDeleted")
				return
			case ok && !strings.EqualFold(g.location, deref(params.Location)):
				errResp.SetResponseError(http.StatusConflict, "InvalidResourceGroupLocation")
				return
			case !ok:
				c.groups[name] = &group{location: deref(params.Location), accounts: map[string]*account{}}
			}
			resp.SetResponse(http.StatusOK, armresources.ResourceGroupsClientCreateOrUpdateResponse{ResourceGroup: armresources.ResourceGroup{
				Name: to.Ptr(name), Location: params.Location, Properties: &armresources.ResourceGroupProperties{ProvisioningState: to.Ptr("Succeeded")},
			}}, nil)
			return
		},
		BeginDelete: func(_ context.Context, name string, _ *armresources.ResourceGroupsClientBeginDeleteOptions) (resp azfake.PollerResponder[armresources.ResourceGroupsClientDeleteResponse], errResp azfake.ErrorResponder) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if _, ok := c.groups[name]; !ok {
				errResp.SetResponseError(http.StatusNotFound, "ResourceGroupNotFound")
				return
			}
			delete(c.groups, name)
			resp.SetTerminalResponse(http.StatusOK, armresources.ResourceGroupsClientDeleteResponse{}, nil)
			return
		},
	}
}

func (c *Cloud) accounts() storagefake.AccountsServer {
	return storagefake.AccountsServer{
		BeginCreate: func(_ context.Context, groupName, name string, params armstorage.AccountCreateParameters, _ *armstorage.AccountsClientBeginCreateOptions) (resp azfake.PollerResponder[armstorage.AccountsClientCreateResponse], errResp azfake.ErrorResponder) {
			c.mu.Lock()
			defer c.mu.Unlock()
			g, ok := c.groups[groupName]
			if !ok {
				errResp.SetResponseError(http.StatusNotFound, "ResourceGroupNotFound")
				return
			}
			a, ok := g.accounts[name]
			if !ok {
				now := c.now()
				a = &account{keys: []*armstorage.AccountKey{
					{KeyName: to.Ptr("key1"), Value: to.Ptr(c.nextKey(name)), CreationTime: to.Ptr(now), Permissions: to.Ptr(armstorage.KeyPermissionFull)},
					{KeyName: to.Ptr("key2"), Value: to.Ptr(randomKey()), CreationTime: to.Ptr(now.Add(-time.Minute)), Permissions: to.Ptr(armstorage.KeyPermissionFull)},
				}}
				g.accounts[name] = a
			}
			if params.Properties != nil && params.Properties.KeyPolicy != nil &&
				slices.ContainsFunc(a.keys, func(k *armstorage.AccountKey) bool { return k.CreationTime == nil }) {
				errResp.SetResponseError(http.StatusBadRequest, "NoKeyCreationTime")
				return
			}
			a.params = params
			resp.SetTerminalResponse(http.StatusOK, armstorage.AccountsClientCreateResponse{Account: armstorage.Account{
				Name: to.Ptr(name), Location: params.Location, Kind: params.Kind, SKU: params.SKU,
				Properties: &armstorage.AccountProperties{ProvisioningState: to.Ptr(armstorage.ProvisioningStateSucceeded)},
			}}, nil)
			return
		},
		ListKeys: func(_ context.Context, groupName, name string, _ *armstorage.AccountsClientListKeysOptions) (resp azfake.Responder[armstorage.AccountsClientListKeysResponse], errResp azfake.ErrorResponder) {
			c.mu.Lock()
			defer c.mu.Unlock()
			a, code := c.account(groupName, name)
			if a == nil {
				errResp.SetResponseError(http.StatusNotFound, code)
				return
			}
			resp.SetResponse(http.StatusOK, armstorage.AccountsClientListKeysResponse{AccountListKeysResult: armstorage.AccountListKeysResult{Keys: copyKeys(a.keys)}}, nil)
			return
		},
		RegenerateKey: func(_ context.Context, groupName, name string, params armstorage.AccountRegenerateKeyParameters, _ *armstorage.AccountsClientRegenerateKeyOptions) (resp azfake.Responder[armstorage.AccountsClientRegenerateKeyResponse], errResp azfake.ErrorResponder) {
			c.mu.Lock()
			defer c.mu.Unlock()
			a, code := c.account(groupName, name)
			if a == nil {
				errResp.SetResponseError(http.StatusNotFound, code)
				return
			}
			i := slices.IndexFunc(a.keys, func(k *armstorage.AccountKey) bool { return *k.KeyName == deref(params.KeyName) })
			if i < 0 {
				errResp.SetResponseError(http.StatusBadRequest, "InvalidValuesForRequestParameters")
				return
			}
			a.keys[i].Value = to.Ptr(c.nextKey(name))
			a.keys[i].CreationTime = to.Ptr(c.after(a.keys))
			resp.SetResponse(http.StatusOK, armstorage.AccountsClientRegenerateKeyResponse{AccountListKeysResult: armstorage.AccountListKeysResult{Keys: copyKeys(a.keys)}}, nil)
			return
		},
	}
}

// containers serves a container's immutability policy as Azure does: CreateOrUpdate only
// while it is unlocked, Lock once, Extend only a locked one and never shorter, each with the
// policy's current ETag (412 otherwise).
func (c *Cloud) containers() storagefake.BlobContainersServer {
	type policyResponse = armstorage.ImmutabilityPolicy
	view := func(p *immutabilityPolicy) policyResponse {
		state := armstorage.ImmutabilityPolicyStateUnlocked
		if p.locked {
			state = armstorage.ImmutabilityPolicyStateLocked
		}
		return policyResponse{Name: to.Ptr("default"), Etag: to.Ptr(fmt.Sprintf(`"%d"`, p.etag)),
			Properties: &armstorage.ImmutabilityPolicyProperty{ImmutabilityPeriodSinceCreationInDays: to.Ptr(p.days), State: &state}}
	}
	// find returns the account's policies, or the error to answer.
	find := func(groupName, accountName, container, ifMatch string, mustExist bool) (*account, *immutabilityPolicy, int, string) {
		a, code := c.account(groupName, accountName)
		if a == nil {
			return nil, nil, http.StatusNotFound, code
		}
		if a.policies == nil {
			a.policies = map[string]*immutabilityPolicy{}
		}
		p := a.policies[container]
		switch {
		case p == nil && mustExist:
			return nil, nil, http.StatusNotFound, "ImmutabilityPolicyNotFound"
		case ifMatch != "" && ifMatch != "*" && (p == nil || ifMatch != fmt.Sprintf(`"%d"`, p.etag)):
			return nil, nil, http.StatusPreconditionFailed, "ConditionNotMet"
		}
		return a, p, 0, ""
	}
	return storagefake.BlobContainersServer{
		GetImmutabilityPolicy: func(_ context.Context, groupName, accountName, container string, _ *armstorage.BlobContainersClientGetImmutabilityPolicyOptions) (resp azfake.Responder[armstorage.BlobContainersClientGetImmutabilityPolicyResponse], errResp azfake.ErrorResponder) {
			c.mu.Lock()
			defer c.mu.Unlock()
			_, p, status, code := find(groupName, accountName, container, "", true)
			if status != 0 {
				errResp.SetResponseError(status, code)
				return
			}
			resp.SetResponse(http.StatusOK, armstorage.BlobContainersClientGetImmutabilityPolicyResponse{ImmutabilityPolicy: view(p), ETag: view(p).Etag}, nil)
			return
		},
		CreateOrUpdateImmutabilityPolicy: func(_ context.Context, groupName, accountName, container string, opts *armstorage.BlobContainersClientCreateOrUpdateImmutabilityPolicyOptions) (resp azfake.Responder[armstorage.BlobContainersClientCreateOrUpdateImmutabilityPolicyResponse], errResp azfake.ErrorResponder) {
			c.mu.Lock()
			defer c.mu.Unlock()
			a, p, status, code := find(groupName, accountName, container, deref(opts.IfMatch), false)
			switch {
			case status != 0:
				errResp.SetResponseError(status, code)
				return
			case p != nil && p.locked:
				errResp.SetResponseError(http.StatusConflict, "ImmutabilityPolicyUpdateOnLockedPolicy")
				return
			case opts.Parameters == nil || opts.Parameters.Properties == nil || opts.Parameters.Properties.ImmutabilityPeriodSinceCreationInDays == nil:
				errResp.SetResponseError(http.StatusBadRequest, "InvalidRequestBody")
				return
			case p == nil:
				p = &immutabilityPolicy{}
				a.policies[container] = p
			}
			p.days, p.etag = *opts.Parameters.Properties.ImmutabilityPeriodSinceCreationInDays, p.etag+1
			resp.SetResponse(http.StatusOK, armstorage.BlobContainersClientCreateOrUpdateImmutabilityPolicyResponse{ImmutabilityPolicy: view(p), ETag: view(p).Etag}, nil)
			return
		},
		LockImmutabilityPolicy: func(_ context.Context, groupName, accountName, container, ifMatch string, _ *armstorage.BlobContainersClientLockImmutabilityPolicyOptions) (resp azfake.Responder[armstorage.BlobContainersClientLockImmutabilityPolicyResponse], errResp azfake.ErrorResponder) {
			c.mu.Lock()
			defer c.mu.Unlock()
			_, p, status, code := find(groupName, accountName, container, ifMatch, true)
			if status != 0 {
				errResp.SetResponseError(status, code)
				return
			}
			p.locked, p.etag = true, p.etag+1
			resp.SetResponse(http.StatusOK, armstorage.BlobContainersClientLockImmutabilityPolicyResponse{ImmutabilityPolicy: view(p), ETag: view(p).Etag}, nil)
			return
		},
		ExtendImmutabilityPolicy: func(_ context.Context, groupName, accountName, container, ifMatch string, opts *armstorage.BlobContainersClientExtendImmutabilityPolicyOptions) (resp azfake.Responder[armstorage.BlobContainersClientExtendImmutabilityPolicyResponse], errResp azfake.ErrorResponder) {
			c.mu.Lock()
			defer c.mu.Unlock()
			_, p, status, code := find(groupName, accountName, container, ifMatch, true)
			switch {
			case status != 0:
				errResp.SetResponseError(status, code)
				return
			case !p.locked:
				errResp.SetResponseError(http.StatusConflict, "ImmutabilityPolicyExtendOnUnlockedPolicy")
				return
			case opts == nil || opts.Parameters == nil || opts.Parameters.Properties == nil || opts.Parameters.Properties.ImmutabilityPeriodSinceCreationInDays == nil ||
				*opts.Parameters.Properties.ImmutabilityPeriodSinceCreationInDays < p.days:
				errResp.SetResponseError(http.StatusBadRequest, "ImmutabilityPolicyInvalidPeriod")
				return
			}
			p.days, p.etag = *opts.Parameters.Properties.ImmutabilityPeriodSinceCreationInDays, p.etag+1
			resp.SetResponse(http.StatusOK, armstorage.BlobContainersClientExtendImmutabilityPolicyResponse{ImmutabilityPolicy: view(p), ETag: view(p).Etag}, nil)
			return
		},
	}
}

// managementPolicies serves an account's one management policy, "default".
func (c *Cloud) managementPolicies() storagefake.ManagementPoliciesServer {
	return storagefake.ManagementPoliciesServer{
		Get: func(_ context.Context, groupName, accountName string, _ armstorage.ManagementPolicyName, _ *armstorage.ManagementPoliciesClientGetOptions) (resp azfake.Responder[armstorage.ManagementPoliciesClientGetResponse], errResp azfake.ErrorResponder) {
			c.mu.Lock()
			defer c.mu.Unlock()
			a, code := c.account(groupName, accountName)
			switch {
			case a == nil:
				errResp.SetResponseError(http.StatusNotFound, code)
				return
			case a.management == nil:
				errResp.SetResponseError(http.StatusNotFound, "ManagementPolicyNotFound")
				return
			}
			resp.SetResponse(http.StatusOK, armstorage.ManagementPoliciesClientGetResponse{ManagementPolicy: armstorage.ManagementPolicy{
				Name: to.Ptr("default"), Properties: &armstorage.ManagementPolicyProperties{Policy: &armstorage.ManagementPolicySchema{Rules: slices.Clone(a.management.Rules)}},
			}}, nil)
			return
		},
		CreateOrUpdate: func(_ context.Context, groupName, accountName string, _ armstorage.ManagementPolicyName, params armstorage.ManagementPolicy, _ *armstorage.ManagementPoliciesClientCreateOrUpdateOptions) (resp azfake.Responder[armstorage.ManagementPoliciesClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
			c.mu.Lock()
			defer c.mu.Unlock()
			a, code := c.account(groupName, accountName)
			if a == nil {
				errResp.SetResponseError(http.StatusNotFound, code)
				return
			}
			if params.Properties == nil || params.Properties.Policy == nil {
				errResp.SetResponseError(http.StatusBadRequest, "InvalidRequestBody")
				return
			}
			a.management = &armstorage.ManagementPolicySchema{Rules: slices.Clone(params.Properties.Policy.Rules)}
			resp.SetResponse(http.StatusOK, armstorage.ManagementPoliciesClientCreateOrUpdateResponse{ManagementPolicy: params}, nil)
			return
		},
	}
}

// after is now, or just after the newest key if the test's clock stands still: a
// regenerated key is always the newest, as it is in Azure.
func (c *Cloud) after(keys []*armstorage.AccountKey) time.Time {
	t := c.now()
	for _, k := range keys {
		if k.CreationTime != nil && !k.CreationTime.Before(t) {
			t = k.CreationTime.Add(time.Second)
		}
	}
	return t
}

// account finds an account, or says which Azure error code its absence has.
func (c *Cloud) account(groupName, name string) (*account, string) {
	g, ok := c.groups[groupName]
	if !ok {
		return nil, "ResourceGroupNotFound"
	}
	a, ok := g.accounts[name]
	if !ok {
		return nil, "ResourceNotFound"
	}
	return a, ""
}

// nextKey hands out the account's next Azurite key, or a random one Azurite refuses.
func (c *Cloud) nextKey(accountName string) string {
	keys, n := c.azurite[accountName], c.handedOut[accountName]
	if n >= len(keys) {
		return randomKey()
	}
	c.handedOut[accountName] = n + 1
	return keys[n]
}

func copyKeys(keys []*armstorage.AccountKey) []*armstorage.AccountKey {
	out := make([]*armstorage.AccountKey, len(keys))
	for i, k := range keys {
		cp := *k
		out[i] = &cp
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func randomKey() string {
	b := make([]byte, 64)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}
