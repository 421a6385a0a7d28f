package natsconn_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// rights are, per identity, subjects it must be refused to publish to and one it may publish
// to (so that a server that refuses everything fails the test too).
var rights = []struct {
	identity string
	refused  []string
	allowed  string
}{
	// The bridge re-drives transient dead letters (housekeeper.redrive.*, deleting them), and
	// nothing else of the functions'.
	{events.IdentityBridge, []string{"housekeeper.purge.due.x", "housekeeper.etcdbackup.due.x", "housekeeper.drill.due.x", "housekeeper.copy.due.x",
		"housekeeper.schedule.drill.x", "housekeeper.schedule.retry.entry.x",
		"housekeeper.schedule.purge.x", "housekeeper-deadletter.entry", "$JS.API.STREAM.PURGE.HOUSEKEEPER",
		"$JS.API.CONSUMER.MSG.NEXT.HOUSEKEEPER.entry", "$JS.API.STREAM.MSG.DELETE.HOUSEKEEPER",
		"$JS.API.STREAM.MSG.GET.HOUSEKEEPER_DEADLETTER"}, "housekeeper.backupentry.created.x"},
	{"bucket", []string{"housekeeper.backupbucket.deleting.x", "housekeeper.schedule.purge.x", "housekeeper.redrive.bucket",
		"$JS.API.CONSUMER.MSG.NEXT.HOUSEKEEPER.entry"}, "housekeeper-deadletter.bucket"},
	{"entry", []string{"housekeeper.backupentry.deleting.x", "housekeeper.backupbucket.deleting.x", "housekeeper.purge.due.x",
		"housekeeper.redrive.entry", "housekeeper.schedule.retry.bucket.x", "housekeeper-deadletter.bucket",
		"housekeeper.schedule.etcdbackup.x", "$JS.API.CONSUMER.MSG.NEXT.HOUSEKEEPER.bucket", "$JS.API.STREAM.PURGE.HOUSEKEEPER",
		"$JS.API.STREAM.DELETE.HOUSEKEEPER", "housekeeper.purge.completed.x"}, "housekeeper-audit.purge.scheduled.x"},
	// The purge schedules its verify purges on an entry's schedule subject; it never publishes a
	// due purge itself.
	{"purge", []string{"housekeeper.backupentry.deleting.x", "housekeeper.purge.due.x", "housekeeper.purge.verify.x",
		"housekeeper-audit.purge.scheduled.x", "housekeeper.schedule.etcdbackup.x", "$JS.API.STREAM.PURGE.HOUSEKEEPER_AUDIT"}, "housekeeper.schedule.purge.x"},
	{"schedule", []string{"housekeeper.etcdbackup.due.x", "housekeeper.etcdbackupconfig.deleting.x", "housekeeper.drill.due.x",
		"housekeeper.restoredrill.deleting.x", "$JS.API.STREAM.PURGE.HOUSEKEEPER"}, "housekeeper.unschedule.etcdbackup.x"},
	{"snapshot", []string{"housekeeper.etcdbackup.due.x", "housekeeper.schedule.etcdbackup.x"}, "housekeeper-deadletter.snapshot"},
	// The drill function only reads: it publishes nothing of its own, not even a schedule.
	{"drill", []string{"housekeeper.drill.due.x", "housekeeper.schedule.drill.x", "housekeeper.restoredrill.created.x",
		"housekeeper.backupentry.deleting.x", "housekeeper.purge.due.x", "$JS.API.STREAM.PURGE.HOUSEKEEPER"}, "housekeeper-deadletter.drill"},
	// The copy function publishes nothing of its own either: the schedule function installs its
	// policies' schedules, the server fires them.
	{"copy", []string{"housekeeper.copy.due.x", "housekeeper.schedule.copy.x", "housekeeper.backupcopypolicy.created.x",
		"housekeeper.backupentry.deleting.x", "housekeeper.purge.due.x", "$JS.API.STREAM.PURGE.HOUSEKEEPER"}, "housekeeper-deadletter.copy"},
	// The forwarder consumes every function's consumer and does none of their work.
	{events.IdentityForward, []string{"housekeeper.schedule.purge.x", "housekeeper-audit.purge.scheduled.x", "housekeeper-audit.purge.completed.x",
		"housekeeper.schedule.etcdbackup.x", "housekeeper.unschedule.etcdbackup.x", "housekeeper.schedule.drill.x", "housekeeper.purge.due.x",
		"housekeeper.backupentry.created.x", "housekeeper.redrive.entry", "$JS.API.STREAM.PURGE.HOUSEKEEPER"},
		"$JS.API.CONSUMER.MSG.NEXT.HOUSEKEEPER.purge"},
	{events.IdentitySetup, []string{"housekeeper.backupentry.created.x", "housekeeper.redrive.entry", "$JS.API.STREAM.PURGE.HOUSEKEEPER",
		"$JS.API.STREAM.DELETE.HOUSEKEEPER"}, "$JS.API.STREAM.INFO.HOUSEKEEPER"},
	{events.IdentityOperator, []string{"housekeeper.backupentry.deleting.x", "housekeeper.purge.due.x", "housekeeper.etcdbackup.due.x", "housekeeper.drill.due.x", "housekeeper.copy.due.x",
		"housekeeper.schedule.purge.x", "housekeeper.schedule.retry.entry.x", "$JS.API.STREAM.PURGE.HOUSEKEEPER",
		"$JS.API.STREAM.DELETE.HOUSEKEEPER", "$JS.API.STREAM.UPDATE.HOUSEKEEPER", "$JS.API.STREAM.MSG.DELETE.HOUSEKEEPER",
		"housekeeper-audit.purge.completed.x", "$JS.API.STREAM.PURGE.HOUSEKEEPER_AUDIT"},
		"housekeeper.redrive.entry"},
}

