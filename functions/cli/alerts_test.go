package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	sigsyaml "sigs.k8s.io/yaml"
)

// alertCommands are the housekeeper commands the alerting rules' annotations name (each in
// backquotes), rendered as Prometheus renders them, with labels: the text an operator copies.
func alertCommands(t *testing.T, labels map[string]string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "infra", "chart", "files", "prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string
				Annotations map[string]string
			}
		}
	}
	if err := sigsyaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	var commands []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, text := range r.Annotations {
				// No image ships the nats CLI: a remedy names only what an operator has.
				if regexp.MustCompile("(^|[`(;] *)nats ").MatchString(text) {
					t.Errorf("%s: names the nats CLI, which no image ships: %s", r.Alert, text)
				}
				for _, m := range regexp.MustCompile("`(housekeeper [^`]*)`").FindAllStringSubmatch(text, -1) {
					// Prometheus's own prelude of every annotation template.
					tmpl, err := template.New(r.Alert).Parse(`{{$labels := .Labels}}{{$value := .Value}}` + m[1])
					if err != nil {
						t.Fatalf("%s: %v", r.Alert, err)
					}
					var b strings.Builder
					if err := tmpl.Execute(&b, map[string]any{"Labels": labels, "Value": 1.0}); err != nil {
						t.Fatalf("%s: %v", r.Alert, err)
					}
					commands = append(commands, b.String())
				}
			}
		}
	}
	if len(commands) == 0 {
		t.Fatal("the alerts name no housekeeper command")
	}
	return commands
}

// Every housekeeper command an alert suggests is one the CLI runs, exactly as written: none is
// refused as a usage error, and HousekeeperDeadLetters' list and retry do what it says — the
// list shows the function's dead letter, the retry re-drives it, and the function handles it.
func TestAlertsSuggestCommandsTheCLIRuns(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none")) // no cluster: the drill and the states fail, not hang
	commands := alertCommands(t, map[string]string{"function": "alpha", "entry": "shoot--dev--alpha", "kind": "BackupEntry",
		"drill": "daily", "stream": "HOUSEKEEPER"})
	var retry, list string
	for _, c := range commands {
		switch {
		case strings.HasPrefix(c, "housekeeper deadletters retry "):
			retry = c
		case strings.HasPrefix(c, "housekeeper deadletters list "):
			list = c
		}
	}
	if retry == "" || list == "" {
		t.Fatalf("HousekeeperDeadLetters names no deadletters list and retry: %q", commands)
	}

	f := newFixture(t)
	handled := make(chan string, 100)
	var failing sync.Map
	failing.Store("broken", true)
	f.runFunction("alpha", &failing, handled)
	f.publish("broken")
	deadline := time.Now().Add(10 * time.Second)
	var out string
	for !strings.Contains(out, "secret of broken") && time.Now().Before(deadline) {
		_, out, _ = f.cli(strings.Fields(list)[1:]...)
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(out, "secret of broken") {
		t.Fatalf("%s:\n%s", list, out)
	}
	for _, c := range commands {
		if c == retry || c == list {
			continue
		}
		if code, out, errOut := f.cli(strings.Fields(c)[1:]...); code == 2 || strings.Contains(errOut, "usage") {
			t.Errorf("%s: exit %d, refused as written:\n%s%s", c, code, out, errOut)
		}
	}
	failing.Delete("broken")
	if code, out, errOut := f.cli(strings.Fields(retry)[1:]...); code != 0 || !strings.Contains(out, "1 dead letters re-driven, 0 failed") {
		t.Fatalf("%s: exit %d, out %q, err %q", retry, code, out, errOut)
	}
	expect(t, handled, "alpha:broken")
	if !slices.ContainsFunc(commands, func(c string) bool { return strings.HasPrefix(c, "housekeeper resync") }) {
		t.Error("HousekeeperPurgeOverdue names no housekeeper resync")
	}
}
