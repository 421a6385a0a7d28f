// Package cli is the housekeeper binary's command line: the set-up of NATS, the functions, and
// the operators' tools (replay, resync, dead letters) over the function runner. Every long
// run prints progress and a summary.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/logging"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/functions/version"
)

var usage = fmt.Sprintf(`usage: housekeeper [--nats-url URL ...] COMMAND [flags]
       housekeeper --version

The NATS flags (--nats-url, --nats-creds, ...) go before or after the command; a command's own
flags after it.

commands:
  nats-auth --out DIR [--form config|jwt] [--account-seed FILE]
                         issue a NATS identity per component (bridge, setup, operator, each
                         function) with its least-privilege permissions, and the server's side
  setup [--functions F,...] [--stream-replicas N] [--audit-replicas N] [--stream-max-age D] [--ack-wait D] ...
                         create or update the streams and every function's durable consumer (or
                         those of --functions); run it before the bridge and the functions, and
                         again after a change
  function NAME [--mode pull|http] [--kubeconfig FILE] [--local-root DIR] ...
                         run a function (%s) until interrupted
  forward --function F --url URL
                         deliver F's events from JetStream to F served in http mode (Knative),
                         with retries and dead letters
  replay --function F (--since DURATION | --from-seq N) [--until TIME | --until-seq N] [--timeout D]
                         re-deliver a window of the stream of record to one function
  resync                 make the bridge re-list and re-emit every object
  drill (--entry NAME [--etcd NAME] | --config NAMESPACE/NAME) [--kubeconfig FILE] [--work-dir DIR] [--output text|json]
                         restore a BackupEntry's latest backups, or an EtcdBackupConfig's newest,
                         into a throwaway etcd now and say whether they restore (exit code 1 if
                         not), naming the object at fault
  deadletters list [--function F] [--kubeconfig FILE] [--timeout D]
                         show dead letters with their age, reason and their object's state now
  deadletters retry [--function F] (--seq N[,N...] | --all) [--timeout D]
                         re-drive dead letters to their function
  deadletters discard [--function F] (--seq N[,N...] | --resolved | --all) [--timeout D]
                         remove dead letters, e.g. those whose object converged or is gone
  copy-binary --to FILE [--from FILE]
                         copy an executable (this binary without --from) for a pod's init
                         containers: how the drill's pod gets etcdbrctl from its image
  version                print housekeeper's version (as --version does)

replay and deadletters give up once JetStream has not answered for --timeout (default %s: a
leader election takes seconds), saying what they waited for and how far they got.

housekeeper COMMAND --help shows a command's flags. Every flag can also be set as
HOUSEKEEPER_<FLAG> in the environment.
`, functionNames(), defaultTimeout)

// deadLettersHelp is what `housekeeper deadletters --help` prints: its three commands.
const deadLettersHelp = `usage: housekeeper [--nats-url URL ...] deadletters list|retry|discard [flags]

Dead letters are the events a function gave up on (after its deliveries ran out, or refused for
good), kept in the stream HOUSEKEEPER_DEADLETTER with their reason. These commands connect as the
operator identity.

commands:
  list [--function F] [--kubeconfig FILE] [--timeout D]
                         show dead letters with their age, reason and their object's state now
  retry [--function F] (--seq N[,N...] | --all) [--timeout D]
                         re-drive dead letters to their function
  discard [--function F] (--seq N[,N...] | --resolved | --all) [--timeout D]
                         remove dead letters, e.g. those whose object converged or is gone

housekeeper deadletters COMMAND --help shows a command's flags. The NATS flags (housekeeper
--help) go before or after the command.
`

// Main runs the command line and returns the exit code. providers are the object store
// providers linked into the binary: what its functions can open (a main lists them, so an
// image for one cloud links no other cloud's SDK).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, providers ...objectstore.Plugin) int {
	if err := run(ctx, args, stdout, providers); err != nil {
		var help helpError
		if errors.As(err, &help) {
			fmt.Fprint(stdout, string(help))
			return 0
		}
		fmt.Fprintln(stderr, "housekeeper:", err)
		if errors.Is(err, errUsage) {
			fmt.Fprint(stderr, usage)
			return 2
		}
		return 1
	}
	return 0
}

