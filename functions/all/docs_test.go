package all_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/all"
)

// The documents that describe the functions agree with the registry: wherever they count the
// functions, the count is the registry's, and each but the operator's topic pages names every
// function.
func TestDocsAgreeWithTheRegistry(t *testing.T) {
	numbers := map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}
	counted := regexp.MustCompile(`(?i)\b(one|two|three|four|five|six|seven|eight|nine|[0-9]+) (?:\*\*)?functions\b`)
	topics, err := filepath.Glob("../../infra/docs/*.md")
	if err != nil || len(topics) == 0 {
		t.Fatalf("infra/docs has no pages: %v", err)
	}
	for _, doc := range append([]string{"../../README.md", "../../infra/README.md", "../../events/README.md", "../README.md", "../../docker-compose.yaml"}, topics...) {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		for _, m := range counted.FindAllStringSubmatch(text, -1) {
			n, ok := numbers[strings.ToLower(m[1])]
			if !ok {
				continue // a figure, e.g. "2 functions" in a table of measurements
			}
			if n != len(all.Functions) {
				t.Errorf("%s says %q; the registry has %d functions (%s)", doc, m[0], len(all.Functions), strings.Join(all.Names(), ", "))
			}
		}
		if doc == "../../docker-compose.yaml" || strings.HasPrefix(doc, "../../infra/docs/") {
			continue
		}
		for _, name := range all.Names() {
			if !regexp.MustCompile(`\b` + name + `\b`).MatchString(text) {
				t.Errorf("%s never names the %s function", doc, name)
			}
		}
	}
}
