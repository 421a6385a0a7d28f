// Package config is how housekeeper's binaries take configuration: command-line flags, each
// of which can also be given as an environment variable (HOUSEKEEPER_<FLAG>, upper-cased, dashes
// as underscores), as Kubernetes manifests and compose files prefer.
package config

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// EnvPrefix starts the environment variable of every flag.
const EnvPrefix = "HOUSEKEEPER_"

// EnvName is the environment variable for flag name.
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Parse parses args into fs, then fills every flag not given on the command line from its
// environment variable, if set. Flags win over the environment.
func Parse(fs *flag.FlagSet, args []string) error {
	return parse(fs, args, os.LookupEnv)
}

func parse(fs *flag.FlagSet, args []string, lookup func(string) (string, bool)) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		if v, ok := lookup(EnvName(f.Name)); ok {
			if setErr := fs.Set(f.Name, v); setErr != nil {
				err = fmt.Errorf("environment %s=%q: %w", EnvName(f.Name), v, setErr)
			}
		}
	})
	return err
}

// List is a comma-separated flag value.
type List []string

func (l *List) String() string { return strings.Join(*l, ",") }

// Set replaces the list with the comma-separated values of s.
func (l *List) Set(s string) error {
	*l = nil
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}
