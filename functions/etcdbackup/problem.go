package etcdbackup

import (
	"errors"
	"fmt"

	"github.com/housekeeper-dev/housekeeper/functions/destination"
)

// problem is bad input: the config, its destination or its etcd cannot work as they are.
// It becomes a False condition with its reason and is not retried; the next fire or the
// next change of the config tries again. Its message never holds a credential. A
// destination's problems are the same type (destination.Problem).
type problem = destination.Problem

func problemf(reason, format string, args ...any) *problem {
	return &problem{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// ProblemReason is the condition reason of err when it is bad input (destination.Open's
// problems: a destination missing, its credentials missing or refused by the provider), to be
// reported rather than retried; ok is false for any other error.
func ProblemReason(err error) (reason string, ok bool) {
	var p *problem
	if errors.As(err, &p) {
		return p.Reason, true
	}
	return "", false
}
