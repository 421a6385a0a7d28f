// Package natsauth starts nats-server as an operator runs it for housekeeper: TLS with client
// certificates required, and only the identities `housekeeper nats-auth` issues, each with its
// permissions, loaded from the configuration file nats-server reads. make run and the tests
// use it. (It is apart from package stack, which the events package's tests use: the issuer
// depends on events.)
package natsauth

import (
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
	issued, conf, err := natsconn.IssueServer(dir, form, perms, []string{"127.0.0.1", "localhost"}, mutualTLS)
	if err != nil {
		return nil, nil, err
	}
	n, err := stack.StartNATSWithConfig(conf, filepath.Join(dir, "jetstream"), logger)
	if err != nil {
		return nil, nil, err
	}
	return n, &issued, nil
}
