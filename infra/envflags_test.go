package infra_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/housekeeper-dev/housekeeper/bridge"
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/providers"
)

// binary is what a container runs: the bridge, the housekeeper binary's setup, or its
// function NAME.
type binary struct {
	bridge   bool
	setup    bool
	function string
	natsAuth bool // housekeeper nats-auth
}

func (b binary) String() string {
	switch {
	case b.bridge:
		return "housekeeper-bridge"
	case b.setup:
		return "housekeeper setup"
	}
	return "housekeeper function " + b.function
}

// flagFromEnv is the flag an environment variable sets, or "" if it is not a HOUSEKEEPER_ one.
func flagFromEnv(name string) string {
	if !strings.HasPrefix(name, config.EnvPrefix) {
		return ""
	}
	flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, config.EnvPrefix), "_", "-"))
	if config.EnvName(flag) != name {
		return ""
	}
	return flag
}

// acceptsEnv reports whether bin takes the environment variable name with value: the variable
// names one of its flags and the value parses. A variable the binary has no flag for would be
// ignored silently, so a typo in a manifest would go unnoticed without this check.
//
// The binaries are asked themselves: the bridge's ParseCommand, and the housekeeper command
// line up to the point where it loads the kubeconfig (a path that does not exist) or, for the
// setup, connects to NATS (a port nothing listens on), so nothing connects anywhere. Flags are
// passed on the command line, which is what the variables stand for.
func acceptsEnv(bin binary, name, value string) error {
	flag := flagFromEnv(name)
	if flag == "" {
		return fmt.Errorf("%s is not a HOUSEKEEPER_<FLAG> variable", name)
	}
	arg := "--" + flag + "=" + value
	if bin.bridge {
		_, err := bridge.ParseCommand([]string{"--cluster=test", "--types=azure", arg})
		return err
	}
	const missing = "/nonexistent/housekeeper-infra-test/kubeconfig"
	cmd, reached := []string{"function", bin.function, "--cluster=test", "--kubeconfig=" + missing}, "kubeconfig"
	if bin.setup {
		// The last --nats-url wins: the one nothing listens on.
		cmd, reached = []string{"--nats-url=nats://127.0.0.1:1", "setup"}, "connecting to NATS"
	}
	// Flags that go together are checked with their partner set.
	partners := map[string]string{"azure-authority-host": "azure-resource-manager", "azure-resource-manager": "azure-authority-host"}
	if partner, ok := partners[flag]; ok && !bin.setup {
		cmd = append(cmd, "--"+partner+"=https://partner.example.com")
	}
	var errs []string
	// Global flags (NATS) come before the command, the command's own after it.
	for _, args := range [][]string{append([]string{arg}, cmd...), append(slices.Clone(cmd), arg)} {
		if flag == "kubeconfig" {
			args = slices.DeleteFunc(args, func(a string) bool { return a == "--kubeconfig="+missing })
		}
		var out, stderr bytes.Buffer
		code := cli.Main(context.Background(), args, &out, &stderr, providers.All...)
		quietLibraryLogs()
		// Exit 1 at the kubeconfig or the connection: every flag parsed and was valid.
		if code == 1 && strings.Contains(stderr.String(), reached) {
			return nil
		}
		errs = append(errs, strings.SplitN(stderr.String(), "\n", 2)[0])
	}
	return fmt.Errorf("%s", strings.Join(errs, "; "))
}

// checkEnv checks the environment of one container: each variable set on it directly must be
// a flag of its binary with a valid value. Shared variables (from a ConfigMap or an
// extension of a compose file) are returned as used when this binary takes them, so the caller
// can check that each is used somewhere.
func checkEnv(t *testing.T, where string, bin binary, own map[string]string, shared map[string]string) (used []string) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(own)) {
		if err := acceptsEnv(bin, name, own[name]); err != nil {
			t.Errorf("%s: %s=%q is not taken by %s: %v", where, name, own[name], bin, err)
		}
	}
	for name, value := range shared {
		if _, overridden := own[name]; overridden {
			continue
		}
		if err := acceptsEnv(bin, name, value); err == nil {
			used = append(used, name)
		} else if flagFromEnv(name) == "" {
			t.Errorf("%s: %s is not a HOUSEKEEPER_<FLAG> variable", where, name)
		}
	}
	return used
}

