package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// The BackupBucket's spec.providerConfig, in provider-aws's shape.
const (
	ConfigAPIVersion = "aws.provider.extensions.gardener.cloud/v1alpha1"
	ConfigKind       = "BackupBucketConfig"
)

// BucketConfig is the BackupBucket's providerConfig.
type BucketConfig struct {
	APIVersion   string        `json:"apiVersion,omitempty"`
	Kind         string        `json:"kind,omitempty"`
	Immutability *Immutability `json:"immutability,omitempty"`
}

// Immutability asks for S3 object lock with a default retention on every new object.
type Immutability struct {
	// RetentionType is "bucket": the retention is the bucket's default.
	RetentionType string `json:"retentionType"`
	// RetentionPeriod is whole days, at least one (S3's default retention counts days).
	RetentionPeriod string `json:"retentionPeriod"`
	// Mode is governance (lifted by those allowed to bypass it) or compliance (by nobody).
	Mode string `json:"mode"`
}

// lock is a parsed default retention.
type lock struct {
	days int32
	mode types.ObjectLockRetentionMode
}

func (l lock) String() string { return fmt.Sprintf("%s for %d days", l.mode, l.days) }

// ParseBucketConfig decodes and validates raw (nil or empty: no configuration). Unknown fields
// are errors. Errors wrap objectstore.ErrInvalidConfig and name the field.
func ParseBucketConfig(raw []byte) (BucketConfig, error) {
	var c BucketConfig
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return c, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("s3: %w: providerConfig: %v", objectstore.ErrInvalidConfig, err)
	}
	if c.APIVersion != "" && c.APIVersion != ConfigAPIVersion {
		return c, fmt.Errorf("s3: %w: providerConfig.apiVersion %q: want %s", objectstore.ErrInvalidConfig, c.APIVersion, ConfigAPIVersion)
	}
	if c.Kind != "" && c.Kind != ConfigKind {
		return c, fmt.Errorf("s3: %w: providerConfig.kind %q: want %s", objectstore.ErrInvalidConfig, c.Kind, ConfigKind)
	}
	if c.Immutability != nil {
		if _, err := c.Immutability.lock(); err != nil {
			return c, fmt.Errorf("s3: %w: providerConfig.immutability.%v", objectstore.ErrInvalidConfig, err)
		}
	}
	return c, nil
}

func (im Immutability) lock() (lock, error) {
	if im.RetentionType != "bucket" {
		return lock{}, fmt.Errorf("retentionType %q: must be bucket", im.RetentionType)
	}
	days, err := objectstore.RetentionDays(im.RetentionPeriod)
	if err != nil {
		return lock{}, err
	}
	l := lock{days: days}
	switch im.Mode {
	case "governance":
		l.mode = types.ObjectLockRetentionModeGovernance
	case "compliance":
		l.mode = types.ObjectLockRetentionModeCompliance
	default:
		return lock{}, fmt.Errorf("mode %q: must be governance or compliance", im.Mode)
	}
	return l, nil
}

// union is the lock that protects as much as a and b both: the longer period, and compliance
// if either is.
func union(a, b lock) lock {
	u := lock{days: max(a.days, b.days), mode: types.ObjectLockRetentionModeGovernance}
	if a.mode == types.ObjectLockRetentionModeCompliance || b.mode == types.ObjectLockRetentionModeCompliance {
		u.mode = types.ObjectLockRetentionModeCompliance
	}
	return u
}

// CreateWithConfig creates the bucket, with object lock and its default retention when config
// asks for immutability, and reconciles an existing bucket's default retention toward it. It
// never weakens: the bucket gets the union of what it has and what is asked (the longer period,
// compliance if either is), and no immutability leaves a default retention in place; the note
// says when that differs from the ask. S3 enables object lock on an existing bucket only with versioning, which it turns
// on first.
func (s *store) CreateWithConfig(ctx context.Context, raw []byte) (string, error) {
	config, err := ParseBucketConfig(raw)
	if err != nil {
		return "", err
	}
	var want *lock
	if config.Immutability != nil {
		l, _ := config.Immutability.lock() // validated
		want = &l
	}
	if err := s.create(ctx, want != nil); err != nil {
		return "", err
	}
	have, err := s.defaultRetention(ctx)
	if err != nil {
		return "", err
	}
	if want == nil {
		if have == nil {
			return "", nil
		}
		return fmt.Sprintf("bucket keeps its object lock (%s): immutability is never removed", have), nil
	}
	target, note := *want, ""
	if have != nil {
		target = union(*have, *want)
		if target == *have {
			if *have == *want {
				return "", nil
			}
			return fmt.Sprintf("bucket keeps its object lock (%s): the asked %s would weaken it", have, want), nil
		}
		if target != *want {
			note = fmt.Sprintf(" (not the asked %s: the bucket's %s is never weakened)", want, have)
		}
	}
	// Stronger than what the bucket has, or none yet. A bucket made without object lock gets
	// versioning first, which S3 requires for it.
	if err := s.enableVersioning(ctx); err != nil {
		return "", err
	}
	_, err = s.client.PutObjectLockConfiguration(ctx, &awss3.PutObjectLockConfigurationInput{
		Bucket: aws.String(s.name),
		ObjectLockConfiguration: &types.ObjectLockConfiguration{
			ObjectLockEnabled: types.ObjectLockEnabledEnabled,
			Rule:              &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Days: aws.Int32(target.days), Mode: target.mode}},
		},
	})
	if err != nil {
		return "", s.errorf("set object lock", err)
	}
	return fmt.Sprintf("object lock set: %s%s", target, note), nil
}

// defaultRetention reads the bucket's default retention, nil if it has none.
func (s *store) defaultRetention(ctx context.Context) (*lock, error) {
	out, err := s.client.GetObjectLockConfiguration(ctx, &awss3.GetObjectLockConfigurationInput{Bucket: aws.String(s.name)})
	if isCode(err, "ObjectLockConfigurationNotFoundError") {
		return nil, nil
	}
	if err != nil {
		return nil, s.errorf("read object lock", err)
	}
	c := out.ObjectLockConfiguration
	if c == nil || c.Rule == nil || c.Rule.DefaultRetention == nil {
		return nil, nil
	}
	r := c.Rule.DefaultRetention
	days := aws.ToInt32(r.Days)
	if days == 0 && r.Years != nil {
		days = aws.ToInt32(r.Years) * 365
	}
	return &lock{days: days, mode: r.Mode}, nil
}
