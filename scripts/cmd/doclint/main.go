// Command doclint is `make lint`'s check of the Markdown documents: every link, make target,
// housekeeper command and flag, and chart value they name exists, and none speaks of how the
// project was made.
//
//	go run ./scripts/cmd/doclint
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/housekeeper-dev/housekeeper/scripts/doclint"
)

func main() {
	findings, err := doclint.Check(context.Background(), ".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "doclint:", err)
		os.Exit(1)
	}
	for _, f := range findings {
		fmt.Println(f)
	}
	if len(findings) > 0 {
		fmt.Fprintf(os.Stderr, "doclint: %d problems in the documents\n", len(findings))
		os.Exit(1)
	}
}