// The checker itself must reject what the binaries reject.
func TestAcceptsEnv(t *testing.T) {
	for _, tc := range []struct {
		bin         binary
		name, value string
		ok          bool
	}{
		{binary{bridge: true}, "HOUSEKEEPER_NATS_URL", "nats://nats:4222", true},
		{binary{bridge: true}, "HOUSEKEEPER_RESYNC_PERIOD", "30m", true},
		{binary{bridge: true}, "HOUSEKEEPER_RESYNC_PERIOD", "half an hour", false},
		{binary{bridge: true}, "HOUSEKEEPER_RETENTION", "1h", false}, // a function flag
		{binary{function: "entry"}, "HOUSEKEEPER_NATS_URL", "nats://nats:4222", true},
		{binary{function: "entry"}, "HOUSEKEEPER_RETENTION_BY_PURPOSE", "production=168h", true},
		{binary{function: "entry"}, "HOUSEKEEPER_RETENTION_BY_PURPOSE", "production", false},
		{binary{function: "purge"}, "HOUSEKEEPER_MODE", "http", true},
		{binary{function: "purge"}, "HOUSEKEEPER_MODE", "push", false},
		{binary{function: "bucket"}, "HOUSEKEEPER_KUBECONFIG", "/kube/config", true},
		{binary{function: "bucket"}, "HOUSEKEEPER_TYPES", "azure", true},
		{binary{function: "schedule"}, "HOUSEKEEPER_TYPES", "azure", false},     // EtcdBackupConfigs have no type
		{binary{function: "bucket"}, "HOUSEKEEPER_RESYNC_PERIOD", "30m", false}, // a bridge flag
		{binary{bridge: true}, "HOUSEKEEPER_TYPES", "azrue", false},
		{binary{function: "bucket"}, "HOUSEKEEPER_NATS_URLS", "nats://nats:4222", false},
		{binary{function: "bucket"}, "HOUSEKEEPER_KUBE_QPS", "200", true},
		{binary{function: "bucket"}, "HOUSEKEEPER_KUBE_BURST", "-1", false},
		// The streams and consumers are the setup's alone.
		{binary{setup: true}, "HOUSEKEEPER_STREAM_REPLICAS", "3", true},
		{binary{setup: true}, "HOUSEKEEPER_STREAM_MAX_AGE", "336h", true},
		{binary{setup: true}, "HOUSEKEEPER_MAX_DELIVER", "20", true},
		{binary{setup: true}, "HOUSEKEEPER_MAX_DELIVER", "0", false},
		{binary{setup: true}, "HOUSEKEEPER_ACK_WAIT", "30s", true},
		{binary{setup: true}, "HOUSEKEEPER_NATS_URL", "nats://nats:4222", true},
		{binary{setup: true}, "HOUSEKEEPER_KUBECONFIG", "/kube/config", false},
		{binary{setup: true}, "HOUSEKEEPER_CLUSTER", "seed", false},
		{binary{bridge: true}, "HOUSEKEEPER_STREAM_REPLICAS", "3", false},
		{binary{function: "entry"}, "HOUSEKEEPER_STREAM_MAX_AGE", "336h", false},
		{binary{function: "purge"}, "HOUSEKEEPER_MAX_DELIVER", "20", false},
	} {
		err := acceptsEnv(tc.bin, tc.name, tc.value)
		if (err == nil) != tc.ok {
			t.Errorf("%s %s=%q: err = %v, want ok=%v", tc.bin, tc.name, tc.value, err, tc.ok)
		}
	}
}

// Every HOUSEKEEPER_* variable the manifests set is a flag of the binary that gets it, with a
// value that parses, and every variable of the shared ConfigMap is taken by some workload.
func TestManifestEnvironment(t *testing.T) {
	for _, overlay := range renderings {
		t.Run(overlay, func(t *testing.T) {
			objs := render(t, overlay)
			configMaps := map[string]map[string]string{}
			for _, m := range objs {
				if m.obj.GetKind() == "ConfigMap" {
					data, _, _ := unstructured.NestedStringMap(m.obj.Object, "data")
					configMaps[m.obj.GetName()] = data
				}
			}
			used := map[string]bool{}
			referenced := map[string]bool{} // ConfigMaps a container takes as its environment
			workloads := 0
			for _, m := range objs {
				for _, c := range containers(m.obj) {
					bin, err := binaryOf(c)
					if errors.Is(err, errForwarder) {
						continue // takes only flags (its arguments) and NATS variables of the shared ConfigMap
					}
					if err != nil {
						t.Errorf("%s: container %s: %v", m, c.Name, err)
						continue
					}
					workloads++
					own := map[string]string{}
					for _, e := range c.Env {
						v := e.Value
						if e.FromField {
							v = "from-the-pod"
						}
						own[e.Name] = v
					}
					shared := map[string]string{}
					for _, cm := range c.ConfigMaps {
						maps.Copy(shared, configMaps[cm])
						referenced[cm] = true
					}
					for _, name := range checkEnv(t, m.String(), bin, own, shared) {
						used[name] = true
					}
				}
			}
			if workloads != 9 {
				t.Errorf("%d housekeeper containers, want 9 (setup, bridge, bucket, entry, purge, schedule, snapshot, drill, copy)", workloads)
			}
			for cm, data := range configMaps {
				if !referenced[cm] {
					continue // not an environment (the seed's dashboard)
				}
				for name := range data {
					if !used[name] {
						t.Errorf("ConfigMap variable %s=%q is taken by no workload", name, data[name])
					}
				}
			}
		})
	}
}

// errForwarder marks a container running `housekeeper forward`, which the environment check
// leaves out: it needs no Kubernetes API to start.
var errForwarder = errors.New("forwarder")

// binaryOf tells which binary a container of the housekeeper image runs.
func binaryOf(c container) (binary, error) {
	switch {
	case len(c.Command) == 0 && len(c.Args) >= 1 && c.Args[0] == "forward":
		return binary{}, errForwarder
	case len(c.Command) == 0 && len(c.Args) >= 1 && c.Args[0] == "setup":
		return binary{setup: true}, nil
	case len(c.Command) == 1 && c.Command[0] == "/usr/local/bin/housekeeper-bridge":
		return binary{bridge: true}, nil
	case len(c.Command) == 0 && len(c.Args) >= 2 && c.Args[0] == "function":
		return binary{function: c.Args[1]}, nil
	}
	return binary{}, fmt.Errorf("runs neither the setup, the bridge nor a function: command %q args %q", c.Command, c.Args)
}

// quietLibraryLogs routes client-go's and controller-runtime's logs to stderr at warning level
// again, as testenv does: a housekeeper command line that got as far as its logger pointed
// them at its own.
func quietLibraryLogs() {
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	logging.RouteLibraries(zap.New(zapcore.NewCore(enc, zapcore.Lock(os.Stderr), zapcore.WarnLevel)))
}
