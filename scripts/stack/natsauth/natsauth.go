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

// Start issues perms in form into dir with a CA, a server and a client certificate, and
// starts nats-server on loopback from the configuration it writes there; JetStream stores
// under dir too.
func Start(dir string, form natsconn.Form, perms []events.Permission, logger server.Logger) (*stack.NATS, *natsconn.Issued, error) {
	if err := natsconn.Issue(dir, form, "", perms); err != nil {
		return nil, nil, err
	}
	tls, err := natsconn.WriteTLS(dir, []string{"127.0.0.1", "localhost"})
	if err != nil {
		return nil, nil, err
	}
	issued := &natsconn.Issued{Dir: dir, Form: form, CA: tls.CA, ClientCert: tls.ClientCert, ClientKey: tls.ClientKey}
	conf, err := issued.WriteServerConfig(tls.ServerCert, tls.ServerKey)
	if err != nil {
		return nil, nil, err
	}
	n, err := stack.StartNATSWithConfig(conf, filepath.Join(dir, "jetstream"), logger)
	if err != nil {
		return nil, nil, err
	}
	return n, issued, nil
}
