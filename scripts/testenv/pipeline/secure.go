package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// Auth is how the components reach a secured NATS: each identity's credentials, issued by
// `housekeeper nats-auth`'s issuer into Dir, and the TLS material.
type Auth struct {
	Dir  string
	Form natsconn.Form
	TLS  stack.NATSTLS
}

// Options are the connection options of identity.
func (a *Auth) Options(url, identity string) natsconn.Options {
	o := natsconn.Options{URL: url, TLSCA: a.TLS.CA, TLSCert: a.TLS.ClientCert, TLSKey: a.TLS.ClientKey}
	if a.Form == natsconn.FormJWT {
		o.CredsFile = filepath.Join(a.Dir, identity+".creds")
	} else {
		o.NKeyFile = filepath.Join(a.Dir, identity+".nk")
	}
	return o
}

// Args are Options as housekeeper's command-line flags.
func (a *Auth) Args(url, identity string) []string {
	o := a.Options(url, identity)
	args := []string{"--nats-url", o.URL, "--nats-tls-ca", o.TLSCA, "--nats-tls-cert", o.TLSCert, "--nats-tls-key", o.TLSKey}
	if o.CredsFile != "" {
		return append(args, "--nats-creds", o.CredsFile)
	}
	return append(args, "--nats-nkey", o.NKeyFile)
}

// StartSecureNATS starts, for a test of NATS alone, nats-server secured as StartSecure does;
// env.NATS is the server.
func StartSecureNATS(t testing.TB, form natsconn.Form) (*testenv.Env, *Auth) {
	t.Helper()
	env := testenv.Start(t)
	return env, startSecureNATS(t, env, form)
}

// RefusedByNATS returns the lines in which the secured nats-server logged that it refused a
// publish or a subscription (a permissions violation), or "" when it refused none.
func (p *Pipeline) RefusedByNATS() string {
	p.T.Helper()
	logs, err := os.ReadFile(filepath.Join(p.Env.LogDir, "nats-server.log"))
	if err != nil {
		p.T.Fatal(err)
	}
	var refused strings.Builder
	for line := range strings.Lines(string(logs)) {
		if strings.Contains(line, "Publish Violation") || strings.Contains(line, "Subscription Violation") {
			refused.WriteString(line)
		}
	}
	return refused.String()
}

// startSecureNATS starts nats-server for env as an operator would run it for housekeeper: TLS
// with client certificates required, and only housekeeper's identities, each with the
// permissions `housekeeper nats-auth` issues in form, loaded from the configuration file
// nats-server reads.
func startSecureNATS(t testing.TB, env *testenv.Env, form natsconn.Form) *Auth {
	t.Helper()
	a := &Auth{Dir: filepath.Join(env.LogDir, "nats"), Form: form}
	if err := natsconn.Issue(a.Dir, form, "", cli.Permissions()); err != nil {
		t.Fatal(err)
	}
	var err error
	if a.TLS, err = stack.WriteNATSTLS(a.Dir); err != nil {
		t.Fatal(err)
	}
	include := map[natsconn.Form]string{natsconn.FormConfig: "accounts.conf", natsconn.FormJWT: "resolver.conf"}[form]
	conf := filepath.Join(a.Dir, "nats-server.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "tls {\n  cert_file: %q\n  key_file: %q\n  ca_file: %q\n  verify: true\n}\ninclude %q\n",
		a.TLS.ServerCert, a.TLS.ServerKey, a.TLS.CA, include), 0o600); err != nil {
		t.Fatal(err)
	}
	logs, err := os.Create(filepath.Join(env.LogDir, "nats-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logs.Close() })
	logger := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(logs), zapcore.DebugLevel))
	n, err := stack.StartNATSWithConfig(conf, filepath.Join(a.Dir, "jetstream"), stack.NATSLogger(logger))
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	t.Cleanup(n.Stop)
	env.NATS = n
	return a
}
