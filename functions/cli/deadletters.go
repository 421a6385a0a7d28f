package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// DeadLetterState is what became of a dead letter's object since its event failed.
type DeadLetterState struct {
	// Object names it: "BackupEntry shoot--dev--app".
	Object string
	// State says, in words, how the object is now: "gone", "Reconcile Succeeded", "Delete Error: …".
	State string
	// Resolved: the object is gone, or it converged after the failure; retrying would do nothing
	// the functions have not done since, or replay an error about an object that is no more.
	Resolved bool
}

// objectOf names the dead letter's object: "BackupEntry shoot--dev--app".
func objectOf(d runner.DeadLetter) string {
	ref, err := d.Object()
	if err != nil {
		return "?"
	}
	return string(ref.Kind) + " " + ref.Name
}

// StateOf reads the dead letter's object on the API server.
func StateOf(ctx context.Context, c client.Reader, d runner.DeadLetter) DeadLetterState {
	ref, err := d.Object()
	if err != nil {
		return DeadLetterState{Object: "?", State: "unknown: " + err.Error()}
	}
	st := DeadLetterState{Object: objectOf(d)}
	var obj client.Object
	switch ref.Kind {
	case events.KindBackupBucket:
		obj = &extensionsv1alpha1.BackupBucket{}
	case events.KindBackupEntry:
		obj = &extensionsv1alpha1.BackupEntry{}
	case events.KindEtcdBackupConfig:
		obj = &backupv1alpha1.EtcdBackupConfig{}
	case events.KindRestoreDrill:
		obj = &backupv1alpha1.RestoreDrill{}
	case events.KindBackupCopyPolicy:
		obj = &backupv1alpha1.BackupCopyPolicy{}
	default:
		st.State = "unknown kind"
		return st
	}
	key := client.ObjectKey{Name: ref.Name}
	if ns, name, ok := strings.Cut(ref.Name, "/"); ok {
		key = client.ObjectKey{Namespace: ns, Name: name}
	}
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			st.State, st.Resolved = "gone", true
			return st
		}
		st.State = "unknown: " + err.Error()
		return st
	}
	if ref.UID != "" && string(obj.GetUID()) != ref.UID {
		st.State, st.Resolved = "gone (a new object of the same name exists)", true
		return st
	}
	switch o := obj.(type) {
	case *backupv1alpha1.EtcdBackupConfig:
		st.State, st.Resolved = configState(o, d)
	case *backupv1alpha1.RestoreDrill:
		st.State, st.Resolved = drillState(o, d)
	case *backupv1alpha1.BackupCopyPolicy:
		st.State, st.Resolved = policyState(o, d)
	case extensionsv1alpha1.Object:
		st.State, st.Resolved = extensionState(o, d.FailedAt)
	}
	return st
}

// extensionState: resolved once a lastOperation succeeded since the failure.
func extensionState(o extensionsv1alpha1.Object, failedAt time.Time) (string, bool) {
	last := o.GetExtensionStatus().GetLastOperation()
	if last == nil {
		return "no lastOperation yet", false
	}
	state := fmt.Sprintf("%s %s", last.Type, last.State)
	if e := o.GetExtensionStatus().GetLastError(); e != nil && last.State != gardencorev1beta1.LastOperationStateSucceeded {
		state += ": " + e.Description
	}
	// lastUpdateTime has whole seconds: a success in the second of the failure counts.
	return state, last.State == gardencorev1beta1.LastOperationStateSucceeded && !last.LastUpdateTime.Time.Before(failedAt.Truncate(time.Second))
}

// configState: a schedule's dead letter is resolved once the current generation is scheduled,
// a snapshot's once a backup was taken after the failure.
func configState(o *backupv1alpha1.EtcdBackupConfig, d runner.DeadLetter) (string, bool) {
	scheduled := meta.FindStatusCondition(o.Status.Conditions, backupv1alpha1.ConditionScheduled)
	succeeded := meta.FindStatusCondition(o.Status.Conditions, backupv1alpha1.ConditionBackupSucceeded)
	var words []string
	if scheduled != nil {
		words = append(words, fmt.Sprintf("Scheduled=%s", scheduled.Status))
	}
	if succeeded != nil {
		words = append(words, fmt.Sprintf("BackupSucceeded=%s", succeeded.Status))
		if succeeded.Status != "True" && succeeded.Message != "" {
			words = append(words, succeeded.Message)
		}
	}
	state := strings.Join(words, ", ")
	if state == "" {
		state = "no conditions yet"
	}
	if d.Function == "snapshot" {
		return state, o.Status.LastBackup != nil && !o.Status.LastBackup.Time.Time.Before(d.FailedAt.Truncate(time.Second))
	}
	return state, scheduled != nil && scheduled.Status == "True" && o.Status.ObservedGeneration == o.Generation
}

