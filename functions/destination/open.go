package destination

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// keyEndpoint is the credential key both the azure and the aws provider read a service
// endpoint from; a destination's spec.endpoint is passed to them as that key.
const keyEndpoint = "endpoint"

// keyRegion is the credential key etcd-backup-restore's Swift store reads its region from, as
// provider-openstack adds it to an entry's etcd-backup; an openstack destination's spec.region
// is passed as that key too (the provider itself takes it from Where.Region).
const keyRegion = "region"

// gcpConfig is the providerConfig of a gcp BackupBucket that sets the endpoint: the gcs
// provider reads its endpoint override from there (Where.Config), not from the credentials.
type gcpConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Store      struct {
		EndpointOverride string `json:"endpointOverride"`
	} `json:"store"`
}

// Problem is the one shape of "this object is at fault" for housekeeper's own kinds: bad
// input that cannot work as it is, reported with its Reason (a condition reason) and Message
// rather than retried; the next fire or change of the object tries again. What a
// BackupDestination lacks to be opened (the destination itself, its credentials, what its
// provider needs: backupv1alpha1.ReasonUnknownDestination, ReasonMissingCredentials,
// ReasonInvalidDestination), an EtcdBackupConfig or its etcd unusable, a RestoreDrill's or a
// BackupCopyPolicy's spec that cannot run (ReasonInvalidDrill, ReasonInvalidPolicy). Its
// message never holds a credential.
type Problem struct {
	Reason  string
	Message string
	// err is what Invalid made the Problem of, for errors.Is and errors.As.
	err error
}

func (p *Problem) Error() string { return p.Reason + ": " + p.Message }

// Unwrap is the error Invalid made the Problem of, if any.
func (p *Problem) Unwrap() error { return p.err }

// Problemf is a Problem of reason with a formatted message.
func Problemf(reason, format string, args ...any) *Problem {
	return &Problem{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Invalid is err as a Problem of reason: its message is err's, and it wraps err.
func Invalid(reason string, err error) *Problem {
	return &Problem{Reason: reason, Message: err.Error(), err: err}
}

// ProblemReason is the condition reason of err when it is bad input (a Problem: a destination
// missing, its credentials missing or refused, a config or its etcd unusable as they are), to
// be reported rather than retried; ok is false for any other error.
func ProblemReason(err error) (reason string, ok bool) {
	var p *Problem
	if errors.As(err, &p) {
		return p.Reason, true
	}
	return "", false
}

// ErrNoDestination: the BackupDestination named does not exist (a Problem of reason
// ReasonUnknownDestination).
var ErrNoDestination = errors.New("no such BackupDestination")

// Is makes a Problem of reason ReasonUnknownDestination ErrNoDestination.
func (p *Problem) Is(target error) bool {
	return target == ErrNoDestination && p.Reason == backupv1alpha1.ReasonUnknownDestination
}

// Open returns the store of the named BackupDestination, opened with its credentials. What the
// destination lacks is a *Problem; API errors are returned as they are.
func Open(ctx context.Context, c client.Reader, providers objectstore.Registry, name string) (objectstore.Store, *backupv1alpha1.BackupDestination, error) {
	dest, where, credentials, err := Read(ctx, c, name)
	if err != nil {
		return nil, dest, err
	}
	_, store, err := providers.Open(where, credentials)
	if err != nil {
		reason := backupv1alpha1.ReasonInvalidDestination
		if errors.Is(err, objectstore.ErrMissingCredentials) || errors.Is(err, objectstore.ErrInvalidCredentials) {
			reason = backupv1alpha1.ReasonMissingCredentials
		}
		// Providers name the credential key at fault, never its value.
		return nil, dest, Problemf(reason, "BackupDestination %q: %v", name, err)
	}
	return store, dest, nil
}

// Read reads the named BackupDestination: where its store is and the credentials it is opened
// with (its secret's data and its endpoint; a gcp destination's endpoint is Where.Config, as a
// gcp BackupBucket's providerConfig; an openstack destination's region is in both), for Open
// and for a tool that opens the store itself (etcd-backup-restore's restore). Errors as Open's.
func Read(ctx context.Context, c client.Reader, name string) (*backupv1alpha1.BackupDestination, objectstore.Where, map[string][]byte, error) {
	dest := &backupv1alpha1.BackupDestination{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, dest); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, objectstore.Where{}, nil, Problemf(backupv1alpha1.ReasonUnknownDestination, "BackupDestination %q does not exist", name)
		}
		return nil, objectstore.Where{}, nil, err
	}
	credentials := map[string][]byte{}
	if ref := dest.Spec.CredentialsSecretRef; ref != nil {
		secret := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
			if apierrors.IsNotFound(err) {
				return dest, objectstore.Where{}, nil, Problemf(backupv1alpha1.ReasonMissingCredentials, "BackupDestination %q: secret %s/%s does not exist", name, ref.Namespace, ref.Name)
			}
			return dest, objectstore.Where{}, nil, err
		}
		credentials = maps.Clone(secret.Data)
		if credentials == nil {
			credentials = map[string][]byte{}
		}
	}
	where := objectstore.Where{Type: dest.Spec.Type, Region: dest.Spec.Region, Bucket: dest.Spec.Bucket}
	switch dest.Spec.Type {
	case backupv1alpha1.DestinationGCP:
		// A destination has no providerConfig: spec.endpoint stands for the one a gcp
		// BackupBucket would have, which the gcs provider and etcd-backup-restore's store read.
		if dest.Spec.Endpoint != "" {
			cfg := gcpConfig{APIVersion: "gcp.provider.extensions.gardener.cloud/v1alpha1", Kind: "BackupBucketConfig"}
			cfg.Store.EndpointOverride = dest.Spec.Endpoint
			config, err := json.Marshal(cfg)
			if err != nil {
				return dest, objectstore.Where{}, nil, err
			}
			where.Config = config
		}
	case backupv1alpha1.DestinationOpenStack:
		if dest.Spec.Region != "" {
			credentials[keyRegion] = []byte(dest.Spec.Region)
		}
	default:
		if dest.Spec.Endpoint != "" {
			credentials[keyEndpoint] = []byte(dest.Spec.Endpoint)
		}
	}
	return dest, where, credentials, nil
}
