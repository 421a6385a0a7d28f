package bridge

import (
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/gardener"
)

// A bridge told no types serves none and does not start: an empty list never means every type,
// which would take other providers' objects. Types it does not implement and malformed cluster
// names are refused at start-up, naming the problem.
func TestParseCommandRefusesAnUnsafeScope(t *testing.T) {
	t.Setenv("HOUSEKEEPER_TYPES", "")
	t.Setenv("HOUSEKEEPER_CLUSTER", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster=seed-1"}, "no types to serve"},
		{[]string{"--cluster=seed-1", "--types=azrue"}, `does not implement type "azrue"`},
		{[]string{"--cluster=seed-1", "--types=azure", "--extension-classes=shot"}, `unknown extension class "shot"`},
		{[]string{"--types=azure"}, "--cluster (HOUSEKEEPER_CLUSTER) is required"},
		{[]string{"--cluster=Change Me", "--types=azure"}, "not a DNS subdomain"},
	} {
		_, err := ParseCommand(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseCommand(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	_, err := ParseCommand([]string{"--cluster=seed-1"})
	if !errors.Is(err, gardener.ErrNoTypes) {
		t.Errorf("no types: %v, want ErrNoTypes", err)
	}
	c, err := ParseCommand([]string{"--cluster=aws-eu1.seeds", "--types=azure,local"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Bridge.Scope; strings.Join(got.Types, ",") != "azure,local" || strings.Join(got.Classes, ",") != "shoot" {
		t.Errorf("scope = %+v, want types azure,local and class shoot", got)
	}
}

// --help is not an error: ParseCommand says so with flag.ErrHelp, and Usage lists every flag.
func TestHelp(t *testing.T) {
	if _, err := ParseCommand([]string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v, want flag.ErrHelp", err)
	}
	for _, f := range []string{"-types", "-extension-classes", "-cluster", "-nats-url", "-kubeconfig", "-leader-elect", "-addr"} {
		if !strings.Contains(Usage(), "  "+f+" ") && !strings.Contains(Usage(), "  "+f+"\n") {
			t.Errorf("Usage lacks %s:\n%s", f, Usage())
		}
	}
}
