package stack

import (
	"fmt"
	"time"
)

// Poll calls cond every interval until it reports done, returns an error, or timeout passes.
// The time-out error names what was awaited and cond's last word (its last non-empty state).
// Every harness waits through it (testenv.Eventually fails a test with it).
func Poll(timeout, interval time.Duration, what string, cond func() (done bool, state string, err error)) error {
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		done, state, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if done {
			return nil
		}
		if state != "" {
			last = state
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
		}
		time.Sleep(interval)
	}
}
