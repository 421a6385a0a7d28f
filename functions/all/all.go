// Package all is the registry of housekeeper's functions: the binary, the forwarders, the NATS
// permissions, setup, make run and every harness iterate it. Adding a function is its package
// and one line here.
package all

import (
	"encoding/json"
	"slices"

	"github.com/housekeeper-dev/housekeeper/functions/bucket"
	"github.com/housekeeper-dev/housekeeper/functions/copy"
	"github.com/housekeeper-dev/housekeeper/functions/drill"
	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/etcdbackup"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// Functions are every function, in the order they are listed and started.
var Functions = []runner.Definition{
	bucket.Definition,
	entry.Definition,
	entry.PurgeDefinition,
	etcdbackup.ScheduleDefinition,
	etcdbackup.SnapshotDefinition,
	drill.Definition,
	copy.Definition,
}

// Lookup returns the function called name.
func Lookup(name string) (runner.Definition, bool) {
	i := slices.IndexFunc(Functions, func(d runner.Definition) bool { return d.Name == name })
	if i < 0 {
		return runner.Definition{}, false
	}
	return Functions[i], true
}

// Names are the functions' names, sorted.
func Names() []string {
	return slices.Sorted(slices.Values(NamesOf(Functions)))
}

// Gardener are the functions of Gardener's BackupBucket and BackupEntry extension contract.
var Gardener = []runner.Definition{bucket.Definition, entry.Definition, entry.PurgeDefinition}

// EtcdBackup are the functions of EtcdBackupConfig.
var EtcdBackup = []runner.Definition{etcdbackup.ScheduleDefinition, etcdbackup.SnapshotDefinition}

// Drill are the functions of RestoreDrill that run its drills. Its CRD comes with
// EtcdBackupConfig's, and the chart runs them with that feature.
var Drill = []runner.Definition{drill.Definition}

// Copy are the functions of BackupCopyPolicy that run its copies. Its CRD comes with
// EtcdBackupConfig's, and the chart runs them with that feature.
var Copy = []runner.Definition{copy.Definition}

// NamesOf are the names of defs, in their order.
func NamesOf(defs []runner.Definition) []string {
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	return names
}

// FactsFile is where the chart keeps Facts (its files/, byte-equal: infra's tests check).
const FactsFile = "infra/chart/files/functions.json"

// Facts is what every function needs where it is deployed (runner.Needs), by name, as the
// chart and docker compose read it from FactsFile.
func Facts() ([]byte, error) { return FactsOf(Functions) }

// FactsOf is Facts of the registry defs.
func FactsOf(defs []runner.Definition) ([]byte, error) {
	needs := make(map[string]runner.Needs, len(defs))
	for _, d := range defs {
		needs[d.Name] = d.Needs
	}
	data, err := json.MarshalIndent(needs, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
