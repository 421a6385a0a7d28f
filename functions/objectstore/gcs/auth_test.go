package gcs_test

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/gcs"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/storetest"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// authority is an https front for fake-gcs-server that lets a request through only with an
// access token it issued: for a service account's JWT signed with the key's private key
// (/token, OAuth's JWT bearer grant), or for the workload identity's token (/sts, the token
// exchange). fake-gcs-server itself checks no credentials; this checks that housekeeper's
// requests carry ones that GCS would have issued.
type authority struct {
	server    *httptest.Server
	publicKey *rsa.PublicKey
	subject   string // the workload identity token /sts accepts
	rejected  atomic.Int32
}

const (
	serviceAccountAccess = "access-for-the-service-account"
	identityAccess       = "access-for-the-workload-identity"
)

func newAuthority(t *testing.T, backend string, publicKey *rsa.PublicKey, subject string) *authority {
	a := &authority{publicKey: publicKey, subject: subject}
	target, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || !a.validJWT(r.FormValue("assertion")) {
			a.rejected.Add(1)
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		writeToken(w, serviceAccountAccess)
	})
	mux.HandleFunc("POST /sts", func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" || r.FormValue("subject_token") != a.subject ||
			r.FormValue("subject_token_type") != "urn:ietf:params:oauth:token-type:jwt" {
			a.rejected.Add(1)
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		writeToken(w, identityAccess)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "Bearer " + serviceAccountAccess, "Bearer " + identityAccess:
			proxy.ServeHTTP(w, r)
		default:
			a.rejected.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":401,"message":"Invalid Credentials","errors":[{"reason":"authError"}]}}`))
		}
	})
	a.server = httptest.NewTLSServer(mux)
	t.Cleanup(a.server.Close)
	return a
}

func writeToken(w http.ResponseWriter, token string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": token, "token_type": "Bearer", "expires_in": 3600,
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
	})
}

// validJWT checks an RS256 JWT's signature against the service account's public key and that
// it asks for GCS's full-control scope.
func (a *authority) validJWT(jwt string) bool {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(a.publicKey, crypto.SHA256, sum[:], sig) != nil {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var claims struct{ Scope string }
	return json.Unmarshal(payload, &claims) == nil && slices.Contains(strings.Fields(claims.Scope), "https://www.googleapis.com/auth/devstorage.full_control")
}

// serviceAccountKey is the stack's key with its token_uri at the authority, and the key's
// public half.
func serviceAccountKey(t *testing.T, tokenURI string) ([]byte, *rsa.PublicKey) {
	raw, err := stack.GCSServiceAccountKey()
	if err != nil {
		t.Fatal(err)
	}
	var key map[string]string
	if err := json.Unmarshal(raw, &key); err != nil {
		t.Fatal(err)
	}
	key["token_uri"] = tokenURI
	block, _ := pem.Decode([]byte(key["private_key"]))
	private, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(key)
	if err != nil {
		t.Fatal(err)
	}
	return out, &private.(*rsa.PrivateKey).PublicKey
}

// Over https the store authenticates every request: with a service account key through OAuth's
// JWT grant, with a workload identity through the token exchange; wrong credentials are
// ErrUnauthenticated and do nothing.
func testAuthenticated(t *testing.T, sv server) {
	const subject = "the-workload-identity-token"
	a := newAuthority(t, sv.env.GCS.URL, nil, subject)
	key, public := serviceAccountKey(t, a.server.URL+"/token")
	a.publicKey = public
	otherKey, _ := serviceAccountKey(t, a.server.URL+"/token")

	p, err := gcs.New(gcs.WithTransport(a.server.Client().Transport)).InRegion(stack.GCSRegion).(objectstore.Configured).Configure(endpointConfig(a.server.URL))
	if err != nil {
		t.Fatal(err)
	}
	identity := func(token string) map[string][]byte {
		return map[string][]byte{
			gcs.KeyConfig: []byte(`apiVersion: gcp.provider.extensions.gardener.cloud/v1alpha1
kind: WorkloadIdentityConfig
projectID: ` + stack.GCSProject + `
credentialsConfig:
  type: external_account
  audience: //iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/gardener
  subject_token_type: urn:ietf:params:oauth:token-type:jwt
  token_url: ` + a.server.URL + `/sts
`),
			gcs.KeyToken: []byte(token),
		}
	}
	for name, creds := range map[string]map[string][]byte{
		"ServiceAccount":   {gcs.KeyServiceAccountJSON: key},
		"WorkloadIdentity": identity(subject),
	} {
		t.Run(name, func(t *testing.T) {
			bucket := "authenticated-" + strings.ToLower(name)
			s, err := p.Open(bucket, creds)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Create(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			storetest.PutAll(t, s, []string{"e/1", "e/2", "f/1"})
			if failed, err := s.DeleteKeys(testCtx(t), []string{"e/1", "e/2"}); err != nil || failed != nil {
				t.Fatalf("DeleteKeys: failed=%v err=%v", failed, err)
			}
			if got := storetest.ListAll(t, s, ""); !slices.Equal(got, []string{"f/1"}) {
				t.Errorf("left %q, want [f/1]", got)
			}
			if err := s.Delete(testCtx(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
	if n := a.rejected.Load(); n != 0 {
		t.Fatalf("the authority rejected %d requests with good credentials", n)
	}

	for name, creds := range map[string]map[string][]byte{
		"OtherServiceAccountKey":   {gcs.KeyServiceAccountJSON: otherKey},
		"WrongWorkloadIdentityKey": identity("not-the-token"),
	} {
		t.Run(name, func(t *testing.T) {
			before := a.rejected.Load()
			s, err := p.Open("wrong-credentials", creds)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Create(testCtx(t))
			if !errors.Is(err, objectstore.ErrUnauthenticated) {
				t.Errorf("Create with wrong credentials: %v, want ErrUnauthenticated", err)
			}
			if err != nil && (strings.Contains(err.Error(), "not-the-token") || strings.Contains(err.Error(), "PRIVATE KEY")) {
				t.Errorf("the error quotes a credential: %v", err)
			}
			if a.rejected.Load() == before {
				t.Error("the authority was not asked: nothing checked the credentials")
			}
		})
	}
}
