package azure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// The mark of a blob a purge could not delete and the storage account's management policy
// rule that deletes marked blobs: upstream provider-azure's tag, so either can finish what the
// other started, under a rule of housekeeper's own beside the operator's.
const (
	MarkTag       = "blob-marked-for-deletion"
	MarkValue     = "true"
	LifecycleRule = "housekeeper-delete-marked"
)

// MetadataRetentionDays is the container metadata that records the retention period of its
// immutability policy. The policy lives in Resource Manager; a purge holding only a storage
// key reads the period here to tell until when a blob stays locked.
const MetadataRetentionDays = "housekeeperretentiondays"

// ensureImmutability gives the container the immutability policy of the providerConfig and
// the storage account the rule that deletes marked blobs. It never weakens a policy: the
// container gets the union of what it has and what is asked (the longer period, locked if
// either is), and an unlocked policy stays in place when the ask is removed; note says when
// that differs from the ask. The container must exist.
func (a *account) ensureImmutability(ctx context.Context, s *store) (note string, err error) {
	if a.config.Immutability == nil {
		return "", nil
	}
	want, _ := a.config.Immutability.retention() // validated
	have, etag, err := a.policy(ctx)
	if err != nil {
		return "", err
	}
	target := want
	if have != nil {
		target = union(*have, want)
	}
	switch {
	case have == nil || !have.locked && have.days != target.days:
		resp, err := a.containers.CreateOrUpdateImmutabilityPolicy(ctx, a.group, a.account, a.container, &armstorage.BlobContainersClientCreateOrUpdateImmutabilityPolicyOptions{
			IfMatch:    ifMatch(etag),
			Parameters: &armstorage.ImmutabilityPolicy{Properties: &armstorage.ImmutabilityPolicyProperty{ImmutabilityPeriodSinceCreationInDays: to.Ptr(target.days)}},
		})
		if err != nil {
			return "", a.armError(err, "setting the immutability policy of container "+a.container)
		}
		etag = str(resp.Etag)
	case have.locked && have.days < target.days:
		resp, err := a.containers.ExtendImmutabilityPolicy(ctx, a.group, a.account, a.container, etag, &armstorage.BlobContainersClientExtendImmutabilityPolicyOptions{
			Parameters: &armstorage.ImmutabilityPolicy{Properties: &armstorage.ImmutabilityPolicyProperty{ImmutabilityPeriodSinceCreationInDays: to.Ptr(target.days)}},
		})
		if err != nil {
			return "", a.armError(err, "extending the immutability policy of container "+a.container)
		}
		etag = str(resp.Etag)
	}
	if target.locked && (have == nil || !have.locked) {
		if _, err := a.containers.LockImmutabilityPolicy(ctx, a.group, a.account, a.container, etag, nil); err != nil {
			return "", a.armError(err, "locking the immutability policy of container "+a.container)
		}
	}
	if err := s.recordRetention(ctx, target.days); err != nil {
		return "", err
	}
	if err := a.ensureManagementRule(ctx); err != nil {
		return "", err
	}
	switch {
	case have != nil && *have == target && target == want:
		return "", nil
	case have != nil && *have == target:
		return fmt.Sprintf("container keeps its immutability policy (%s): the asked %s would weaken it", have, want), nil
	case target != want:
		return fmt.Sprintf("immutability policy set: %s (not the asked %s: the container's %s is never weakened)", target, want, have), nil
	}
	return fmt.Sprintf("immutability policy set: %s", target), nil
}

// policy reads the container's immutability policy: nil when it has none (Azure answers
// either 404 or a policy of 0 days), with its ETag.
func (a *account) policy(ctx context.Context) (*retention, string, error) {
	resp, err := a.containers.GetImmutabilityPolicy(ctx, a.group, a.account, a.container, nil)
	if err != nil {
		if err = a.armError(err, "reading the immutability policy of container "+a.container); errors.Is(err, errNotFound) {
			return nil, "", nil
		}
		return nil, "", err
	}
	p := resp.Properties
	if p == nil || p.ImmutabilityPeriodSinceCreationInDays == nil || *p.ImmutabilityPeriodSinceCreationInDays == 0 {
		return nil, str(resp.Etag), nil
	}
	r := retention{days: *p.ImmutabilityPeriodSinceCreationInDays, locked: p.State != nil && *p.State == armstorage.ImmutabilityPolicyStateLocked}
	return &r, str(resp.Etag), nil
}

