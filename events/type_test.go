package events

import "testing"

// OperationOf reads back the operation every object type was built from, and the operation of
// the other groups' types; a type of another contract has none.
func TestOperationOf(t *testing.T) {
	for _, kind := range []Kind{KindBackupBucket, KindBackupEntry, KindEtcdBackupConfig, KindRestoreDrill, KindBackupCopyPolicy} {
		for _, op := range []Operation{OpCreated, OpUpdated, OpDeleting, OpDeleted, OpSynced} {
			typ, err := ObjectType(kind, op)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := OperationOf(typ); !ok || got != op {
				t.Errorf("OperationOf(%s) = %q, %v; want %q", typ, got, ok, op)
			}
		}
	}
	for typ, want := range map[string]Operation{TypePurgeDue: OpPurgeDue, TypeDrillDue: "due", TypePurgeVerified: OpPurgeVerified} {
		if got, ok := OperationOf(typ); !ok || got != want {
			t.Errorf("OperationOf(%s) = %q, %v; want %q", typ, got, ok, want)
		}
	}
	for _, typ := range []string{"", "dev.housekeeper.backupentry.created.v2", "io.gardener.backupentry.created.v1"} {
		if got, ok := OperationOf(typ); ok {
			t.Errorf("OperationOf(%q) = %q, want none", typ, got)
		}
	}
}
