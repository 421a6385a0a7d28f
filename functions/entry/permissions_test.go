package entry_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// The whole BackupBucket/BackupEntry path on a nats-server that requires TLS with client
// certificates and knows only housekeeper's identities, each with the permissions `housekeeper
// nats-auth` issues: setup, the bridge, the bucket, entry and purge functions each as itself,
// and the operator's replay, dead letters and resync through the CLI. Nothing the components
// do is refused: the server logs no permission violation.
func TestWholePipelineUnderNATSPermissions(t *testing.T) {
	p := pipeline.StartSecure(t, natsconn.FormConfig)
	f := startOn(t, p, false)
	ctx := context.Background()
	const name = "shoot--dev--secure--7c1d"
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--secure"}})
	e := newEntry(name, nil)
	f.create(e)
	f.waitState(&extensionsv1alpha1.BackupEntry{}, name, gardencorev1beta1.LastOperationStateSucceeded)
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "shoot--dev--secure", Name: entry.SecretName}, &corev1.Secret{}); err != nil {
		t.Fatalf("etcd-backup: %v", err)
	}
	f.upload(snapshots(name+"/", 20)...)

	operator := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append(p.NATSArgs(events.IdentityOperator), args...)
		if code := cli.Main(ctx, args, &out, &errOut); code != 0 {
			t.Fatalf("housekeeper %s: exit %d\n%s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}
	// Replay: the entry function gets its events again and changes nothing.
	before := f.entry(name).ResourceVersion
	if out := operator("replay", "--function", entry.Definition.Name, "--since", "1h"); !strings.Contains(out, "replay: re-drove") {
		t.Errorf("replay re-drove nothing: %s", out)
	}
	f.Drained(entry.Definition.Name)
	if after := f.entry(name).ResourceVersion; after != before {
		t.Errorf("replay changed the entry: resourceVersion %s → %s", before, after)
	}
	// Dead letters: the operator may re-drive; something the function cannot read becomes a
	// dead letter the operator lists and re-drives.
	if _, err := p.JS.PublishMsg(ctx, &nats.Msg{Subject: events.RedriveSubject(entry.Definition.Name), Data: []byte("not an event"), Header: nats.Header{"Nats-Msg-Id": []string{"garbage-1"}}}); err != nil {
		t.Fatalf("operator re-driving: %v", err)
	}
	f.Eventually(30*time.Second, "the garbage dead-lettered", func() (bool, string) {
		out := operator("deadletters", "list", "--function", entry.Definition.Name)
		return strings.Contains(out, "\n1 dead letters, 0 resolved\n"), out
	})
	if out := operator("deadletters", "retry", "--function", entry.Definition.Name, "--all"); !strings.Contains(out, "1 dead letters re-driven, 0 failed") {
		t.Errorf("deadletters retry: %s", out)
	}
	f.Drained(entry.Definition.Name)
	// Resync: the bridge answers and announces the entry again.
	out := operator("resync")
	if !strings.Contains(out, "resync: the bridge queued") {
		t.Errorf("resync: %s", out)
	}
	f.Eventually(30*time.Second, "the entry announced again after the resync", func() (bool, string) {
		stream, err := p.JS.Stream(ctx, events.RecordStream)
		if err != nil {
			return false, err.Error()
		}
		subject, _ := events.Subject(events.TypeEntrySynced, name)
		_, err = stream.GetLastMsgForSubject(ctx, subject)
		return err == nil, "resync printed " + out + ": " + fmtErr(err)
	})

	// Deletion: etcd-backup goes, the purge is scheduled and fires, exactly the prefix goes.
	f.delete(f.entry(name))
	f.waitGone(name)
	if left := f.list(name + "/"); len(left) != 0 {
		t.Errorf("%d blobs left under %s/", len(left), name)
	}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "shoot--dev--secure", Name: entry.SecretName}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("etcd-backup after the deletion: %v, want not found", err)
	}
	for _, fn := range all.NamesOf(all.Gardener) {
		f.Drained(fn)
	}
	if refused := p.RefusedByNATS(); refused != "" {
		t.Errorf("nats-server refused operations of housekeeper's own components:\n%s", refused)
	}
	// The log is where refusals show: a forged due purge from the operator is one.
	if err := p.NC.Publish("housekeeper.purge.due.forged", nil); err != nil {
		t.Fatal(err)
	}
	f.Eventually(10*time.Second, "the operator's forged due purge refused in the server's log", func() (bool, string) {
		refused := p.RefusedByNATS()
		return strings.Contains(refused, "housekeeper.purge.due.forged"), refused
	})
}

func fmtErr(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
