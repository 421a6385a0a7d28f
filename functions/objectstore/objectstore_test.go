package objectstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
)

func TestValidateBucketName(t *testing.T) {
	valid := []string{"abc", "a-b-c", "0ab", "backupprovider-7f3a9c", "bucket-1", strings.Repeat("a", 63), "a1-b2-c3"}
	for _, name := range valid {
		if err := objectstore.ValidateBucketName(name); err != nil {
			t.Errorf("ValidateBucketName(%q) = %v, want nil", name, err)
		}
	}
	invalid := map[string]string{
		"":                      "3 to 63",
		"ab":                    "3 to 63",
		strings.Repeat("a", 64): "3 to 63",
		"Abc":                   "'A'",
		"ab_c":                  "'_'",
		"a.bc":                  "'.'",
		"a/bc":                  "'/'",
		"-abc":                  "start with",
		"abc-":                  "end with a hyphen",
		"a--bc":                 "consecutive hyphens",
		"ab c":                  "' '",
		"äbc":                   "position 0",
	}
	for name, why := range invalid {
		err := objectstore.ValidateBucketName(name)
		if !errors.Is(err, objectstore.ErrInvalidBucketName) {
			t.Errorf("ValidateBucketName(%q) = %v, want ErrInvalidBucketName", name, err)
			continue
		}
		if !strings.Contains(err.Error(), why) {
			t.Errorf("ValidateBucketName(%q) = %q, want the reason to mention %q", name, err, why)
		}
	}
}

func TestValidateKey(t *testing.T) {
	for _, key := range []string{"a", "a/b/c", strings.Repeat("k", objectstore.MaxKeyLength), "a//b", "/abs"} {
		if err := objectstore.ValidateKey(key); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil (the shared rules are Azure's)", key, err)
		}
	}
	for _, key := range []string{"", strings.Repeat("k", objectstore.MaxKeyLength+1), "a\x00b", "\xff"} {
		if err := objectstore.ValidateKey(key); !errors.Is(err, objectstore.ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
}

func TestRegistry(t *testing.T) {
	r := objectstore.NewRegistry(azure.New(), local.New(t.TempDir()))
	for _, typ := range []string{"azure", "local"} {
		p, err := r.Get(typ)
		if err != nil || p.Type() != typ {
			t.Errorf("Get(%q) = %v, %v", typ, p, err)
		}
	}
	_, err := r.Get("aws")
	if !errors.Is(err, objectstore.ErrUnknownType) {
		t.Fatalf("Get(aws) = %v, want ErrUnknownType", err)
	}
	for _, want := range []string{`"aws"`, `"azure", "local"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if _, err := (objectstore.Registry{}).Get("azure"); !errors.Is(err, objectstore.ErrUnknownType) {
		t.Errorf("empty registry: %v, want ErrUnknownType", err)
	}
}

// spec.region reaches a Regional provider and passes by the others.
func TestInRegion(t *testing.T) {
	az := azure.New()
	if got := objectstore.InRegion(az, "westeurope"); got != objectstore.Provider(az) {
		t.Errorf("InRegion of a provider without regions returned %v, want the provider itself", got)
	}
	plain := s3.New()
	if got := objectstore.InRegion(plain, ""); got != objectstore.Provider(plain) {
		t.Errorf("InRegion with no region returned %v, want the provider itself", got)
	}
	creds := map[string][]byte{s3.KeyAccessKeyID: []byte("id"), s3.KeySecretAccessKey: []byte("key"), s3.KeyRegion: []byte("us-east-1")}
	data, err := objectstore.InRegion(plain, "eu-west-1").BackupSecretData(creds)
	if err != nil || string(data[s3.KeyRegion]) != "eu-west-1" {
		t.Errorf("InRegion(aws, eu-west-1): region %q, %v; want the spec's region over the secret's", data[s3.KeyRegion], err)
	}
	if data, _ := plain.BackupSecretData(creds); string(data[s3.KeyRegion]) != "us-east-1" {
		t.Errorf("InRegion changed the provider it was given: region %q", data[s3.KeyRegion])
	}
}

// Open is Get, InRegion and the provider's Open in one: the provider it returns is in the
// bucket's region, and a type nobody registered or credentials a provider refuses are its
// errors.
func TestRegistryOpen(t *testing.T) {
	reg := objectstore.NewRegistry(s3.New(), local.New(t.TempDir()))
	creds := map[string][]byte{s3.KeyAccessKeyID: []byte("id"), s3.KeySecretAccessKey: []byte("key"), s3.KeyRegion: []byte("us-east-1")}
	p, store, err := reg.Open(objectstore.Where{Type: s3.Type, Region: "eu-west-1", Bucket: "backups"}, creds)
	if err != nil || store == nil {
		t.Fatalf("Open: %v", err)
	}
	if data, err := p.BackupSecretData(creds); err != nil || string(data[s3.KeyRegion]) != "eu-west-1" {
		t.Errorf("the provider Open returned writes region %q, %v; want the bucket's eu-west-1", data[s3.KeyRegion], err)
	}
	if _, _, err := reg.Open(objectstore.Where{Type: "gcs", Bucket: "backups"}, creds); !errors.Is(err, objectstore.ErrUnknownType) {
		t.Errorf("unknown type: %v, want ErrUnknownType", err)
	}
	if _, _, err := reg.Open(objectstore.Where{Type: s3.Type, Bucket: "backups"}, map[string][]byte{}); !errors.Is(err, objectstore.ErrMissingCredentials) {
		t.Errorf("no credentials: %v, want ErrMissingCredentials", err)
	}
}
