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

// ValidateCluster checks the cluster name, the source of every event housekeeper publishes and
// part of every event id: required, and a DNS subdomain as a Gardener seed's name is (lower-case
// letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253).
func ValidateCluster(name string) error {
	flag := "--cluster (" + EnvName("cluster") + ")"
	if name == "" {
		return fmt.Errorf("%s is required: it names this cluster (the seed) in every event", flag)
	}
	if len(name) > 253 {
		return fmt.Errorf("%s: %d characters, at most 253", flag, len(name))
	}
	for i, c := range name {
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' && c != '.' || i == 0 || i == len(name)-1) {
			return fmt.Errorf("%s %q: not a DNS subdomain like a seed's name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit)", flag, name)
		}
	}
	return nil
}
