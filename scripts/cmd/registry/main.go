// Command registry is `make registry`: it writes what every function of the registry needs
// where it is deployed (functions/all.Facts) and what the bridge lists and watches
// (bridge.Watched) into the chart's files, which the chart's templates and docker compose's
// check read, and the functions and their NATS identities into the lists of the chart's
// values.schema.json (scripts/registry.Schema).
//
//	go run ./scripts/cmd/registry
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/housekeeper-dev/housekeeper/bridge"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/scripts/registry"
	"github.com/housekeeper-dev/housekeeper/scripts/stack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := stack.RepoRoot()
	if err != nil {
		return err
	}
	facts, err := all.Facts()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, all.FactsFile), facts, 0o644); err != nil {
		return err
	}
	watched, err := bridge.WatchedFile()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, bridge.WatchedFileName), watched, 0o644); err != nil {
		return err
	}
	file := filepath.Join(root, "infra/chart", registry.SchemaFile)
	current, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	schema, err := registry.Schema(current, all.Functions)
	if err != nil {
		return err
	}
	return os.WriteFile(file, schema, 0o644)
}