// Every identity `housekeeper nats-auth` issues, in both forms, is refused outside its rights by
// a nats-server that loads them: no one but the bridge publishes object events, no one at all
// publishes due purges, backups or drills (only the server's scheduler fires them), only the operator
// re-drives, no one purges or deletes the stream of record, no one reads another's consumer
// or replies. Each allowed subject is accepted.
func TestIdentitiesAreRefusedOutsideTheirRights(t *testing.T) {
	if got, want := len(rights), len(cli.Permissions()); got != want {
		t.Fatalf("the test covers %d identities, nats-auth issues %d", got, want)
	}
	for _, form := range []natsconn.Form{natsconn.FormConfig, natsconn.FormJWT} {
		t.Run(string(form), func(t *testing.T) {
			env, auth := pipeline.StartSecureNATS(t, form)
			for _, r := range rights {
				violations := make(chan error, 64)
				auth, err := auth.Options(env.NATS.URL, r.identity).Auth(r.identity)
				if err != nil {
					t.Fatal(err)
				}
				nc, err := nats.Connect(env.NATS.URL, append(auth, nats.PermissionErrOnSubscribe(true),
					nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))...)
				if err != nil {
					t.Fatalf("%s: %v", r.identity, err)
				}
				for _, subject := range r.refused {
					if err := publish(nc, subject, violations); err == nil || !strings.Contains(err.Error(), subject) {
						t.Errorf("%s may publish to %s (%v)", r.identity, subject, err)
					}
				}
				if err := publish(nc, r.allowed, violations); err != nil {
					t.Errorf("%s is refused %s: %v", r.identity, r.allowed, err)
				}
				for _, subject := range []string{"_INBOX.>", events.InboxPrefix("someone-else") + ".>", "housekeeper.>"} {
					if err := subscribe(nc, subject, violations); err == nil {
						t.Errorf("%s may subscribe to %s", r.identity, subject)
					}
				}
				nc.Close()
			}
		})
	}
}

// publish publishes to subject and returns the violation the server reports, if it does
// within two seconds.
func publish(nc *nats.Conn, subject string, violations chan error) error {
	if err := nc.Publish(subject, []byte("{}")); err != nil {
		return err
	}
	return refusal(nc, violations)
}

// subscribe subscribes to subject and returns the violation the server reports, if any.
func subscribe(nc *nats.Conn, subject string, violations chan error) error {
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	return refusal(nc, violations)
}

// refusal is the violation the server reports for what nc just sent, if it does within two
// seconds of the server having read it.
func refusal(nc *nats.Conn, violations chan error) error {
	if err := nc.Flush(); err != nil {
		return err
	}
	select {
	case err := <-violations:
		return err
	case <-time.After(2 * time.Second):
		return nil
	}
}

// A wrong credential ends start-up at once with an error that says NATS refused the identity,
// and neither the error nor the log carries the seed: an NKey the server does not know, a
// certificate from another CA, and the CLI with a wrong seed.
func TestWrongCredentialsFailAtStartWithoutTheSecret(t *testing.T) {
	env, auth := pipeline.StartSecureNATS(t, natsconn.FormConfig)
	stranger, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := stranger.Seed()
	wrongSeed := filepath.Join(t.TempDir(), "stranger.nk")
	if err := os.WriteFile(wrongSeed, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)

	var said []string // every error, to look for the seed in
	o := auth.Options(env.NATS.URL, "entry")
	o.NKeyFile = wrongSeed
	start := time.Now()
	_, err = natsconn.Connect(o, "entry", "housekeeper-entry", log)
	said = append(said, fmt.Sprint(err))
	if err == nil || !strings.Contains(err.Error(), "refused identity entry") || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Errorf("unknown NKey: %v, want a refusal naming the identity", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the refusal took %s: it should end start-up at once", took)
	}

	other, err := natsconn.WriteTLS(t.TempDir(), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	o = auth.Options(env.NATS.URL, "entry")
	o.TLSCA = other.CA
	_, err = natsconn.Connect(o, "entry", "housekeeper-entry", log)
	said = append(said, fmt.Sprint(err))
	if err == nil || !strings.Contains(err.Error(), "refused identity entry") ||
		!strings.Contains(err.Error(), "certificate") {
		t.Errorf("server certificate from an unknown CA: %v, want a refusal about the certificate", err)
	}

	var out, errOut bytes.Buffer
	args := append(auth.Args(env.NATS.URL, events.IdentitySetup), "--nats-nkey", wrongSeed, "setup")
	args = slicesWithout(args, "--nats-nkey", filepath.Join(auth.Dir, events.IdentitySetup+".nk"))
	if code := cli.Main(context.Background(), args, &out, &errOut); code != 1 || !strings.Contains(strings.ToLower(errOut.String()), "authorization violation") {
		t.Errorf("setup with a wrong seed: exit %d, %q", code, errOut.String())
	}

	said = append(said, errOut.String(), out.String())
	for _, e := range logs.All() {
		said = append(said, e.Message, fmt.Sprint(e.ContextMap()))
	}
	if everything := strings.Join(said, "\n"); strings.Contains(everything, string(seed[:20])) {
		t.Errorf("the seed appears in an error or the log")
	}
}

// slicesWithout drops the flag name and its value value from args.
func slicesWithout(args []string, name, value string) []string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name && args[i+1] == value {
			return append(append([]string{}, args[:i]...), args[i+2:]...)
		}
	}
	return args
}
