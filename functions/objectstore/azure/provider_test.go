package azure_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
)

const testKey = "c2VjcmV0LWtleS1ieXRlcy1ub3QtcmVhbGx5LWEta2V5LWJ1dC1iYXNlNjQtb2s="

func creds(kv ...string) map[string][]byte {
	m := map[string][]byte{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = []byte(kv[i+1])
	}
	return m
}

func TestServiceURL(t *testing.T) {
	p := azure.New()
	for _, tc := range []struct {
		name  string
		creds map[string][]byte
		want  string
	}{
		{"default domain", creds("storageAccount", "acct1", "storageKey", testKey), "https://acct1.blob.core.windows.net/bucket-1"},
		{"china", creds("storageAccount", "acct1", "storageKey", testKey, "domain", "blob.core.chinacloudapi.cn"), "https://acct1.blob.core.chinacloudapi.cn/bucket-1"},
		{"trimmed", creds("storageAccount", "acct1\n", "storageKey", testKey+"\n", "domain", " blob.core.usgovcloudapi.net\n"), "https://acct1.blob.core.usgovcloudapi.net/bucket-1"},
		{"endpoint wins", creds("storageAccount", "devstoreaccount1", "storageKey", testKey, "domain", "ignored.example", "endpoint", "http://127.0.0.1:10000/devstoreaccount1/"), "http://127.0.0.1:10000/devstoreaccount1/bucket-1"},
	} {
		s, err := p.Open("bucket-1", tc.creds)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := azure.ContainerURL(s); got != tc.want {
			t.Errorf("%s: URL %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestOpenRejectsBadCredentials(t *testing.T) {
	p := azure.New()
	const account = "myaccount7"
	for _, tc := range []struct {
		name    string
		creds   map[string][]byte
		want    error
		mention string
	}{
		{"no storageKey", creds("storageAccount", account), objectstore.ErrMissingCredentials, `"storageKey"`},
		{"empty storageKey", creds("storageAccount", account, "storageKey", " \n"), objectstore.ErrMissingCredentials, `"storageKey"`},
		{"no storageAccount", creds("storageKey", testKey), objectstore.ErrMissingCredentials, `"storageAccount"`},
		{"nil", nil, objectstore.ErrMissingCredentials, `"storageAccount"`},
		{"key not base64", creds("storageAccount", account, "storageKey", "not base64 !!! secret"), objectstore.ErrInvalidCredentials, "storageKey"},
		{"bad account", creds("storageAccount", "My_Account", "storageKey", testKey), objectstore.ErrInvalidCredentials, "storageAccount"},
		{"domain with scheme", creds("storageAccount", account, "storageKey", testKey, "domain", "https://blob.core.windows.net"), objectstore.ErrInvalidCredentials, "domain"},
		{"domain with path", creds("storageAccount", account, "storageKey", testKey, "domain", "evil.example/x?"), objectstore.ErrInvalidCredentials, "domain"},
		{"endpoint not a URL", creds("storageAccount", account, "storageKey", testKey, "endpoint", "localhost:10001"), objectstore.ErrInvalidCredentials, "endpoint"},
		{"endpoint with user", creds("storageAccount", account, "storageKey", testKey, "endpoint", "https://user:pw@host/"), objectstore.ErrInvalidCredentials, "endpoint"},
	} {
		_, err := p.Open("bucket-1", tc.creds)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Open = %v, want %v", tc.name, err, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: %q does not name %s", tc.name, err, tc.mention)
		}
		for k, v := range tc.creds {
			if s := strings.TrimSpace(string(v)); len(s) > 3 && strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q includes the value of %s", tc.name, err, k)
			}
		}
		if _, err := p.BackupSecretData(tc.creds); !errors.Is(err, tc.want) {
			t.Errorf("%s: BackupSecretData = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestOpenRejectsInvalidContainerName(t *testing.T) {
	p := azure.New()
	for _, name := range []string{"Bucket", "ab", "a--b", "-ab", "ab-", "a_b", "a/b", strings.Repeat("a", 64)} {
		if _, err := p.Open(name, creds("storageAccount", "acct1", "storageKey", testKey)); !errors.Is(err, objectstore.ErrInvalidBucketName) {
			t.Errorf("Open(%q) = %v, want ErrInvalidBucketName", name, err)
		}
	}
}

func TestBackupSecretData(t *testing.T) {
	p := azure.New()
	got, err := p.BackupSecretData(creds("storageAccount", "acct1\n", "storageKey", testKey, "unrelated", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got["storageAccount"]) != "acct1" || string(got["storageKey"]) != testKey {
		t.Errorf("BackupSecretData = %q, want exactly storageAccount (trimmed) and storageKey", got)
	}
	got, err = p.BackupSecretData(creds("storageAccount", "acct1", "storageKey", testKey, "domain", "blob.core.chinacloudapi.cn", "endpoint", "http://127.0.0.1:1/acct1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || string(got["domain"]) != "blob.core.chinacloudapi.cn" || string(got["endpoint"]) != "http://127.0.0.1:1/acct1" {
		t.Errorf("BackupSecretData = %q, want domain and endpoint passed on", got)
	}
	if p.Type() != "azure" {
		t.Errorf("Type = %q", p.Type())
	}
}
