package etcdbackup

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
)

// problem is bad input: the config, its destination or its etcd cannot work as they are.
// It becomes a False condition with its reason and is not retried; the next fire or the
// next change of the config tries again. Its message never holds a credential. A
// destination's problems are the same type (destination.Problem).
type problem = destination.Problem

func problemf(reason, format string, args ...any) *problem {
	return &problem{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// ProblemReason is the condition reason of err when it is bad input (OpenDestination's
// problems: a destination missing, its credentials missing or refused by the provider), to be
// reported rather than retried; ok is false for any other error.
func ProblemReason(err error) (reason string, ok bool) {
	var p *problem
	if errors.As(err, &p) {
		return p.Reason, true
	}
	return "", false
}

// OpenDestination returns the store of the named BackupDestination, opened with its
// credentials (destination.Open): what the destination lacks is a problem; API errors are
// returned as they are.
func OpenDestination(ctx context.Context, c client.Client, providers objectstore.Registry, name string) (objectstore.Store, *backupv1alpha1.BackupDestination, error) {
	return destination.Open(ctx, c, providers, name)
}
