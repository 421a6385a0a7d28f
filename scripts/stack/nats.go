package stack

import (
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATS is an embedded nats-server with JetStream on file storage, so it can be stopped and
// started again on the same port without losing its streams.
type NATS struct {
	// URL is the client URL, nats://127.0.0.1:<port>.
	URL string
	// MonitorURL is the HTTP monitoring endpoint (/jsz, /healthz), as KEDA's scaler reads it.
	MonitorURL string

	opts server.Options
	// running are the options the running server was started with (Reload keeps its ports).
	running server.Options
	logger  server.Logger
	server  *server.Server
}

// StartNATS starts nats-server with JetStream storing under storeDir, logging to logger.
func StartNATS(storeDir string, logger server.Logger) (*NATS, error) {
	n := &NATS{
		opts: server.Options{
			ServerName: "housekeeper-local",
			Host:       "127.0.0.1",
			Port:       server.RANDOM_PORT,
			HTTPHost:   "127.0.0.1",
			HTTPPort:   server.RANDOM_PORT,
			JetStream:  true,
			StoreDir:   storeDir,
			NoSigs:     true,
		},
		logger: logger,
	}
	if err := n.Start(); err != nil {
		return nil, err
	}
	return n, nil
}

// Start starts the server again after Stop, on the same ports and store.
func (n *NATS) Start() error {
	if n.server != nil && n.server.Running() {
		return nil
	}
	opts := n.opts
	n.running = n.opts
	s, err := server.NewServer(&opts)
	if err != nil {
		return fmt.Errorf("configuring nats-server: %w", err)
	}
	if n.logger != nil {
		s.SetLoggerV2(n.logger, false, false, false)
	}
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return fmt.Errorf("nats-server did not accept connections within 30s")
	}
	n.server = s
	// Pin the ports chosen at the first start, so a restart keeps clients' URLs valid.
	n.opts.Port = s.Addr().(*net.TCPAddr).Port
	n.opts.HTTPPort = s.MonitorAddr().Port
	n.URL = s.ClientURL()
	n.MonitorURL = fmt.Sprintf("http://127.0.0.1:%d", n.opts.HTTPPort)
	return nil
}

// Stop shuts the server down and waits until it is gone.
func (n *NATS) Stop() {
	if n.server == nil {
		return
	}
	n.server.Shutdown()
	n.server.WaitForShutdown()
}

// StartNATSWithConfig starts nats-server from the configuration file path, as an operator's
// nats-server reads it (TLS, accounts, users), on loopback ports it picks, with JetStream
// storing under storeDir.
func StartNATSWithConfig(path, storeDir string, logger server.Logger) (*NATS, error) {
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		return nil, fmt.Errorf("nats-server configuration %s: %w", path, err)
	}
	opts.ServerName, opts.Host, opts.Port, opts.HTTPHost, opts.HTTPPort = "housekeeper-secure", "127.0.0.1", server.RANDOM_PORT, "127.0.0.1", server.RANDOM_PORT
	opts.JetStream, opts.StoreDir, opts.NoSigs = true, storeDir, true
	n := &NATS{opts: *opts, logger: logger}
	if err := n.Start(); err != nil {
		return nil, err
	}
	return n, nil
}

// Reload has the server read its configuration file again (StartNATSWithConfig's, with the same
// loopback ports and store), as nats-server does on SIGHUP: changed accounts and users apply to
// new connections, and connections of users no longer there are closed.
func (n *NATS) Reload() error {
	if n.server == nil || n.opts.ConfigFile == "" {
		return fmt.Errorf("nats-server: no configuration file to reload")
	}
	opts, err := server.ProcessConfigFile(n.opts.ConfigFile)
	if err != nil {
		return fmt.Errorf("nats-server configuration %s: %w", n.opts.ConfigFile, err)
	}
	r := n.running
	opts.ServerName, opts.Host, opts.Port, opts.HTTPHost, opts.HTTPPort = r.ServerName, r.Host, r.Port, r.HTTPHost, r.HTTPPort
	opts.JetStream, opts.StoreDir, opts.NoSigs = true, r.StoreDir, true
	return n.server.ReloadOptions(opts)
}
