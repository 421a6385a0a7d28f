package seed

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// deadLetterRunbook follows infra/docs/operating.md's runbook "A dead letter" in the seed with
// the document's `hk`: a local BackupBucket whose providerConfig asks for immutability, which a
// directory cannot give, is dead-lettered by the bucket function; `hk deadletters list` shows
// it, permanent, saying why; the providerConfig removed, the bucket is Succeeded, the list says
// RESOLVED, and `hk deadletters discard --resolved` removes it.
func (s *seed) deadLetterRunbook(ctx context.Context) {
	t := s.t
	const name, why = "seed-deadletter", "local buckets cannot be immutable"
	s.create(ctx, &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: extensionsv1alpha1.BackupBucketSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local",
			ProviderConfig: &runtime.RawExtension{Raw: []byte(`{"immutability": {"retentionType": "bucket", "retentionPeriod": "24h"}}`)}},
			Region: "local", SecretRef: corev1.SecretReference{Name: "local-credentials", Namespace: "garden"}},
	})
	s.eventually(3*time.Minute, "the bucket "+name+" failing", func() (bool, string) {
		bb := &extensionsv1alpha1.BackupBucket{}
		if err := s.c.Get(ctx, client.ObjectKey{Name: name}, bb); err != nil {
			return false, err.Error()
		}
		return bb.Status.LastError != nil, fmt.Sprintf("lastOperation %+v", bb.Status.LastOperation)
	})

	cli := s.cliBlock()
	setUp, _, ok := strings.Cut(cli, "hk deadletters list")
	takeBack := regexp.MustCompile(`(?m)^kubectl .*delete secret/housekeeper-operator$`).FindString(cli)
	runbook := s.operatingBlock("hk deadletters discard --resolved")
	line := func(re string) string { return regexp.MustCompile(`(?m)^` + re + `.*$`).FindString(runbook) }
	list, retry, discard, replay := line(`hk deadletters list\b`), line(`hk deadletters retry --seq 17\b`),
		line(`hk deadletters discard --resolved\b`), line(`hk replay --function bucket\b`)
	if !ok || takeBack == "" || list == "" || retry == "" || discard == "" || replay == "" {
		t.Fatalf("infra/docs/operating.md: want the CLI block to define hk before `hk deadletters list` and take the identity back, "+
			"and the runbook to list, retry --seq 17, discard --resolved and replay --function bucket:\n%s\n%s", cli, runbook)
	}
	script := func(lines ...string) string { return setUp + strings.Join(lines, "\n") + "\n" + takeBack + "\n" }
	deadLetter := regexp.MustCompile(`(?m)^(\d+)\s+bucket\s.*\bpermanent\b.*` + regexp.QuoteMeta(name) + `.*$`)

	// Listed: permanent, why, its object not converged.
	out := s.runCLI(ctx, script(list))
	found := deadLetter.FindSubmatch(out)
	if found == nil || !strings.Contains(string(found[0]), why) || strings.Contains(string(found[0]), "RESOLVED") {
		t.Fatalf("`hk deadletters list` shows no unresolved permanent dead letter of the bucket function for %s saying %q:\n%s", name, why, out)
	}
	first := string(found[1])

	// Retried before the fix: re-driven and removed; the function fails again for good, and the
	// list holds a new dead letter of the bucket instead.
	out = s.runCLI(ctx, script(strings.Replace(retry, "--seq 17", "--seq "+first, 1)))
	if !regexp.MustCompile(`(?m)^retried ` + first + `: `).Match(out) {
		t.Fatalf("`hk deadletters retry --seq %s` did not re-drive it:\n%s", first, out)
	}
	var seq string
	s.eventually(3*time.Minute, "the retried event dead-lettered anew", func() (bool, string) {
		out = s.runCLI(ctx, script(list))
		found := deadLetter.FindSubmatch(out)
		if found == nil || string(found[1]) == first {
			return false, string(out)
		}
		seq = string(found[1])
		return true, ""
	})

	// The fix is to the object: its own event has the function converge it.
	patch(ctx, s, &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: name}}, func(bb *extensionsv1alpha1.BackupBucket) { bb.Spec.ProviderConfig = nil })
	s.awaitSucceeded(ctx, &extensionsv1alpha1.BackupBucket{}, name, 2*time.Minute)

	out = s.runCLI(ctx, script(list, discard, list))
	if !regexp.MustCompile(`(?m)^` + seq + `\s.*RESOLVED`).Match(out) {
		t.Fatalf("`hk deadletters list` does not say dead letter %s is RESOLVED once %s converged:\n%s", seq, name, out)
	}
	if !regexp.MustCompile(`(?m)^discarded ` + seq + `: `).Match(out) {
		t.Fatalf("`hk deadletters discard --resolved` did not discard dead letter %s:\n%s", seq, out)
	}
	// Listed before the discard, not after.
	if n := len(regexp.MustCompile(`(?m)^`+seq+`\s+bucket\s`).FindAllIndex(out, -1)); n != 1 {
		t.Fatalf("dead letter %s is still listed after its discard:\n%s", seq, out)
	}
	discarded := out

	// A window of the bucket function's events re-delivered: the buckets' events, handled again.
	out = s.runCLI(ctx, script(replay))
	if !regexp.MustCompile(`(?m)^replay: re-drove [1-9]\d* events `).Match(out) {
		t.Fatalf("`%s` re-drove nothing:\n%s", replay, out)
	}
	t.Logf("infra/docs/operating.md's runbook \"A dead letter\": %s listed, retried, dead-lettered anew as %s, fixed, resolved and discarded, the window replayed:\n%s%s",
		first, seq, discarded, out)
}
