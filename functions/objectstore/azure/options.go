package azure

import (
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// MaxBatchSize is the most sub-requests Azure accepts in one Blob Batch request.
const MaxBatchSize = 256

// DefaultBatchConcurrency is how many batch requests DeleteKeys has in flight by default.
const DefaultBatchConcurrency = 4

// Option configures the provider and the stores it opens.
type Option func(*options)

type options struct {
	httpClient       *http.Client
	batchConcurrency int
	batchSize        int   // tests only; MaxBatchSize otherwise
	listPageSize     int32 // objectstore.MaxPageSize unless WithListPageSize

	// Provisioning through Azure Resource Manager (management credentials).
	managementTransport policy.Transporter   // nil: the SDK's default
	customCloud         *cloud.Configuration // nil: the named or inferred cloud
	serviceURL          string               // "" : https://<account>.<the cloud's blob domain>
	pollFrequency       time.Duration
	now                 func() time.Time
}

// WithManagementTransport sends the requests to Microsoft Entra ID and Azure Resource Manager
// through t (a proxy, or a test's fake cloud).
func WithManagementTransport(t policy.Transporter) Option {
	return func(o *options) { o.managementTransport = t }
}

// WithCustomCloud provisions through the Microsoft Entra ID authority host and the Azure
// Resource Manager endpoint given (https URLs) instead of those of the named or inferred cloud:
// for an Azure Stack Hub, a sovereign cloud the SDK does not know, or a test's fake cloud. The
// ARM token audience is the endpoint. Empty values leave the clouds as they are.
func WithCustomCloud(authorityHost, resourceManager string) Option {
	return func(o *options) {
		if authorityHost == "" || resourceManager == "" {
			o.customCloud = nil
			return
		}
		o.customCloud = &cloud.Configuration{
			ActiveDirectoryAuthorityHost: authorityHost,
			Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
				cloud.ResourceManager: {Endpoint: resourceManager, Audience: resourceManager},
			},
		}
	}
}

// WithServiceURL publishes, for an account provisioned through Azure Resource Manager, the
// blob service URL template (with "{account}" for the account name) as the endpoint instead
// of the cloud's domain: for private endpoints or an emulator such as Azurite
// ("http://127.0.0.1:10000/{account}").
func WithServiceURL(template string) Option {
	return func(o *options) { o.serviceURL = strings.TrimRight(template, "/") }
}

// WithPollFrequency sets how often long-running operations are polled: ARM's, and a blob copy
// still pending (default 5s).
func WithPollFrequency(d time.Duration) Option { return func(o *options) { o.pollFrequency = d } }

// WithClock sets the clock key ages are measured with (tests).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithHTTPClient sends every request through c (to count requests, set timeouts or a proxy).
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithBatchConcurrency sets how many Blob Batch requests DeleteKeys sends at once (default
// DefaultBatchConcurrency; values below 1 mean 1).
func WithBatchConcurrency(n int) Option {
	return func(o *options) { o.batchConcurrency = max(n, 1) }
}

// WithListPageSize sets how many keys a List page (and so a purge round) holds: at most
// objectstore.MaxPageSize, the default; values below 1 mean 1. Smaller pages bound the work
// lost when a purge is interrupted, at the cost of more list requests.
func WithListPageSize(n int) Option {
	return func(o *options) { o.listPageSize = int32(min(max(n, 1), objectstore.MaxPageSize)) }
}

// withBatchSize shrinks batches so tests can exercise splitting with few blobs.
func withBatchSize(n int) Option {
	return func(o *options) { o.batchSize = min(max(n, 1), MaxBatchSize) }
}
