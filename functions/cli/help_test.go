package cli

import (
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/providers"

	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/all"
)

// unreachable is a NATS URL nothing listens on: a command that ran would fail to connect.
const unreachable = "nats://127.0.0.1:1"

// Every command answers --help and -h with its usage line and its own flags on stdout, exits 0
// and runs nothing (a command that ran would fail against an unreachable NATS); the binary's
// own --help lists the commands.
func TestEveryCommandHasHelp(t *testing.T) {
	commands := map[string][]string{ // command → flags its help must show
		"nats-auth":           {"-out", "-form", "-account-seed"},
		"setup":               {"-functions", "-stream-replicas", "-max-deliver", "-ack-wait"},
		"version":             nil,
		"copy-binary":         {"-from", "-to"},
		"forward":             {"-function", "-url", "-addr"},
		"replay":              {"-function", "-since", "-from-seq", "-until", "-timeout"},
		"resync":              nil,
		"deadletters":         nil,
		"deadletters list":    {"-function", "-timeout"},
		"deadletters retry":   {"-function", "-seq", "-all", "-timeout"},
		"deadletters discard": {"-function", "-seq", "-resolved", "-timeout"},
	}
	for _, name := range all.Names() {
		flags := []string{"-mode", "-kubeconfig", "-concurrency", "-addr", "-log-level"}
		switch name {
		case "bucket", "purge":
			flags = append(flags, "-types", "-extension-classes", "-local-root", "-local-host-path")
		case "entry":
			flags = append(flags, "-types", "-retention", "-retention-by-purpose", "-local-host-path")
		}
		commands["function "+name] = flags
	}
	for command, flags := range commands {
		for _, help := range []string{"--help", "-h"} {
			args := append(append([]string{"--nats-url", unreachable}, strings.Fields(command)...), help)
			var out, errOut bytes.Buffer
			code := Main(context.Background(), args, &out, &errOut, providers.All...)
			if code != 0 || errOut.Len() > 0 {
				t.Errorf("housekeeper %s %s: exit %d, stderr %q", command, help, code, errOut.String())
				continue
			}
			if !strings.Contains(out.String(), "usage: housekeeper [--nats-url URL ...] "+command) {
				t.Errorf("housekeeper %s %s: no usage line:\n%s", command, help, out.String())
			}
			for _, f := range flags {
				if !strings.Contains(out.String(), "  "+f+" ") && !strings.Contains(out.String(), "  "+f+"\n") {
					t.Errorf("housekeeper %s %s does not show %s:\n%s", command, help, f, out.String())
				}
			}
		}
	}
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "deadletters retry") ||
		!strings.Contains(out.String(), "-nats-url") {
		t.Errorf("housekeeper --help: exit %d, out %q, err %q", code, out.String(), errOut.String())
	}
}

// A command that takes no arguments refuses them rather than ignoring them: `resync now` does
// not resync.
func TestCommandsRefuseStrayArguments(t *testing.T) {
	for _, args := range [][]string{{"resync", "now"}, {"deadletters", "list", "entry"}, {"setup", "again"}} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), append([]string{"--nats-url", unreachable}, args...), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), "takes no arguments") {
			t.Errorf("housekeeper %v: exit %d, stderr %q", args, code, errOut.String())
		}
	}
}
