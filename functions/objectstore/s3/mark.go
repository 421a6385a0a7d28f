package s3

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// The mark of an object a purge could not delete, and the lifecycle rule that expires marked
// objects: upstream provider-aws's tag, so either can finish what the other started.
const (
	MarkTag       = "gc-marked-for-deletion"
	MarkValue     = "true"
	LifecycleRule = "housekeeper-gc-marked-for-deletion"
)

var _ objectstore.Locking = (*store)(nil)

// versions lists the versions (not delete markers) of exactly key.
func (s *store) versions(ctx context.Context, key string) ([]types.ObjectVersion, error) {
	var out []types.ObjectVersion
	in := &awss3.ListObjectVersionsInput{Bucket: aws.String(s.name), Prefix: aws.String(key)}
	for {
		page, err := s.client.ListObjectVersions(ctx, in)
		if err != nil {
			return nil, s.errorf(fmt.Sprintf("list versions of %q", key), err)
		}
		for _, v := range page.Versions {
			if aws.ToString(v.Key) == key {
				out = append(out, v)
			}
		}
		if !aws.ToBool(page.IsTruncated) {
			return out, nil
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
}

// Mark tags every version of the keys and makes sure of the lifecycle rule; see
// objectstore.Locking.
func (s *store) Mark(ctx context.Context, keys []string) (time.Time, string, error) {
	var until time.Time
	for _, key := range keys {
		vs, err := s.versions(ctx, key)
		if err != nil {
			return until, "", err
		}
		for _, v := range vs {
			r, err := s.client.GetObjectRetention(ctx, &awss3.GetObjectRetentionInput{Bucket: aws.String(s.name), Key: v.Key, VersionId: v.VersionId})
			if err == nil && r.Retention != nil && r.Retention.RetainUntilDate != nil && r.Retention.RetainUntilDate.After(until) {
				until = *r.Retention.RetainUntilDate
			} else if err != nil && !isCode(err, "NoSuchObjectLockConfiguration") {
				return until, "", s.errorf(fmt.Sprintf("read the retention of %q", key), err)
			}
			if err := s.tag(ctx, v); err != nil {
				return until, "", err
			}
		}
	}
	note, err := s.ensureLifecycleRule(ctx)
	return until, note, err
}

// tag adds the mark to a version's tags, keeping the others.
func (s *store) tag(ctx context.Context, v types.ObjectVersion) error {
	have, err := s.client.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: aws.String(s.name), Key: v.Key, VersionId: v.VersionId})
	if err != nil {
		return s.errorf(fmt.Sprintf("read the tags of %q", aws.ToString(v.Key)), err)
	}
	tags := slices.DeleteFunc(have.TagSet, func(t types.Tag) bool { return aws.ToString(t.Key) == MarkTag })
	tags = append(tags, types.Tag{Key: aws.String(MarkTag), Value: aws.String(MarkValue)})
	_, err = s.client.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: aws.String(s.name), Key: v.Key, VersionId: v.VersionId,
		Tagging: &types.Tagging{TagSet: tags}})
	if err != nil {
		return s.errorf(fmt.Sprintf("mark %q", aws.ToString(v.Key)), err)
	}
	return nil
}

// Marked reports whether every version of key carries the mark (a key without versions does
// not: there is nothing marked to delete).
func (s *store) Marked(ctx context.Context, key string) (bool, error) {
	vs, err := s.versions(ctx, key)
	if err != nil || len(vs) == 0 {
		return false, err
	}
	for _, v := range vs {
		have, err := s.client.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: aws.String(s.name), Key: v.Key, VersionId: v.VersionId})
		if err != nil {
			return false, s.errorf(fmt.Sprintf("read the tags of %q", key), err)
		}
		if !slices.ContainsFunc(have.TagSet, func(t types.Tag) bool { return aws.ToString(t.Key) == MarkTag && aws.ToString(t.Value) == MarkValue }) {
			return false, nil
		}
	}
	return true, nil
}

// ensureLifecycleRule adds the rule that expires marked objects to the bucket's lifecycle
// configuration, keeping the rules the operator has (upstream overwrites them). A store
// without lifecycle configuration (versitygw) is said in the note: then only the follow-up
// purge deletes what was marked.
func (s *store) ensureLifecycleRule(ctx context.Context) (string, error) {
	var rules []types.LifecycleRule
	out, err := s.client.GetBucketLifecycleConfiguration(ctx, &awss3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(s.name)})
	switch {
	case isCode(err, "NotImplemented"):
		return "the store has no lifecycle rules: the follow-up purge deletes the marked objects", nil
	case isCode(err, "NoSuchLifecycleConfiguration"):
	case err != nil:
		return "", s.errorf("read the lifecycle rules", err)
	default:
		rules = out.Rules
	}
	if slices.ContainsFunc(rules, func(r types.LifecycleRule) bool { return aws.ToString(r.ID) == LifecycleRule }) {
		return "", nil
	}
	rules = append(rules, types.LifecycleRule{
		ID:                          aws.String(LifecycleRule),
		Status:                      types.ExpirationStatusEnabled,
		Filter:                      &types.LifecycleRuleFilter{Tag: &types.Tag{Key: aws.String(MarkTag), Value: aws.String(MarkValue)}},
		Expiration:                  &types.LifecycleExpiration{Days: aws.Int32(1)},
		NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1)},
	})
	_, err = s.client.PutBucketLifecycleConfiguration(ctx, &awss3.PutBucketLifecycleConfigurationInput{Bucket: aws.String(s.name),
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: rules}})
	if isCode(err, "NotImplemented") {
		return "the store has no lifecycle rules: the follow-up purge deletes the marked objects", nil
	}
	if err != nil {
		return "", s.errorf("add the lifecycle rule", err)
	}
	return "", nil
}
