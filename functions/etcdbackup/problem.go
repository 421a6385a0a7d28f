package etcdbackup

import (
	"github.com/housekeeper-dev/housekeeper/functions/destination"
)

// problem is bad input: the config, its destination or its etcd cannot work as they are.
// It becomes a False condition with its reason and is not retried; the next fire or the
// next change of the config tries again. Its message never holds a credential. A
// destination's problems are the same type (destination.Problem; destination.ProblemReason
// tells them from other errors).
type problem = destination.Problem

var problemf = destination.Problemf