var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, out io.Writer, providers []objectstore.Plugin) error {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		fmt.Fprintln(out, version.String("housekeeper"))
		return nil
	}
	var nopts natsconn.Options
	global := globalFlags(&nopts)
	err := config.Parse(global, args)
	if errors.Is(err, flag.ErrHelp) || err == nil && global.NArg() > 0 && isHelp(global.Arg(0)) {
		var flags strings.Builder
		global.SetOutput(&flags)
		global.PrintDefaults()
		return helpError(usage + "\nNATS flags (every command, before or after it):\n" + flags.String())
	}
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, describeFlagError(err, "before the command"))
	}
	// The NATS flags given after the command are parsed as if given before it: on the command
	// line they win over the environment, and the last of a flag given twice wins.
	rest, after := splitGlobalFlags(global, global.Args())
	if err := global.Parse(after); err != nil {
		return fmt.Errorf("%w: %v", errUsage, describeFlagError(err, "after the command"))
	}
	if len(rest) == 0 {
		return fmt.Errorf("%w: no command", errUsage)
	}
	connect := natsConnector(nopts)
	switch rest[0] {
	case "version":
		fs := newFlags("version", "", "Print housekeeper's version: the chart's appVersion, whose images are tagged v<version>.")
		if err := fs.parse(rest[1:]); err != nil {
			return err
		}
		fmt.Fprintln(out, version.String("housekeeper"))
		return nil
	case "nats-auth":
		return runNATSAuth(rest[1:], out)
	case "setup":
		return runSetup(ctx, rest[1:], connect)
	case "function":
		return runFunction(ctx, rest[1:], nopts, providers)
	case "forward":
		return runForward(ctx, rest[1:], nopts)
	case "replay":
		return replay(ctx, rest[1:], out, connect)
	case "resync":
		return resync(ctx, rest[1:], out, connect)
	case "drill":
		return runDrill(ctx, rest[1:], out, providers)
	case "copy-binary":
		return runCopyBinary(rest[1:], out)
	case "deadletters":
		if len(rest) >= 2 && isHelp(rest[1]) {
			return helpError(deadLettersHelp)
		}
		if len(rest) < 2 {
			return fmt.Errorf("%w: deadletters needs list, retry or discard (housekeeper deadletters --help)", errUsage)
		}
		switch rest[1] {
		case "list":
			return deadLettersList(ctx, rest[2:], out, connect)
		case "retry":
			return deadLettersRetry(ctx, rest[2:], out, connect)
		case "discard":
			return deadLettersDiscard(ctx, rest[2:], out, connect)
		}
		return fmt.Errorf("%w: deadletters %s", errUsage, rest[1])
	}
	return fmt.Errorf("%w: unknown command %q", errUsage, rest[0])
}

// globalFlags are the flags every command takes, before or after the command: NATS's.
func globalFlags(nopts *natsconn.Options) *flag.FlagSet {
	global := flag.NewFlagSet("housekeeper", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	global.Usage = func() {}
	nopts.BindFlags(global)
	return global
}

// globalFlagNames lists the global flags as --name, for messages.
func globalFlagNames() string {
	var names []string
	globalFlags(&natsconn.Options{}).VisitAll(func(f *flag.Flag) { names = append(names, "--"+f.Name) })
	return strings.Join(names, ", ")
}

// splitGlobalFlags takes the global flags out of rest, the command and what follows it: a
// global flag is -name, --name, -name=value or --name=value, and the next argument is its value
// unless it has one or is boolean. It returns rest without them and them, in their order.
// Arguments after "--" stay as they are. An argument equal to a global flag's name is taken as
// that flag even where it would be another flag's value (--url --nats-url): write such a value
// as --url=--nats-url.
func splitGlobalFlags(global *flag.FlagSet, rest []string) (command, flags []string) {
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			command = append(command, rest[i:]...)
			break
		}
		name, hasValue := flagName(a)
		f := global.Lookup(name)
		if i == 0 || f == nil {
			command = append(command, a)
			continue
		}
		flags = append(flags, a)
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !hasValue && !(ok && b.IsBoolFlag()) && i+1 < len(rest) {
			i++
			flags = append(flags, rest[i])
		}
	}
	return command, flags
}

