package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/stack/natsauth"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// StartSecureNATS starts, for a test of NATS alone, nats-server secured as StartSecure does;
// env.NATS is the server.
func StartSecureNATS(t testing.TB, form natsconn.Form) (*testenv.Env, *natsconn.Issued) {
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
func startSecureNATS(t testing.TB, env *testenv.Env, form natsconn.Form) *natsconn.Issued {
	t.Helper()
	logs, err := os.Create(filepath.Join(env.LogDir, "nats-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logs.Close() })
	logger := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(logs), zapcore.DebugLevel))
	n, issued, err := natsauth.Start(filepath.Join(env.LogDir, "nats"), form, cli.Permissions(), true, stack.NATSLogger(logger))
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	t.Cleanup(n.Stop)
	env.NATS = n
	return issued
}
