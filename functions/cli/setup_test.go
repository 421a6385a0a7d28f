package cli

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// Before the setup a function refuses to start and says what to run; the setup creates the
// streams and a consumer per function reading what the function takes; running it again
// changes nothing, and a changed setting (flag or HOUSEKEEPER_* variable) updates it in place.
func TestSetupCommand(t *testing.T) {
	env := testenv.Start(t, testenv.WithNATS())
	_, js := env.Connect(t)
	f := &fixture{t: t, url: env.NATS.URL, js: js}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	forward := func() (int, string) {
		var out, errOut bytes.Buffer
		code := Main(ctx, []string{"--nats-url", f.url, "forward", "--function", bucket.Definition.Name, "--url", "http://127.0.0.1:1/", "--addr", "127.0.0.1:0", "--log-level", "error"}, &out, &errOut)
		return code, errOut.String()
	}
	if code, errOut := forward(); code != 1 || !strings.Contains(errOut, "stream HOUSEKEEPER does not exist") || !strings.Contains(errOut, "run `housekeeper setup`") {
		t.Errorf("forward before the setup: exit %d, %q", code, errOut)
	}
	if _, err := js.Stream(ctx, events.RecordStream); err == nil {
		t.Fatal("forward created the stream")
	}

	if code, _, errOut := f.cli("setup", "--max-deliver", "7", "--ack-wait", "45s", "--stream-max-age", "48h", "--log-format", "console"); code != 0 {
		t.Fatalf("setup: exit %d: %s", code, errOut)
	}
	if err := events.CheckStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	record, err := js.Stream(ctx, events.RecordStream)
	if err != nil {
		t.Fatal(err)
	}
	if got := record.CachedInfo().Config.MaxAge; got != 48*time.Hour {
		t.Errorf("stream max age %s, want 48h", got)
	}
	consumers := func() map[string]*jetstream.ConsumerInfo {
		infos := map[string]*jetstream.ConsumerInfo{}
		for _, def := range all.Functions {
			fn := def.Function(nil)
			c, err := js.Consumer(ctx, events.RecordStream, fn.Name)
			if err != nil {
				t.Fatalf("consumer of %s: %v", fn.Name, err)
			}
			info := c.CachedInfo()
			if !slices.Equal(slices.Sorted(slices.Values(info.Config.FilterSubjects)), slices.Sorted(slices.Values(fn.FilterSubjects()))) {
				t.Errorf("consumer %s reads %v, the function takes %v", fn.Name, info.Config.FilterSubjects, fn.FilterSubjects())
			}
			infos[fn.Name] = info
		}
		return infos
	}
	before := consumers()
	for name, info := range before {
		if info.Config.MaxDeliver != 7 || info.Config.AckWait != 45*time.Second {
			t.Errorf("consumer %s: max deliver %d, ack wait %s; want 7, 45s", name, info.Config.MaxDeliver, info.Config.AckWait)
		}
	}

	// Again, the same: nothing is touched.
	updates, err := js.Conn().SubscribeSync("$JS.EVENT.ADVISORY.STREAM.UPDATED.>")
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := f.cli("setup", "--max-deliver", "7", "--ack-wait", "45s", "--stream-max-age", "48h"); code != 0 {
		t.Fatalf("setup again: exit %d: %s", code, errOut)
	}
	if m, err := updates.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("setup again updated an unchanged stream: %s", m.Subject)
	}
	for name, info := range consumers() {
		if !info.Created.Equal(before[name].Created) {
			t.Errorf("consumer %s was recreated", name)
		}
	}

	// A setting from the environment updates the consumers in place.
	t.Setenv("HOUSEKEEPER_MAX_DELIVER", "9")
	if code, _, errOut := f.cli("setup", "--log-level", "warn"); code != 0 {
		t.Fatalf("setup with HOUSEKEEPER_MAX_DELIVER: exit %d: %s", code, errOut)
	}
	for name, info := range consumers() {
		if info.Config.MaxDeliver != 9 || !info.Created.Equal(before[name].Created) || info.Config.AckWait != 30*time.Second {
			t.Errorf("consumer %s after the update: max deliver %d, ack wait %s, created %s (was %s)",
				name, info.Config.MaxDeliver, info.Config.AckWait, info.Created, before[name].Created)
		}
	}

	// The function now starts (and stops when asked).
	stopped, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	var out, errOut bytes.Buffer
	if code := Main(stopped, []string{"--nats-url", f.url, "forward", "--function", bucket.Definition.Name, "--url", "http://127.0.0.1:1/", "--addr", "127.0.0.1:0", "--log-level", "error"}, &out, &errOut); code != 0 {
		t.Errorf("forward after the setup: exit %d, %s", code, errOut.String())
	}
}

func TestSetupUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--max-deliver", "0"}, {"--ack-wait", "0s"}, {"--max-ack-pending", "-1"},
		{"--stream-replicas", "0"}, {"--stream-max-age", "0s"}, {"--stream-replicas", "three"}, {"--log-format", "xml"},
		{"--functions", "nope"}, {"--functions", ""}, {"--functions", ","},
	} {
		var out, errOut bytes.Buffer
		// No NATS listens there: a usage error must come before connecting.
		code := Main(context.Background(), append([]string{"--nats-url", "nats://127.0.0.1:1", "setup"}, args...), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), "setup") {
			t.Errorf("setup %v: exit %d, %q; want a usage error", args, code, errOut.String())
		}
	}
}