// flagName is the name of the flag arg is (-name, --name, with =value or not), or "" if arg is
// no flag.
func flagName(arg string) (name string, hasValue bool) {
	if len(arg) < 2 || arg[0] != '-' {
		return "", false
	}
	name = strings.TrimPrefix(arg[1:], "-")
	if name == "" || name[0] == '-' || name[0] == '=' {
		return "", false
	}
	name, _, hasValue = strings.Cut(name, "=")
	return name, hasValue
}

// describeFlagError says which flag the flag package did not know, and where flags go.
func describeFlagError(err error, where string) error {
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok {
		name = "--" + strings.TrimLeft(name, "-")
		return fmt.Errorf("unknown flag %s %s: the NATS flags (%s) go before or after the command, the command's own after it (housekeeper COMMAND --help lists them)",
			name, where, globalFlagNames())
	}
	return err
}

// connector connects to NATS as an identity (events.Identity*).
type connector func(identity string) (*nats.Conn, jetstream.JetStream, error)

// natsConnector connects with nopts, for a command that ends: nats.go's few reconnects, and
// publishes that wait out a leader election, saying so on stderr once; --timeout or Ctrl-C
// ends them.
func natsConnector(nopts natsconn.Options) connector {
	return func(identity string) (*nats.Conn, jetstream.JetStream, error) {
		auth, err := nopts.Auth(identity)
		if err != nil {
			return nil, nil, fmt.Errorf("connecting to NATS at %s as %s: %w", nopts.URL, identity, err)
		}
		nc, err := nats.Connect(nopts.URL, append(auth, nats.Name("housekeeper-"+identity))...)
		if err != nil {
			return nil, nil, fmt.Errorf("connecting to NATS at %s as %s: %w", nopts.URL, identity, err)
		}
		log, err := logging.New(logging.Options{Format: "console"})
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		js, err := natsconn.NewJetStream(nc, log.Named(identity))
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		return nc, js, nil
	}
}

func replay(ctx context.Context, args []string, out io.Writer, connect connector) error {
	fs := newFlags("replay", "--function F (--since D | --from-seq N) [--until TIME | --until-seq N] [--timeout D]",
		"Re-deliver a window of the stream of record to one function, as new deliveries of the same events\n(the functions are idempotent). It prints what it re-drove. One that stops (no answer from\nJetStream within --timeout, an error, Ctrl-C) says how far it got and how to resume.")
	function := fs.String("function", "", "function to re-deliver to (required)")
	since := fs.Duration("since", 0, "start this long ago")
	fromSeq := fs.Uint64("from-seq", 0, "start at this stream sequence")
	until := fs.String("until", "", "stop after this time (RFC 3339)")
	untilSeq := fs.Uint64("until-seq", 0, "stop after this stream sequence")
	timeout := bindTimeout(fs)
	if err := fs.parse(args); err != nil {
		return err
	}
	if *function == "" || (*since == 0) == (*fromSeq == 0) {
		return fmt.Errorf("%w: replay needs --function and one of --since or --from-seq", errUsage)
	}
	if err := checkTimeout("replay", *timeout); err != nil {
		return err
	}
	w := runner.Window{FromSeq: *fromSeq, UntilSeq: *untilSeq}
	if *since != 0 {
		w.Since = time.Now().Add(-*since)
	}
	if *until != "" {
		t, err := time.Parse(time.RFC3339, *until)
		if err != nil {
			return fmt.Errorf("%w: --until %q is not RFC 3339", errUsage, *until)
		}
		w.Until = t
	}
	fmt.Fprintf(out, "replay: re-delivering %s's events of the stream of record %s to it (its handlers are idempotent)\n", *function, describeWindow(w))
	nc, js, err := connect(events.IdentityOperator)
	if err != nil {
		return err
	}
	defer nc.Close()
	p := &replayProgress{out: out, last: time.Now()}
	// Every event re-driven is an answer: --timeout bounds the silence, not the replay.
	err = watch(ctx, *timeout, "re-driving events of stream "+events.RecordStream, func(ctx context.Context, alive func()) error {
		_, err := runner.Replay(ctx, js, *function, w, func(done int, seq uint64) {
			alive()
			p.report(done, seq)
		})
		return err
	})
	done, first, last := p.stop()
	if err != nil {
		if done == 0 {
			return fmt.Errorf("replay to %s: %w (nothing re-driven)", *function, err)
		}
		resume := fmt.Sprintf("--function %s --from-seq %d", *function, last+1)
		if *untilSeq != 0 {
			resume += fmt.Sprintf(" --until-seq %d", *untilSeq)
		}
		if *until != "" {
			resume += " --until " + *until
		}
		fmt.Fprintf(out, "replay: stopped after re-driving %d events (sequences %d..%d); to resume: housekeeper replay %s\n", done, first, last, resume)
		return fmt.Errorf("replay to %s: %w; it re-drove %d events, up to sequence %d: resume with %s", *function, err, done, last, resume)
	}
	if done == 0 {
		fmt.Fprintf(out, "replay: no events of %s in the window\n", *function)
		return nil
	}
	fmt.Fprintf(out, "replay: re-drove %d events (sequences %d..%d) to %s\n", done, first, last, *function)
	return nil
}

