// Package cli is the housekeeper binary's command line: the set-up of NATS, the functions, and
// the operators' tools (replay, resync, dead letters) over the function runtime. Every long
// run prints progress and a summary.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/runtime"
)

var usage = fmt.Sprintf(`usage: housekeeper [--nats-url URL ...] COMMAND

commands:
  nats-auth --out DIR [--form config|jwt] [--account-seed FILE]
                         issue a NATS identity per component (bridge, setup, operator, each
                         function) with its least-privilege permissions, and the server's side
  setup [--stream-replicas N] [--stream-max-age D] [--ack-wait D] [--max-deliver N] ...
                         create or update the streams and every function's durable consumer;
                         run it before the bridge and the functions, and again after a change
  function NAME [--mode pull|http] [--kubeconfig FILE] [--local-root DIR] ...
                         run a function (%s) until interrupted
  forward --function F --url URL
                         deliver F's events from JetStream to F served in http mode (Knative),
                         with retries and dead letters
  replay --function F (--since DURATION | --from-seq N) [--until TIME | --until-seq N]
                         re-deliver a window of the stream of record to one function
  resync                 make the bridge re-list and re-emit every object
  deadletters list [--function F]
                         show dead letters with their reasons
  deadletters retry [--function F] (--seq N[,N...] | --all)
                         re-drive dead letters to their function

Every flag can also be set as HOUSEKEEPER_<FLAG> in the environment.
`, functionNames())

// Main runs the command line and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if err := run(ctx, args, stdout); err != nil {
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