// drillState: a schedule's dead letter is resolved once the current generation is scheduled,
// a drill's once a run was recorded after the failure.
func drillState(o *backupv1alpha1.RestoreDrill, d runner.DeadLetter) (string, bool) {
	return runState(o.Generation, o.Status.ObservedGeneration, o.Status.Conditions, backupv1alpha1.ConditionDrillsSucceeded,
		o.Status.LastRun, "drill", d)
}

// policyState: a schedule's dead letter is resolved once the current generation is scheduled,
// a copy's once a run was recorded after the failure.
func policyState(o *backupv1alpha1.BackupCopyPolicy, d runner.DeadLetter) (string, bool) {
	return runState(o.Generation, o.Status.ObservedGeneration, o.Status.Conditions, backupv1alpha1.ConditionCopiesSucceeded,
		o.Status.LastRun, "copy", d)
}

// runState is the state of an object whose schedule fires runs of the function named runs: its
// Scheduled condition and ran, the condition of its last run, with that run's message when it
// failed. A dead letter of runs is resolved once a run was recorded after the failure, any
// other function's (the schedule's) once the current generation is scheduled.
func runState(generation, observed int64, conditions []metav1.Condition, ran string, lastRun *metav1.Time, runs string, d runner.DeadLetter) (string, bool) {
	scheduled := meta.FindStatusCondition(conditions, backupv1alpha1.ConditionScheduled)
	last := meta.FindStatusCondition(conditions, ran)
	var words []string
	for _, c := range []*metav1.Condition{scheduled, last} {
		if c != nil {
			words = append(words, fmt.Sprintf("%s=%s", c.Type, c.Status))
		}
	}
	if last != nil && last.Status != metav1.ConditionTrue && last.Message != "" {
		words = append(words, last.Message)
	}
	state := strings.Join(words, ", ")
	if state == "" {
		state = "no conditions yet"
	}
	if d.Function == runs {
		return state, lastRun != nil && !lastRun.Time.Before(d.FailedAt.Truncate(time.Second))
	}
	return state, scheduled != nil && scheduled.Status == metav1.ConditionTrue && observed == generation
}

// deadLetterFlags are the flags the dead-letter commands share: which function's, and how to
// reach the API server for the objects' states.
type deadLetterFlags struct {
	*commandFlags
	function *string
	kube     kube.Options
	timeout  *time.Duration
}

func newDeadLetterFlags(name, synopsis, summary string) *deadLetterFlags {
	f := &deadLetterFlags{commandFlags: newFlags(name, synopsis, summary)}
	f.function = f.String("function", "", "only this function's dead letters")
	f.kube.BindFlags(f.FlagSet, os.Getenv("KUBECONFIG"))
	f.timeout = bindTimeout(f.commandFlags)
	return f
}

func (f *deadLetterFlags) parse(args []string) error {
	if err := f.commandFlags.parse(args); err != nil {
		return err
	}
	return checkTimeout(f.Name(), *f.timeout)
}