// replayProgress is how far a replay got. A replay given up on may still report after the
// command ended: it is locked, and quiet once stopped.
type replayProgress struct {
	out io.Writer

	mu         sync.Mutex
	stopped    bool
	done       int
	first, seq uint64
	last       time.Time // of the last line printed
}

// report takes an event re-driven, and prints the count every second.
func (p *replayProgress) report(done int, seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	if p.first == 0 {
		p.first = seq
	}
	p.done, p.seq = done, seq
	if time.Since(p.last) > time.Second {
		fmt.Fprintf(p.out, "replay: %d events re-driven (at sequence %d)\n", done, seq)
		p.last = time.Now()
	}
}

// stop ends the reports and returns how many events were re-driven, the first and last.
func (p *replayProgress) stop() (done int, first, last uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	return p.done, p.first, p.seq
}

func resync(ctx context.Context, args []string, out io.Writer, connect connector) error {
	fs := newFlags("resync", "", "Make the bridge leader re-list every object it serves and announce each again: the functions\nconverge every one (idempotent, but a burst of work). For gaps upstream of NATS.")
	if err := fs.parse(args); err != nil {
		return err
	}
	fmt.Fprintln(out, "resync: asking the bridge leader to announce every object it serves again")
	nc, _, err := connect(events.IdentityOperator)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, events.SubjectResync, nil)
	if err != nil {
		return fmt.Errorf("no bridge answered on %s: %w", events.SubjectResync, err)
	}
	var reply events.ResyncReply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return fmt.Errorf("bridge answered %q: %w", msg.Data, err)
	}
	fmt.Fprintf(out, "resync: the bridge queued %d objects to be announced again\n", reply.Queued)
	return nil
}

// describeWindow says which part of the stream a replay covers.
func describeWindow(w runner.Window) string {
	from := fmt.Sprintf("from sequence %d", w.FromSeq)
	if !w.Since.IsZero() {
		from = "since " + w.Since.UTC().Format(time.RFC3339)
	}
	switch {
	case w.UntilSeq > 0:
		return fmt.Sprintf("%s until sequence %d", from, w.UntilSeq)
	case !w.Until.IsZero():
		return fmt.Sprintf("%s until %s", from, w.Until.UTC().Format(time.RFC3339))
	}
	return from + " to now"
}

// Run is a main: the command line of os.Args until SIGINT or SIGTERM, then os.Exit with its
// code. providers are the object store providers the binary links.
func Run(providers ...objectstore.Plugin) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr, providers...)
	stop()
	os.Exit(code)
}