func run(ctx context.Context, args []string, out io.Writer) error {
	var nopts natsconn.Options
	global := flag.NewFlagSet("housekeeper", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	nopts.BindFlags(global)
	if err := config.Parse(global, args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	rest := global.Args()
	if len(rest) == 0 {
		return fmt.Errorf("%w: no command", errUsage)
	}
	connect := func(identity string) (*nats.Conn, jetstream.JetStream, error) {
		auth, err := nopts.Auth(identity)
		if err != nil {
			return nil, nil, fmt.Errorf("connecting to NATS at %s as %s: %w", nopts.URL, identity, err)
		}
		nc, err := nats.Connect(nopts.URL, append(auth, nats.Name("housekeeper-"+identity))...)
		if err != nil {
			return nil, nil, fmt.Errorf("connecting to NATS at %s as %s: %w", nopts.URL, identity, err)
		}
		js, err := jetstream.New(nc)
		return nc, js, err
	}
	switch rest[0] {
	case "nats-auth":
		return runNATSAuth(rest[1:], out)
	case "setup":
		return runSetup(ctx, rest[1:], connect)
	case "function":
		return runFunction(ctx, rest[1:], nopts)
	case "forward":
		return runForward(ctx, rest[1:], nopts)
	case "replay":
		return replay(ctx, rest[1:], out, connect)
	case "resync":
		return resync(ctx, out, connect)
	case "deadletters":
		if len(rest) < 2 {
			return fmt.Errorf("%w: deadletters needs list or retry", errUsage)
		}
		switch rest[1] {
		case "list":
			return deadLettersList(ctx, rest[2:], out, connect)
		case "retry":
			return deadLettersRetry(ctx, rest[2:], out, connect)
		}
		return fmt.Errorf("%w: deadletters %s", errUsage, rest[1])
	}
	return fmt.Errorf("%w: unknown command %q", errUsage, rest[0])
}

// connector connects to NATS as an identity (events.Identity*).
type connector func(identity string) (*nats.Conn, jetstream.JetStream, error)

func replay(ctx context.Context, args []string, out io.Writer, connect connector) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	function := fs.String("function", "", "function to re-deliver to (required)")
	since := fs.Duration("since", 0, "start this long ago")
	fromSeq := fs.Uint64("from-seq", 0, "start at this stream sequence")
	until := fs.String("until", "", "stop after this time (RFC 3339)")
	untilSeq := fs.Uint64("until-seq", 0, "stop after this stream sequence")
	if err := config.Parse(fs, args); err != nil {
		return fmt.Errorf("%w: replay: %v", errUsage, err)
	}
	if *function == "" || (*since == 0) == (*fromSeq == 0) {
		return fmt.Errorf("%w: replay needs --function and one of --since or --from-seq", errUsage)
	}
	w := runtime.Window{FromSeq: *fromSeq, UntilSeq: *untilSeq}
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
	nc, js, err := connect(events.IdentityOperator)
	if err != nil {
		return err
	}
	defer nc.Close()
	last := time.Now()
	res, err := runtime.Replay(ctx, js, *function, w, func(done int, seq uint64) {
		if time.Since(last) > time.Second {
			fmt.Fprintf(out, "replay: %d events re-driven (at sequence %d)\n", done, seq)
			last = time.Now()
		}
	})
	if err != nil {
		return fmt.Errorf("replay to %s: %w (%d events re-driven before the error)", *function, err, res.Redriven)
	}
	if res.Redriven == 0 {
		fmt.Fprintf(out, "replay: no events of %s in the window\n", *function)
		return nil
	}
	fmt.Fprintf(out, "replay: re-drove %d events (sequences %d..%d) to %s\n", res.Redriven, res.FirstSeq, res.LastSeq, *function)
	return nil
}

func resync(ctx context.Context, out io.Writer, connect connector) error {
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

func deadLettersList(ctx context.Context, args []string, out io.Writer, connect connector) error {
	fs := flag.NewFlagSet("deadletters list", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	function := fs.String("function", "", "only this function's dead letters")
	if err := config.Parse(fs, args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	nc, js, err := connect(events.IdentityOperator)
	if err != nil {
		return err
	}
	defer nc.Close()
	dls, err := runtime.ListDeadLetters(ctx, js, *function)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tFUNCTION\tFAILED AT\tDELIVERIES\tTYPE\tSUBJECT\tREASON")
	for _, d := range dls {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", d.Sequence, d.Function, d.FailedAt.Format(time.RFC3339),
			d.Deliveries, d.EventType, d.Subject, d.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d dead letters\n", len(dls))
	return nil
}

func deadLettersRetry(ctx context.Context, args []string, out io.Writer, connect connector) error {
	fs := flag.NewFlagSet("deadletters retry", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	function := fs.String("function", "", "only this function's dead letters")
	seqs := fs.String("seq", "", "dead-letter sequences to retry, comma-separated")
	all := fs.Bool("all", false, "retry every (selected) dead letter")
	if err := config.Parse(fs, args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if (*seqs == "") == !*all {
		return fmt.Errorf("%w: deadletters retry needs --seq or --all", errUsage)
	}
	want := map[uint64]bool{}
	for _, s := range strings.Split(*seqs, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: --seq %q is not a sequence number", errUsage, s)
		}
		want[n] = true
	}
	nc, js, err := connect(events.IdentityOperator)
	if err != nil {
		return err
	}
	defer nc.Close()
	dls, err := runtime.ListDeadLetters(ctx, js, *function)
	if err != nil {
		return err
	}
	retried, failed := 0, 0
	for _, d := range dls {
		if !*all && !want[d.Sequence] {
			continue
		}
		delete(want, d.Sequence)
		if err := runtime.RetryDeadLetter(ctx, js, d); err != nil {
			fmt.Fprintf(out, "retry %d (%s): %v\n", d.Sequence, d.Function, err)
			failed++
			continue
		}
		fmt.Fprintf(out, "retried %d: %s %s → %s\n", d.Sequence, d.EventType, d.Subject, d.Function)
		retried++
	}
	for seq := range want {
		fmt.Fprintf(out, "retry %d: no such dead letter\n", seq)
		failed++
	}
	fmt.Fprintf(out, "%d dead letters re-driven, %d failed\n", retried, failed)
	if failed > 0 {
		return fmt.Errorf("%d dead letters could not be re-driven", failed)
	}
	return nil
}
