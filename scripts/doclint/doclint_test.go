package doclint

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The repository's documents name only what exists.
func TestRepositoryDocs(t *testing.T) {
	findings, err := Check(context.Background(), filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		t.Error(f)
	}
}

// Each rule finds what it is for, and passes what exists.
func TestFindsWhatDoesNotExist(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Makefile", "run: tools ## run\ntest: ## test\n")
	write("infra/chart/values.schema.json", `{"properties": {"image": {"properties": {"tag": {}}}, "cluster": {},
		"functions": {"type": "object", "properties": {"drill": {"$ref": "#/definitions/fn"}}}},
		"definitions": {"fn": {"type": "object", "properties": {"resources": {}}}}}`)
	write("infra/docs/there.md", "# there\n")
	write("infra/docs/operating.md", strings.Join([]string{
		"See [there](there.md) and [gone](gone.md#x), [web](https://example.com).",                                                  // 1: gone.md
		"Run `make run`, then `make deploy`.",                                                                                       // 2: deploy
		"Set `image.tag`, not `image.label`; `spec.type` is Gardener's; `functions.drill.resources`, not `functions.drill.limits`.", // 3: image.label, functions.drill.limits
		"`housekeeper deadletters retry --function F --all`",                                                                        // 4: fine
		"`housekeeper deadletters retry --fn F`",                                                                                    // 5: --fn
		"`housekeeper rescue --all`",                                                                                                // 6: rescue
		"```sh",
		"housekeeper --nats-url nats://x:4222 replay --function entry \\", // 8: fine
		"  --since 2h --nats-creds f.creds   # a comment --nope",
		"housekeeper function NAME --mode http --etcdbrctl /bin/e", // 10: fine, drill's flag
		"housekeeper function bucket --etcdbrctl /bin/e",           // 11: bucket has none
		"make lint && make bench",                                  // 12: both missing
		"helm install housekeeper infra/chart",
		"```",
		"This stop measured it; see issue 52.", // 15: two phrases, one finding per line
	}, "\n"))
	write("CHANGELOG.md", "Fixed in this session.\n")
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}} {
		if out, err := exec.Command("git", append([]string{"-C", root}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	findings, err := Check(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range findings {
		got = append(got, f.String())
	}
	want := []string{
		"infra/docs/operating.md:1: links to gone.md, which does not exist",
		"infra/docs/operating.md:2: names make deploy; the Makefile has no target deploy",
		"infra/docs/operating.md:3: names the chart value image.label, which values.schema.json does not have",
		"infra/docs/operating.md:3: names the chart value functions.drill.limits, which values.schema.json does not have",
		"infra/docs/operating.md:5: names --fn of housekeeper deadletters retry, which does not parse it",
		"infra/docs/operating.md:6: names housekeeper rescue, which the CLI does not have",
		"infra/docs/operating.md:11: names --etcdbrctl of housekeeper function bucket, which does not parse it",
		"infra/docs/operating.md:12: names make lint; the Makefile has no target lint",
		"infra/docs/operating.md:12: names make bench; the Makefile has no target bench",
		`infra/docs/operating.md:15: "This stop" is about how the project was made, not about the product (history belongs in CHANGELOG.md)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
