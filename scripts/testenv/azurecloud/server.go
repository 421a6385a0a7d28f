package azurecloud

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"

	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// Server serves the cloud over HTTPS, for processes: pass URL as the authority host and the
// Resource Manager endpoint, and trust CAFile (SSL_CERT_FILE). Long-running operations finish
// in their first response, so no poller comes back.
type Server struct {
	URL    string
	CAFile string
	srv    *httptest.Server
}

// Serve starts the HTTPS server; its certificate is written into dir.
func (c *Cloud) Serve(dir string) (*Server, error) {
	srv := httptest.NewTLSServer(http.HandlerFunc(c.serveHTTP))
	ca := filepath.Join(dir, "azurecloud-ca.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, data, 0o644); err != nil {
		srv.Close()
		return nil, err
	}
	return &Server{URL: srv.URL, CAFile: ca, srv: srv}, nil
}

// Client is an HTTP client that trusts the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// armRoutes name the ARM operations by method and path, as the SDK's clients name them in
// the request context the fake servers dispatch on.
var armRoutes = []struct {
	method string
	path   *regexp.Regexp
	api    string
}{
	{http.MethodPut, regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourcegroups/[^/]+$`), "ResourceGroupsClient.CreateOrUpdate"},
	{http.MethodDelete, regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourcegroups/[^/]+$`), "ResourceGroupsClient.BeginDelete"},
	{http.MethodPut, regexp.MustCompile(`(?i)/providers/Microsoft\.Storage/storageAccounts/[^/]+$`), "AccountsClient.BeginCreate"},
	{http.MethodPost, regexp.MustCompile(`(?i)/providers/Microsoft\.Storage/storageAccounts/[^/]+/listKeys$`), "AccountsClient.ListKeys"},
	{http.MethodPost, regexp.MustCompile(`(?i)/providers/Microsoft\.Storage/storageAccounts/[^/]+/regenerateKey$`), "AccountsClient.RegenerateKey"},
}

func (c *Cloud) serveHTTP(w http.ResponseWriter, r *http.Request) {
	req := r.Clone(r.Context())
	req.RequestURI = ""
	req.URL.Scheme, req.URL.Host = "https", r.Host
	for _, route := range armRoutes {
		if r.Method == route.method && route.path.MatchString(r.URL.Path) {
			req = req.WithContext(context.WithValue(r.Context(), azruntime.CtxAPINameKey{}, route.api))
			break
		}
	}
	resp, err := transport{c}.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
