package release

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The README's compatibility table states the versions the tests run, each read here from
// where the install scripts and the modules pin it: a row that disagrees with its pin, a pin
// without a row, or a row without a pin fails.
func TestCompatibilityTable(t *testing.T) {
	root := filepath.Join("..", "..")
	env := versionsEnv(t, filepath.Join(root, "scripts", "versions.env"))
	gomod := func(file, module string) string {
		t.Helper()
		data := string(mustRead(t, filepath.Join(root, file)))
		for _, line := range strings.Split(data, "\n") {
			fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
			if len(fields) >= 2 && fields[0] == module {
				return fields[1]
			}
		}
		t.Fatalf("%s requires no %s", file, module)
		return ""
	}
	// Each row's component, and the versions its cell must state, in order.
	pins := map[string][]string{
		"Gardener":            {env["GARDENER_VERSION"]},
		"Kubernetes":          {env["KUBERNETES_VERSION"]},
		"NATS server":         {gomod("go.mod", "github.com/nats-io/nats-server/v2")},
		"KEDA":                {gomod("test/keda/go.mod", "github.com/kedacore/keda/v2")},
		"etcd-backup-restore": {env["ETCDBR_VERSION"], env["ETCDBR_ETCD_VERSION"]},
		"Knative Serving API": {gomod("test/knative/go.mod", "knative.dev/serving")},
	}
	if gardener := gomod("go.mod", "github.com/gardener/gardener"); gardener != env["GARDENER_VERSION"] {
		t.Errorf("go.mod requires gardener %s, scripts/versions.env pins %s", gardener, env["GARDENER_VERSION"])
	}
	for c, vs := range pins {
		for _, v := range vs {
			if v == "" {
				t.Fatalf("%s: a pin is missing (scripts/versions.env: %v)", c, env)
			}
		}
	}

	rows := compatibilityTable(t, filepath.Join(root, "README.md"))
	for component, tested := range rows {
		want, ok := pins[component]
		if !ok {
			t.Errorf("README's compatibility table: the row %q has no pin this test knows", component)
			continue
		}
		if got := versionsIn(tested); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("README's compatibility table: %s is tested with %q (versions %v), the pins say %v", component, tested, got, want)
		}
	}
	for component := range pins {
		if _, ok := rows[component]; !ok {
			t.Errorf("README's compatibility table has no row %q", component)
		}
	}
}

// compatibilityTable is the README's table under "### Compatibility": component (the first
// cell, without markup) → the second cell, the versions tested.
func compatibilityTable(t *testing.T, readme string) map[string]string {
	t.Helper()
	rows := map[string]string{}
	in, header := false, true
	for _, line := range strings.Split(string(mustRead(t, readme)), "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
			in = strings.TrimSpace(line) == "### Compatibility"
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "| "), "|")
			if header || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
				header = false
				continue
			}
			if len(cells) < 2 {
				t.Fatalf("README's compatibility table: row %q has fewer than two cells", line)
			}
			rows[strings.Trim(strings.TrimSpace(cells[0]), "*")] = strings.TrimSpace(cells[1])
		}
	}
	if len(rows) == 0 {
		t.Fatal("README.md has no table under ### Compatibility")
	}
	return rows
}

// versionsIn are the words of cell that are versions (v1.2.3), in order.
func versionsIn(cell string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(cell, func(r rune) bool { return strings.ContainsRune(" ,;()`*", r) }) {
		if len(w) > 1 && w[0] == 'v' && w[1] >= '0' && w[1] <= '9' && strings.Count(w, ".") == 2 {
			out = append(out, w)
		}
	}
	return out
}

func versionsEnv(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