// ifMatch is the If-Match of a write after a read: none when there was no policy to read.
func ifMatch(etag string) *string {
	if etag == "" {
		return nil
	}
	return to.Ptr(etag)
}

// ensureManagementRule adds the rule that deletes marked block blobs to the account's
// management policy, keeping the rules it has (an account has one policy, named default).
func (a *account) ensureManagementRule(ctx context.Context) error {
	var rules []*armstorage.ManagementPolicyRule
	resp, err := a.policies.Get(ctx, a.group, a.account, armstorage.ManagementPolicyNameDefault, nil)
	switch err = a.armError(err, "reading the management policy of storage account "+a.account); {
	case errors.Is(err, errNotFound):
	case err != nil:
		return err
	case resp.Properties != nil && resp.Properties.Policy != nil:
		rules = resp.Properties.Policy.Rules
	}
	if slices.ContainsFunc(rules, func(r *armstorage.ManagementPolicyRule) bool { return r != nil && str(r.Name) == LifecycleRule }) {
		return nil
	}
	rules = append(rules, &armstorage.ManagementPolicyRule{
		Name:    to.Ptr(LifecycleRule),
		Type:    to.Ptr(armstorage.RuleTypeLifecycle),
		Enabled: to.Ptr(true),
		Definition: &armstorage.ManagementPolicyDefinition{
			Filters: &armstorage.ManagementPolicyFilter{
				BlobTypes:      []*string{to.Ptr("blockBlob")},
				BlobIndexMatch: []*armstorage.TagFilter{{Name: to.Ptr(MarkTag), Op: to.Ptr("=="), Value: to.Ptr(MarkValue)}},
			},
			Actions: &armstorage.ManagementPolicyAction{BaseBlob: &armstorage.ManagementPolicyBaseBlob{
				Delete: &armstorage.DateAfterModification{DaysAfterCreationGreaterThan: to.Ptr[float32](0)},
			}},
		},
	})
	_, err = a.policies.CreateOrUpdate(ctx, a.group, a.account, armstorage.ManagementPolicyNameDefault,
		armstorage.ManagementPolicy{Properties: &armstorage.ManagementPolicyProperties{Policy: &armstorage.ManagementPolicySchema{Rules: rules}}}, nil)
	return a.armError(err, "adding the rule for marked blobs to the management policy of storage account "+a.account)
}

// recordRetention writes the period into the container's metadata, keeping its other metadata.
func (s *store) recordRetention(ctx context.Context, days int32) error {
	props, err := s.client.GetProperties(ctx, nil)
	if err != nil {
		return s.errorf("read properties", err)
	}
	value := strconv.Itoa(int(days))
	md := map[string]*string{MetadataRetentionDays: &value}
	for k, v := range props.Metadata { // the SDK hands back the header's casing
		if !strings.EqualFold(k, MetadataRetentionDays) {
			md[k] = v
		} else if str(v) == value {
			return nil
		}
	}
	if _, err := s.client.SetMetadata(ctx, &container.SetMetadataOptions{Metadata: md}); err != nil {
		return s.errorf("record the retention period", err)
	}
	return nil
}

// retentionDays is the period recorded in the container's metadata: 0 when none is (no
// policy, or one set outside housekeeper).
func (s *store) retentionDays(ctx context.Context) (int32, error) {
	props, err := s.client.GetProperties(ctx, nil)
	if err != nil {
		return 0, s.errorf("read properties", err)
	}
	for k, v := range props.Metadata {
		if strings.EqualFold(k, MetadataRetentionDays) {
			n, err := strconv.Atoi(str(v))
			if err != nil || n < 0 {
				return 0, fmt.Errorf("azure: container %q: metadata %s=%q is not a number of days", s.name, MetadataRetentionDays, str(v))
			}
			return int32(n), nil
		}
	}
	return 0, nil
}
