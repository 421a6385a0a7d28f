package s3_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
)

const secret = "s3cr3t/Value+that-must-never-show"

func creds(kv ...string) map[string][]byte {
	m := map[string][]byte{s3.KeyAccessKeyID: []byte("AKIAEXAMPLE"), s3.KeySecretAccessKey: []byte(secret)}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "<absent>" {
			delete(m, kv[i])
			continue
		}
		m[kv[i]] = []byte(kv[i+1])
	}
	return m
}

func TestOpenCredentials(t *testing.T) {
	for _, tc := range []struct {
		name  string
		creds map[string][]byte
		spec  string // spec.region
		want  error
		names string // the key the error names
	}{
		{"minimal", creds(s3.KeyRegion, "eu-west-1"), "", nil, ""},
		{"spec region only", creds(), "eu-west-1", nil, ""},
		{"no region", creds(), "", objectstore.ErrMissingCredentials, s3.KeyRegion},
		{"no access key", creds(s3.KeyAccessKeyID, "<absent>"), "eu-west-1", objectstore.ErrMissingCredentials, s3.KeyAccessKeyID},
		{"empty secret", creds(s3.KeySecretAccessKey, " \n"), "eu-west-1", objectstore.ErrMissingCredentials, s3.KeySecretAccessKey},
		{"endpoint", creds(s3.KeyEndpoint, "http://127.0.0.1:7070\n", s3.KeyS3ForcePathStyle, "true\n"), "eu-west-1", nil, ""},
		{"endpoint with path", creds(s3.KeyEndpoint, "https://s3.example.com/bucket"), "eu-west-1", objectstore.ErrInvalidCredentials, s3.KeyEndpoint},
		{"endpoint with user", creds(s3.KeyEndpoint, "https://u:"+secret+"@s3.example.com"), "eu-west-1", objectstore.ErrInvalidCredentials, s3.KeyEndpoint},
		{"endpoint not a URL", creds(s3.KeyEndpoint, "s3.example.com"), "eu-west-1", objectstore.ErrInvalidCredentials, s3.KeyEndpoint},
		{"path style not a bool", creds(s3.KeyS3ForcePathStyle, "yes"), "eu-west-1", objectstore.ErrInvalidCredentials, s3.KeyS3ForcePathStyle},
		{"region with a slash", creds(s3.KeyRegion, "eu/west"), "", objectstore.ErrInvalidCredentials, s3.KeyRegion},
		{"workload identity", map[string][]byte{s3.KeyConfig: []byte("kind: WorkloadIdentityConfig\nroleARN: arn:aws:iam::1:role/r\n"), s3.KeyToken: []byte(secret)}, "eu-west-1", objectstore.ErrInvalidCredentials, "workload identity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := objectstore.InRegion(s3.New(), tc.spec)
			_, err := p.Open("bucket", tc.creds)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Open = %v, want %v", err, tc.want)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tc.names) {
					t.Errorf("the error does not name %q: %v", tc.names, err)
				}
				if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "AKIAEXAMPLE") {
					t.Errorf("the error quotes a credential: %v", err)
				}
			}
		})
	}
}

func TestBackupSecretData(t *testing.T) {
	in := creds(s3.KeyRegion, "us-east-1\n", s3.KeyEndpoint, " http://127.0.0.1:7070/ ", s3.KeyS3ForcePathStyle, "1", "unrelated", "x")
	got, err := objectstore.InRegion(s3.New(), "eu-local-1").BackupSecretData(in)
	if err != nil {
		t.Fatal(err)
	}
	// Trimmed values (etcd-backup-restore reads its files as they are), the spec's region,
	// s3ForcePathStyle as strconv.ParseBool reads it, nothing else.
	want := map[string][]byte{
		s3.KeyAccessKeyID:      []byte("AKIAEXAMPLE"),
		s3.KeySecretAccessKey:  []byte(secret),
		s3.KeyRegion:           []byte("eu-local-1"),
		s3.KeyEndpoint:         []byte("http://127.0.0.1:7070"),
		s3.KeyS3ForcePathStyle: []byte("true"),
	}
	if !maps.EqualFunc(got, want, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Errorf("BackupSecretData = %q, want %q", got, want)
	}
	got, err = s3.New().BackupSecretData(creds(s3.KeyRegion, "eu-west-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got[s3.KeyS3ForcePathStyle]; ok || string(got[s3.KeyRegion]) != "eu-west-1" {
		t.Errorf("BackupSecretData without spec region or path style = %q", got)
	}
}

func TestType(t *testing.T) {
	if got := s3.New().Type(); got != "aws" {
		t.Errorf("Type() = %q, want aws (upstream provider-aws's spec.type)", got)
	}
	r := objectstore.NewRegistry(s3.New())
	if _, err := r.Get("aws"); err != nil {
		t.Error(err)
	}
}
