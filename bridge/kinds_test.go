package bridge

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/housekeeper-dev/housekeeper/events"
)

// Every row of kinds has its events in the contract, on its subject, and snapshots its own
// objects with its own apiVersion and kind.
func TestKindsAgreeWithTheContract(t *testing.T) {
	seen := map[events.Kind]bool{}
	for _, k := range kinds {
		if seen[k.kind] {
			t.Errorf("%s: two rows", k.kind)
		}
		seen[k.kind] = true
		if kindOf(k.kind) != k {
			t.Errorf("%s: kindOf finds another row", k.kind)
		}
		for _, op := range []events.Operation{events.OpCreated, events.OpUpdated, events.OpDeleting, events.OpDeleted, events.OpSynced} {
			typ, err := events.ObjectType(k.kind, op)
			if err != nil {
				t.Errorf("%s: %v", k.kind, err)
				continue
			}
			if filter, err := events.SubjectFilter(typ); err != nil || !strings.HasPrefix(filter, strings.TrimSuffix(k.subject, ">")) {
				t.Errorf("%s: %s events go to %s (%v), outside its subject %s", k.kind, op, filter, err, k.subject)
			}
		}
		obj, ok := k.newObject().(client.Object)
		if !ok {
			t.Fatalf("%s: newObject is no client.Object", k.kind)
		}
		obj.SetName("x")
		data, err := Snapshot(k.kind, obj)
		if err != nil {
			t.Fatalf("%s: %v", k.kind, err)
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(data, &tm); err != nil || tm.Kind != string(k.kind) || tm.APIVersion != k.gv.String() {
			t.Errorf("%s: snapshot is of %s %s (%v)", k.kind, tm.APIVersion, tm.Kind, err)
		}
	}
}
