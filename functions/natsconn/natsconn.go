// Package natsconn connects housekeeper's processes to NATS the same way: flags for URL,
// credentials and TLS, one identity per component, endless reconnects, and connection state
// and refused operations in the log.
package natsconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/housekeeper-dev/housekeeper/events"
)

// Options say how to reach NATS and as whom.
type Options struct {
	URL       string
	CredsFile string
	NKeyFile  string
	TLSCA     string
	TLSCert   string
	TLSKey    string
}

// BindFlags registers the options as flags on fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.URL, "nats-url", nats.DefaultURL, "NATS server URL(s), comma-separated")
	fs.StringVar(&o.CredsFile, "nats-creds", "", "NATS credentials file (user JWT and NKey seed, as nsc or housekeeper nats-auth --form jwt issues them)")
	fs.StringVar(&o.NKeyFile, "nats-nkey", "", "NATS NKey seed file of a user in the server's configuration, as housekeeper nats-auth issues it")
	fs.StringVar(&o.TLSCA, "nats-tls-ca", "", "CA bundle to verify the NATS server")
	fs.StringVar(&o.TLSCert, "nats-tls-cert", "", "client certificate for NATS (mutual TLS)")
	fs.StringVar(&o.TLSKey, "nats-tls-key", "", "client key for NATS (mutual TLS)")
}

// Connect dials NATS as identity (events.Identity*, or a function's name), naming the
// connection name. Credentials the server refuses, or a server certificate that does not
// verify, end it at once with an error that says so; an unreachable server does not: it keeps
// reconnecting forever, since a NATS outage must delay housekeeper's work, never end it.
// Publishes and subscriptions the server refuses are logged as permission violations.
func Connect(o Options, identity, name string, log *zap.Logger) (*nats.Conn, error) {
	auth, err := o.Auth(identity)
	if err != nil {
		return nil, err
	}
	opts := append(auth,
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("disconnected from NATS", zap.Error(err))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("reconnected to NATS", zap.String("url", nc.ConnectedUrlRedacted()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				log.Error("NATS refused an operation of identity "+identity+": its permissions do not allow it", zap.Error(err))
				return
			}
			log.Warn("NATS error", zap.Error(err))
		}),
	)
	nc, err := nats.Connect(o.URL, opts...)
	if err == nil {
		return nc, nil
	}
	if refused(err) {
		return nil, fmt.Errorf("NATS at %s refused identity %s: %w (check --nats-creds, --nats-nkey and the TLS flags)", o.URL, identity, err)
	}
	// Not there yet: keep trying in the background.
	nc, err = nats.Connect(o.URL, append(opts, nats.RetryOnFailedConnect(true))...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", o.URL, err)
	}
	return nc, nil
}

// refused says the server answered but would not let the client in: credentials or TLS.
func refused(err error) bool {
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var verification *tls.CertificateVerificationError
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) ||
		errors.Is(err, nats.ErrAccountAuthExpired) || errors.Is(err, nats.ErrSecureConnRequired) || errors.Is(err, nats.ErrSecureConnWanted) ||
		errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &verification)
}

// Auth returns the options that make a client identity: its credentials, its own inbox prefix
// (the only replies its permission lets it read) and TLS. Short-lived clients that should fail
// fast rather than reconnect forever use them alone.
func (o Options) Auth(identity string) ([]nats.Option, error) {
	opts := []nats.Option{nats.CustomInboxPrefix(events.InboxPrefix(identity))}
	switch {
	case o.CredsFile != "" && o.NKeyFile != "":
		return nil, errors.New("--nats-creds and --nats-nkey: give one")
	case o.CredsFile != "":
		if _, err := os.Stat(o.CredsFile); err != nil {
			return nil, fmt.Errorf("--nats-creds: %w", err)
		}
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	case o.NKeyFile != "":
		nkey, err := nats.NkeyOptionFromSeed(o.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey %s: %w", o.NKeyFile, err)
		}
		opts = append(opts, nkey)
	}
	if o.TLSCA != "" {
		opts = append(opts, nats.RootCAs(o.TLSCA))
	}
	if o.TLSCert != "" || o.TLSKey != "" {
		opts = append(opts, nats.ClientCert(o.TLSCert, o.TLSKey))
	}
	return opts, nil
}

// RequireStreams waits until NATS answers and then checks that housekeeper's streams exist. A
// missing stream ends it with events.ErrNotSetUp: only `housekeeper setup` creates them, with
// one set of settings, so no process starts with settings of its own. A stop while it waits
// (ctx cancelled) is not an error: the caller's run ends on the same context, and the process
// exits cleanly; a deadline that passes is.
func RequireStreams(ctx context.Context, js jetstream.JetStream, log *zap.Logger) error {
	for {
		attempt, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := events.CheckStreams(attempt, js)
		cancel()
		if err == nil || errors.Is(err, events.ErrNotSetUp) {
			return err
		}
		if ctx.Err() != nil {
			return stopped(ctx)
		}
		log.Warn("cannot reach JetStream yet, retrying", zap.Error(err))
		select {
		case <-ctx.Done():
			return stopped(ctx)
		case <-time.After(2 * time.Second):
		}
	}
}

// stopped is what waiting ends with once ctx is done: nothing for a stop, the error for a
// deadline.
func stopped(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil
	}
	return ctx.Err()
}
