// Package natsauth starts nats-server as an operator runs it for housekeeper: TLS with client
// certificates required, and only the identities `housekeeper nats-auth` issues, each with its
// permissions, loaded from the configuration file nats-server reads. make run and the tests
// use it. (It is apart from package stack, which the events package's tests use: the issuer
// depends on events.)
package natsauth

import (
	"io"
	"path/filepath"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

// Start issues perms in form into dir with a CA and a server certificate for loopback (and,
// with mutualTLS, a client certificate the server requires), and starts nats-server on
// loopback from the configuration it writes there; JetStream stores under dir too.
func Start(dir string, form natsconn.Form, perms []events.Permission, mutualTLS bool, logger server.Logger) (*stack.NATS, *natsconn.Issued, error) {
	issued, conf, err := natsconn.IssueServer(dir, form, perms, hosts, mutualTLS)
	if err != nil {
		return nil, nil, err
	}
	n, err := stack.StartNATSWithConfig(conf, filepath.Join(dir, "jetstream"), logger)
	if err != nil {
		return nil, nil, err
	}
	return n, &issued, nil
}

// hosts are the names the server certificate is valid for: loopback, and the addresses of a
// stack cluster's nodes.
var hosts = []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "localhost"}

// StartCluster is Start with nats-server run as nodes processes (1, or a cluster of 3, see
// stack.StartNATSCluster, configured by opts), each logging to logs(its name).
func StartCluster(dir string, nodes int, form natsconn.Form, perms []events.Permission, mutualTLS bool, logs func(name string) io.Writer, opts ...stack.NATSOption) (*stack.NATSCluster, *natsconn.Issued, error) {
	issued, conf, err := natsconn.IssueServer(dir, form, perms, hosts, mutualTLS)
	if err != nil {
		return nil, nil, err
	}
	c, err := stack.StartNATSCluster(dir, nodes, filepath.Base(conf), logs, opts...)
	if err != nil {
		return nil, nil, err
	}
	return c, &issued, nil
}
