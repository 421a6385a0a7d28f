package cli

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/version"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The NATS flags go before the command or after it, in either form (--nats-url URL,
// --nats-url=URL, one dash or two); after it they win over the environment as before it, and
// the last given wins. An unknown flag is refused, named, with where flags go.
func TestNATSFlagsBeforeOrAfterTheCommand(t *testing.T) {
	env := testenv.Start(t, testenv.WithNATS())
	_, js := env.Connect(t)
	url := env.NATS.URL
	// What the command would use if it ignored a flag: nothing listens there.
	t.Setenv("HOUSEKEEPER_NATS_URL", unreachable)
	main := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), args, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	if code, _, errOut := main("setup", "--functions", "bucket", "--log-level", "warn", "--nats-url", url); code != 0 {
		t.Fatalf("setup … --nats-url URL: exit %d: %s", code, errOut)
	}
	ctx := context.Background()
	if _, err := js.Consumer(ctx, events.RecordStream, "bucket"); err != nil {
		t.Fatalf("the setup with --nats-url after the command made no consumer: %v", err)
	}
	for _, args := range [][]string{
		{"--nats-url", url, "deadletters", "list", "--timeout", "5s"},
		{"deadletters", "list", "--timeout", "5s", "--nats-url", url},
		{"deadletters", "list", "--nats-url=" + url, "--timeout", "5s"},
		{"deadletters", "-nats-url", url, "list", "--timeout", "5s"},
		{"--nats-url", unreachable, "deadletters", "list", "--timeout", "5s", "--nats-url", url}, // the last wins
	} {
		code, out, errOut := main(args...)
		if code != 0 || !strings.Contains(out, "0 dead letters") {
			t.Errorf("housekeeper %s: exit %d, out %q, err %q", strings.Join(args, " "), code, out, errOut)
		}
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"deadletters", "list", "--nats-ur", url}, []string{"deadletters list: unknown flag --nats-ur", "housekeeper deadletters list --help", "--nats-url"}},
		{[]string{"--nats-ur", url, "deadletters", "list"}, []string{"unknown flag --nats-ur before the command", "--nats-url"}},
		{[]string{"--function", "bucket", "deadletters", "list"}, []string{"unknown flag --function before the command", "the command's own after it"}},
		{[]string{"deadletters", "list", "--nats-url"}, []string{"flag needs an argument: -nats-url"}},
	} {
		code, out, errOut := main(tc.args...)
		for _, want := range tc.want {
			if code != 2 || out != "" || !strings.Contains(errOut, want) {
				t.Errorf("housekeeper %s: exit %d, out %q, err %q; want exit 2 and %q", strings.Join(tc.args, " "), code, out, errOut, want)
			}
		}
	}
}

func TestSplitGlobalFlags(t *testing.T) {
	global := globalFlags(&natsconn.Options{})
	global.Bool("debug", false, "a boolean global flag: takes no value from the next argument")
	for _, tc := range []struct {
		rest, command, flags []string
	}{
		{[]string{"resync"}, []string{"resync"}, nil},
		{[]string{"deadletters", "list", "--nats-url", "u", "--function", "bucket"}, []string{"deadletters", "list", "--function", "bucket"}, []string{"--nats-url", "u"}},
		{[]string{"function", "entry", "--nats-creds=c", "--types", "azure", "-nats-tls-ca", "ca"}, []string{"function", "entry", "--types", "azure"}, []string{"--nats-creds=c", "-nats-tls-ca", "ca"}},
		{[]string{"resync", "--debug", "--nats-url", "u"}, []string{"resync"}, []string{"--debug", "--nats-url", "u"}},
		{[]string{"resync", "--", "--nats-url", "u"}, []string{"resync", "--", "--nats-url", "u"}, nil},
		{[]string{"--nats-url"}, []string{"--nats-url"}, nil}, // the command itself is never a flag's
		{[]string{"resync", "--nats-url"}, []string{"resync"}, []string{"--nats-url"}},
		{[]string{"replay", "--until=--nats-url", "-", "---nats-url", "u"}, []string{"replay", "--until=--nats-url", "-", "---nats-url", "u"}, nil},
	} {
		command, flags := splitGlobalFlags(global, tc.rest)
		if !slices.Equal(command, tc.command) || !slices.Equal(flags, tc.flags) {
			t.Errorf("splitGlobalFlags(%q) = %q, %q; want %q, %q", tc.rest, command, flags, tc.command, tc.flags)
		}
	}
}

// housekeeper --version and housekeeper version print the release (functions/version; the
// functions/cmd tests check it against the chart's appVersion and the images).
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}, {"--nats-url", unreachable, "version"}} {
		var out, errOut bytes.Buffer
		if code := Main(context.Background(), args, &out, &errOut); code != 0 || out.String() != "housekeeper "+version.Version+"\n" || errOut.Len() > 0 {
			t.Errorf("housekeeper %s: exit %d, out %q, err %q", strings.Join(args, " "), code, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"version", "now"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "takes no arguments") {
		t.Errorf("housekeeper version now: exit %d, err %q", code, errOut.String())
	}
	if version.Version == "" || strings.HasPrefix(version.Version, "v") {
		t.Errorf("version.Version %q: want the chart's appVersion, without the tag's v", version.Version)
	}
}

// setup --functions creates the consumers of those functions only, and leaves another's as it
// is: the chart's setup Job without the EtcdBackupConfig functions makes no consumer for them.
func TestSetupOnlyTheGivenFunctions(t *testing.T) {
	env := testenv.Start(t, testenv.WithNATS())
	_, js := env.Connect(t)
	f := &fixture{t: t, url: env.NATS.URL, js: js}
	ctx := context.Background()
	has := func(name string) bool {
		_, err := js.Consumer(ctx, events.RecordStream, name)
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatalf("consumer %s: %v", name, err)
		}
		return err == nil
	}
	if code, _, errOut := f.cli("setup", "--functions", "bucket,entry,purge", "--log-level", "warn"); code != 0 {
		t.Fatalf("setup --functions bucket,entry,purge: exit %d: %s", code, errOut)
	}
	for name, want := range map[string]bool{"bucket": true, "entry": true, "purge": true, "schedule": false, "snapshot": false} {
		if has(name) != want {
			t.Errorf("after setup --functions bucket,entry,purge: consumer %s exists: %t, want %t", name, !want, want)
		}
	}
	if code, _, errOut := f.cli("setup", "--log-level", "warn"); code != 0 {
		t.Fatalf("setup: exit %d: %s", code, errOut)
	}
	if code, _, errOut := f.cli("setup", "--functions", "bucket", "--log-level", "warn"); code != 0 {
		t.Fatalf("setup --functions bucket: exit %d: %s", code, errOut)
	}
	for _, name := range []string{"bucket", "entry", "purge", "schedule", "snapshot"} {
		if !has(name) {
			t.Errorf("setup --functions bucket removed the consumer %s", name)
		}
	}
}
