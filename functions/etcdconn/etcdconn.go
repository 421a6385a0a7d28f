// Package etcdconn connects to an etcd housekeeper reads: an EtcdBackupConfig's (Connect), for
// the snapshot function that backs it up and the drill that holds a restore against it, and
// any other by its endpoints and TLS (Dial, ClientTLS), such as a shoot's etcd-main. Its
// errors name the endpoints and what failed, never the TLS material; what the config holds
// wrong is a destination.Problem.
package etcdconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/destination"
)

// etcdTimeout bounds connecting to etcd and asking for its status; the snapshot itself is
// bounded only by the handler's context.
const etcdTimeout = 10 * time.Second

// Connect returns a client for the config's etcd once one of its endpoints answered, and
// that endpoint. Its errors name the endpoints and what failed, never the TLS material.
func Connect(ctx context.Context, c client.Client, cfg *backupv1alpha1.EtcdBackupConfig, log *zap.Logger) (*clientv3.Client, string, error) {
	tlsConfig, err := configTLS(ctx, c, cfg)
	if err != nil {
		return nil, "", err
	}
	return Dial(ctx, cfg.Spec.Etcd.Endpoints, tlsConfig, log)
}

// Dial returns a client for the etcd at endpoints, spoken to with tlsConfig (nil: plain
// text), once one of them answered its status, and that endpoint. An endpoint that does not
// answer because TLS with it fails is ReasonInvalidTLS, else ReasonEtcdUnreachable.
func Dial(ctx context.Context, endpoints []string, tlsConfig *tls.Config, log *zap.Logger) (*clientv3.Client, string, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: etcdTimeout,
		TLS:         tlsConfig,
		Logger:      log.Named("etcd-client").WithOptions(zap.IncreaseLevel(zap.ErrorLevel)),
		Context:     ctx,
	})
	if err != nil {
		return nil, "", destination.Problemf(backupv1alpha1.ReasonEtcdUnreachable, "etcd %v: %v", endpoints, err)
	}
	var errs []error
	for _, ep := range endpoints {
		statusCtx, cancel := context.WithTimeout(ctx, etcdTimeout)
		_, err := cli.Status(statusCtx, ep)
		cancel()
		if err == nil {
			return cli, ep, nil
		}
		if tlsErr := handshake(ctx, ep, tlsConfig); tlsErr != nil {
			_ = cli.Close()
			return nil, "", destination.Problemf(backupv1alpha1.ReasonInvalidTLS, "TLS with %s fails: %v", ep, tlsErr)
		}
		errs = append(errs, fmt.Errorf("%s: %w", ep, err))
	}
	_ = cli.Close()
	if ctx.Err() != nil {
		return nil, "", ctx.Err()
	}
	return nil, "", destination.Problemf(backupv1alpha1.ReasonEtcdUnreachable, "no etcd endpoint answered: %v", errors.Join(errs...))
}

// configTLS builds the client TLS configuration from spec.etcd.tlsSecretRef: nil without one.
func configTLS(ctx context.Context, c client.Client, cfg *backupv1alpha1.EtcdBackupConfig) (*tls.Config, error) {
	ref := cfg.Spec.Etcd.TLSSecretRef
	if ref == nil {
		return nil, nil
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, destination.Problemf(backupv1alpha1.ReasonInvalidTLS, "TLS secret %s/%s does not exist", cfg.Namespace, ref.Name)
		}
		return nil, err
	}
	t, err := ClientTLS(secret.Data[backupv1alpha1.TLSKeyCA], secret.Data[backupv1alpha1.TLSKeyCert], secret.Data[backupv1alpha1.TLSKeyKey])
	switch {
	case errors.Is(err, ErrNoPEMCertificate):
		return nil, destination.Problemf(backupv1alpha1.ReasonInvalidTLS, "TLS secret %s/%s: %s holds no PEM certificate", cfg.Namespace, ref.Name, backupv1alpha1.TLSKeyCA)
	case errors.Is(err, ErrKeyPair):
		return nil, destination.Problemf(backupv1alpha1.ReasonInvalidTLS, "TLS secret %s/%s: %s and %s are not a usable certificate and key", cfg.Namespace, ref.Name, backupv1alpha1.TLSKeyCert, backupv1alpha1.TLSKeyKey)
	case errors.Is(err, ErrHalfKeyPair):
		return nil, destination.Problemf(backupv1alpha1.ReasonInvalidTLS, "TLS secret %s/%s: %s and %s go together", cfg.Namespace, ref.Name, backupv1alpha1.TLSKeyCert, backupv1alpha1.TLSKeyKey)
	case errors.Is(err, ErrNoTLSMaterial):
		return nil, destination.Problemf(backupv1alpha1.ReasonInvalidTLS, "TLS secret %s/%s has none of %s, %s, %s", cfg.Namespace, ref.Name,
			backupv1alpha1.TLSKeyCA, backupv1alpha1.TLSKeyCert, backupv1alpha1.TLSKeyKey)
	}
	return t, err
}

// ClientTLS's errors: they never quote the material.
var (
	// ErrNoPEMCertificate: the CA holds no PEM certificate.
	ErrNoPEMCertificate = errors.New("no PEM certificate in the CA")
	// ErrKeyPair: the certificate and key are not a usable pair.
	ErrKeyPair = errors.New("not a usable certificate and key")
	// ErrHalfKeyPair: a certificate without its key, or a key without its certificate.
	ErrHalfKeyPair = errors.New("a certificate and its key go together")
	// ErrNoTLSMaterial: neither a CA nor a certificate and key.
	ErrNoTLSMaterial = errors.New("no CA, certificate or key")
)

// ClientTLS is the TLS configuration of an etcd client that trusts the PEM certificates in ca
// (none: the system's) and authenticates with the PEM cert and key (none: no client
// certificate).
func ClientTLS(ca, cert, key []byte) (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(ca) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, ErrNoPEMCertificate
		}
		t.RootCAs = pool
	}
	switch {
	case len(cert) > 0 && len(key) > 0:
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			// The parser's message can quote the key material: not passed on.
			return nil, ErrKeyPair
		}
		t.Certificates = []tls.Certificate{pair}
	case len(cert) > 0 || len(key) > 0:
		return nil, ErrHalfKeyPair
	}
	if t.RootCAs == nil && len(t.Certificates) == 0 {
		return nil, ErrNoTLSMaterial
	}
	return t, nil
}

// handshake tells why a TLS endpoint did not answer when gRPC only says it timed out: it
// shakes hands with it as the client would. nil if it can, if it is not TLS, or if it is
// not there at all (then the endpoint is unreachable, not the TLS material wrong).
func handshake(ctx context.Context, endpoint string, config *tls.Config) error {
	u, err := url.Parse(endpoint)
	if err != nil || config == nil || u.Scheme != "https" {
		return nil
	}
	c := config.Clone()
	if c.ServerName == "" {
		c.ServerName = u.Hostname()
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: c}
	dialCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(dialCtx, "tcp", u.Host)
	if err == nil {
		_ = conn.Close()
		return nil
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return nil // nothing listens: unreachable
	}
	return err
}
