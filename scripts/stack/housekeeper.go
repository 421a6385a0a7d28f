package stack

import (
	"context"
	"fmt"
	"os/exec"
)

// BuildHousekeeper builds housekeeper's binaries — housekeeper and housekeeper-bridge — from
// the checkout at source ("": this repository) into dir. race builds them with -race, as tests
// are built, so the build reuses their compiled packages and a race shows in a process's log.
func BuildHousekeeper(ctx context.Context, source, dir string, race bool) error {
	if source == "" {
		root, err := RepoRoot()
		if err != nil {
			return err
		}
		source = root
	}
	args := []string{"build"}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "-o", dir+"/", "./functions/cmd/housekeeper", "./bridge/cmd/housekeeper-bridge")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = source
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in %s: %v\n%s", source, err, out)
	}
	return nil
}
