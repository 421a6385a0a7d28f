// Package natsconn connects housekeeper's processes to NATS the same way: flags for URL,
// credentials and TLS, endless reconnects, and connection state in the log.
package natsconn

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/events"
)

// Options say how to reach NATS.
type Options struct {
	URL       string
	CredsFile string
	TLSCA     string
	TLSCert   string
	TLSKey    string
}

// BindFlags registers the options as flags on fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.URL, "nats-url", nats.DefaultURL, "NATS server URL(s), comma-separated")
	fs.StringVar(&o.CredsFile, "nats-creds", "", "NATS credentials file (JWT and NKey seed)")
	fs.StringVar(&o.TLSCA, "nats-tls-ca", "", "CA bundle to verify the NATS server")
	fs.StringVar(&o.TLSCert, "nats-tls-cert", "", "client certificate for NATS (mutual TLS)")
	fs.StringVar(&o.TLSKey, "nats-tls-key", "", "client key for NATS (mutual TLS)")
}

// Connect dials NATS as name. It keeps reconnecting forever: a NATS outage must delay
// housekeeper's work, never end it.
func Connect(o Options, name string, log *zap.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("disconnected from NATS", zap.Error(err))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("reconnected to NATS", zap.String("url", nc.ConnectedUrlRedacted()))
		}),
	}
	nc, err := nats.Connect(o.URL, append(opts, o.Auth()...)...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", o.URL, err)
	}
	return nc, nil
}

// Auth returns the credentials and TLS options alone, for short-lived clients that should
// fail fast rather than reconnect forever.
func (o Options) Auth() []nats.Option {
	var opts []nats.Option
	if o.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.TLSCA != "" {
		opts = append(opts, nats.RootCAs(o.TLSCA))
	}
	if o.TLSCert != "" || o.TLSKey != "" {
		opts = append(opts, nats.ClientCert(o.TLSCert, o.TLSKey))
	}
	return opts
}

// RequireStreams waits until NATS answers and then checks that housekeeper's streams exist. A
// missing stream ends it with events.ErrNotSetUp: only `housekeeper setup` creates them, with
// one set of settings, so no process starts with settings of its own.
func RequireStreams(ctx context.Context, js jetstream.JetStream, log *zap.Logger) error {
	for {
		attempt, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := events.CheckStreams(attempt, js)
		cancel()
		if err == nil || errors.Is(err, events.ErrNotSetUp) {
			return err
		}
		log.Warn("cannot reach JetStream yet, retrying", zap.Error(err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
