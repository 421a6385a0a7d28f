package etcdbackup

import "fmt"

// problem is bad input: the config, its destination or its etcd cannot work as they are.
// It becomes a False condition with its reason and is not retried; the next fire or the
// next change of the config tries again. Its message never holds a credential.
type problem struct {
	reason  string
	message string
}

func (p *problem) Error() string { return p.reason + ": " + p.message }

func problemf(reason, format string, args ...any) *problem {
	return &problem{reason: reason, message: fmt.Sprintf(format, args...)}
}