// states reads every dead letter's object; without a reachable API server it says why and
// returns nil.
func (f *deadLetterFlags) states(ctx context.Context, out io.Writer, dls []runner.DeadLetter) map[uint64]DeadLetterState {
	if len(dls) == 0 {
		return nil
	}
	cfg, err := f.kube.Config()
	var c client.Client
	if err == nil {
		c, err = kube.NewClient(cfg)
	}
	if err != nil {
		fmt.Fprintf(out, "(objects' states unknown: no Kubernetes API: %v; give --kubeconfig)\n", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	states := make(map[uint64]DeadLetterState, len(dls))
	for _, d := range dls {
		states[d.Sequence] = StateOf(ctx, c, d)
	}
	return states
}

func deadLettersList(ctx context.Context, args []string, out io.Writer, connect connector) error {
	fs := newDeadLetterFlags("deadletters list", "[--function F] [--kubeconfig FILE] [--timeout D]",
		"Show the events functions gave up on: when, how often tried, why, and how their object is now.\nA dead letter whose object since converged or is gone is RESOLVED: discard those with\n`housekeeper deadletters discard --resolved`. Reading them all must end within --timeout.")
	if err := fs.parse(args); err != nil {
		return err
	}
	nc, _, dls, err := connectAndList(ctx, fs, connect)
	if err != nil {
		return err
	}
	defer nc.Close()
	states := fs.states(ctx, out, dls)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tFUNCTION\tAGE\tDELIVERIES\tCAUSE\tTYPE\tOBJECT\tNOW\tREASON")
	resolved := 0
	for _, d := range dls {
		now := "?"
		if st, known := states[d.Sequence]; known {
			now = st.State
			if st.Resolved {
				now = "RESOLVED: " + now
				resolved++
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", d.Sequence, d.Function, age(d.FailedAt), d.Deliveries, d.Cause, d.EventType, objectOf(d), now, d.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d dead letters, %d resolved\n", len(dls), resolved)
	return nil
}

// age is how long ago t was, in the largest whole unit.
func age(t time.Time) string {
	switch d := time.Since(t); {
	case t.IsZero():
		return "?"
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	case d >= time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	case d >= time.Minute:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	default:
		return fmt.Sprintf("%ds", int(d/time.Second))
	}
}

// selection is which dead letters a command acts on: --seq, or --all, or --resolved.
type selection struct {
	seqs     *string
	all      *bool
	resolved *bool
	want     map[uint64]bool
}

// parseSelection parses a command that acts on selected dead letters (with --resolved if
// resolved), and checks the selection.
func parseSelection(args []string, command, usage, help string, resolved bool) (*deadLetterFlags, *selection, error) {
	fs := newDeadLetterFlags(command, usage, help)
	sel := &selection{}
	sel.bind(fs, resolved)
	if err := fs.parse(args); err != nil {
		return nil, nil, err
	}
	return fs, sel, sel.check(command)
}

func (s *selection) bind(f *deadLetterFlags, resolved bool) {
	s.seqs = f.String("seq", "", "dead-letter sequences, comma-separated")
	s.all = f.Bool("all", false, "every (selected) dead letter")
	if resolved {
		s.resolved = f.Bool("resolved", false, "the dead letters whose object converged or is gone since")
	} else {
		s.resolved = new(bool)
	}
}

func (s *selection) check(command string) error {
	given := 0
	for _, b := range []bool{*s.seqs != "", *s.all, *s.resolved} {
		if b {
			given++
		}
	}
	if given != 1 {
		return fmt.Errorf("%w: %s needs exactly one way to select: --seq, --all or (discard) --resolved", errUsage, command)
	}
	s.want = map[uint64]bool{}
	for _, v := range strings.Split(*s.seqs, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: --seq %q is not a sequence number", errUsage, v)
		}
		s.want[n] = true
	}
	return nil
}

func deadLettersRetry(ctx context.Context, args []string, out io.Writer, connect connector) error {
	fs, sel, err := parseSelection(args, "deadletters retry", "[--function F] (--seq N[,N...] | --all) [--kubeconfig FILE] [--timeout D]",
		"Re-drive dead letters to their function. One whose object is gone is not retried (it would\nreplay the old error): discard it. Once JetStream has not answered for --timeout it stops,\nsaying which were re-driven; the others stay dead letters.", false)
	if err != nil {
		return err
	}
	return eachDeadLetter(ctx, fs, sel, out, connect, "re-driven", func(ctx context.Context, js jetstream.JetStream, d runner.DeadLetter, st *DeadLetterState) (string, error) {
		if st != nil && strings.HasPrefix(st.State, "gone") {
			return "", fmt.Errorf("its %s is %s: retrying would replay the old error; discard it", st.Object, st.State)
		}
		if err := runner.RetryDeadLetter(ctx, js, d); err != nil {
			return "", err
		}
		return fmt.Sprintf("retried %d: %s %s → %s", d.Sequence, d.EventType, d.Subject, d.Function), nil
	})
}

func deadLettersDiscard(ctx context.Context, args []string, out io.Writer, connect connector) error {
	fs, sel, err := parseSelection(args, "deadletters discard", "[--function F] (--seq N[,N...] | --resolved | --all) [--kubeconfig FILE] [--timeout D]",
		"Remove dead letters without re-driving them: those whose object converged or is gone since\n(--resolved, which reads the objects on the API server), or the ones named. Once JetStream has\nnot answered for --timeout it stops, saying which were discarded.", true)
	if err != nil {
		return err
	}
	return eachDeadLetter(ctx, fs, sel, out, connect, "discarded", func(ctx context.Context, js jetstream.JetStream, d runner.DeadLetter, st *DeadLetterState) (string, error) {
		if *sel.resolved && (st == nil || !st.Resolved) {
			return "", errSkip
		}
		if err := runner.DiscardDeadLetter(ctx, js, d.Sequence); err != nil {
			return "", err
		}
		what := fmt.Sprintf("discarded %d: %s %s (%s)", d.Sequence, d.EventType, d.Subject, d.Function)
		if st != nil {
			what += ", its " + st.Object + " now " + st.State
		}
		return what, nil
	})
}

// connectAndList connects as the operator and lists the dead letters of --function (all if
// empty), within --timeout; the caller closes the connection.
func connectAndList(ctx context.Context, fs *deadLetterFlags, connect connector) (*nats.Conn, jetstream.JetStream, []runner.DeadLetter, error) {
	nc, js, err := connect(events.IdentityOperator)
	if err != nil {
		return nil, nil, nil, err
	}
	var dls []runner.DeadLetter
	err = watch(ctx, *fs.timeout, "reading dead letters from stream "+events.DeadLetterStream, func(ctx context.Context, _ func()) error {
		list, err := runner.ListDeadLetters(ctx, js, *fs.function)
		dls = list
		return err
	})
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	return nc, js, dls, nil
}

// errSkip leaves a dead letter alone without counting it as failed.
var errSkip = errors.New("skip")

// eachDeadLetter says what it is about to do, then does act on each selected dead letter with
// its object's state (nil when unknown), printing each outcome and a summary. Each act has
// --timeout; once one got no answer (or on Ctrl-C) it stops and names those not tried.
func eachDeadLetter(ctx context.Context, fs *deadLetterFlags, sel *selection, out io.Writer, connect connector, done string,
	act func(context.Context, jetstream.JetStream, runner.DeadLetter, *DeadLetterState) (string, error)) error {
	nc, js, dls, err := connectAndList(ctx, fs, connect)
	if err != nil {
		return err
	}
	defer nc.Close()
	var selected []runner.DeadLetter
	for _, d := range dls {
		if *sel.all || *sel.resolved || sel.want[d.Sequence] {
			selected = append(selected, d)
			delete(sel.want, d.Sequence)
		}
	}
	scope := "every function's"
	if *fs.function != "" {
		scope = "function " + *fs.function + "'s"
	}
	fmt.Fprintf(out, "%d of %s %d dead letters selected\n", len(selected), scope, len(dls))
	states := fs.states(ctx, out, selected)
	ok, failed := 0, 0
	var stopped error
	for i, d := range selected {
		var st *DeadLetterState
		if s, known := states[d.Sequence]; known {
			st = &s
		}
		var what string
		err := watch(ctx, *fs.timeout, fmt.Sprintf("dead letter %d of stream %s", d.Sequence, events.DeadLetterStream), func(ctx context.Context, _ func()) error {
			w, err := act(ctx, js, d, st)
			what = w
			return err
		})
		switch {
		case errors.Is(err, errSkip):
		case err != nil && (errors.Is(err, ErrNoAnswer) || ctx.Err() != nil):
			fmt.Fprintf(out, "%d (%s): %v (it may have been %s all the same: list the dead letters)\n", d.Sequence, d.Function, err, done)
			failed++
			stopped = err
			untried(out, selected[i+1:])
		case err != nil:
			fmt.Fprintf(out, "%d (%s): %v\n", d.Sequence, d.Function, err)
			failed++
		default:
			fmt.Fprintln(out, what)
			ok++
		}
		if stopped != nil {
			break
		}
	}
	for seq := range sel.want {
		fmt.Fprintf(out, "%d: no such dead letter\n", seq)
		failed++
	}
	fmt.Fprintf(out, "%d dead letters %s, %d failed\n", ok, done, failed)
	if stopped != nil {
		return fmt.Errorf("%s stopped after %d dead letters %s: %w", fs.Name(), ok, done, stopped)
	}
	if failed > 0 {
		return fmt.Errorf("%d dead letters could not be %s", failed, done)
	}
	return nil
}

// untried names the dead letters a command stopped before: they are as they were.
func untried(out io.Writer, rest []runner.DeadLetter) {
	if len(rest) == 0 {
		return
	}
	seqs := make([]string, len(rest))
	for i, d := range rest {
		seqs[i] = strconv.FormatUint(d.Sequence, 10)
	}
	fmt.Fprintf(out, "stopped: %d dead letters not tried, left as they were: --seq %s\n", len(rest), strings.Join(seqs, ","))
}
