package contract

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/housekeeper-dev/housekeeper"

// goList runs `go list` with args and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Fields(string(out))
}

// The contract is at the bottom: it imports the CloudEvents SDK, nats.go and the standard
// library, nothing of ours and nothing of Kubernetes, and stays light enough that every change
// to it recompiles little and its fuzz build stays in make test.
func TestContractIsAtTheBottom(t *testing.T) {
	const maxDeps = 250
	deps := goList(t, "-deps", module+"/events")
	if len(deps) > maxDeps {
		t.Errorf("events has %d dependencies, at most %d", len(deps), maxDeps)
	}
	for _, d := range deps {
		if d != module+"/events" && strings.HasPrefix(d, module+"/") || strings.HasPrefix(d, "k8s.io/") ||
			strings.HasPrefix(d, "sigs.k8s.io/") || strings.HasPrefix(d, "github.com/gardener/") {
			t.Errorf("events depends on %s", d)
		}
	}
	if len(deps) < 20 {
		t.Fatalf("go list found %d dependencies of events: %v", len(deps), deps)
	}
}

// Arrows point one way: functions never import the bridge (both import the contract).
func TestFunctionsDoNotImportTheBridge(t *testing.T) {
	pkgs := goList(t, "-f", `{{.ImportPath}}:{{join .Imports ","}}`, module+"/functions/...")
	if len(pkgs) < 5 {
		t.Fatalf("go list found %d packages under functions/", len(pkgs))
	}
	for _, p := range pkgs {
		name, imports, _ := strings.Cut(p, ":")
		for _, imp := range strings.Split(imports, ",") {
			if imp == module+"/bridge" || strings.HasPrefix(imp, module+"/bridge/") {
				t.Errorf("%s imports %s", name, imp)
			}
		}
	}
}

// The functions stand on one floor: none imports another (what two of them share lives below
// them: destination, gardener, etcdconn, objectstore, runner), so each builds, changes and is
// reasoned about alone. The functions are the packages functions/all registers.
func TestFunctionsAreOnOneFloor(t *testing.T) {
	var functions []string
	for _, imp := range goList(t, "-f", `{{join .Imports " "}}`, module+"/functions/all") {
		if strings.HasPrefix(imp, module+"/functions/") && imp != module+"/functions/runner" {
			functions = append(functions, imp)
		}
	}
	if len(functions) < 5 {
		t.Fatalf("functions/all registers %d function packages: %v", len(functions), functions)
	}
	isFunction := map[string]bool{}
	for _, f := range functions {
		isFunction[f] = true
	}
	for _, p := range goList(t, append([]string{"-f", `{{.ImportPath}}:{{join .Imports ","}}`}, functions...)...) {
		name, imports, _ := strings.Cut(p, ":")
		for _, imp := range strings.Split(imports, ",") {
			if isFunction[imp] {
				t.Errorf("the function %s imports the function %s", name, imp)
			}
		}
	}
}
