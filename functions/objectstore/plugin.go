package objectstore

import "flag"

// Plugin is a provider linked into a binary. A binary links only the providers its main
// lists, so an image for one cloud carries no other cloud's SDK.
type Plugin struct {
	Type string
	// Bind registers the provider's flags on fs and returns what builds it once fs is parsed:
	// the provider, nil when the flags leave it unconfigured (the local provider without a
	// root), or an error naming the flag that is wrong.
	Bind func(fs *flag.FlagSet) func() (Provider, error)
}

// BindPlugins registers the flags of every plugin on fs and returns what builds the registry
// once fs is parsed. Every plugin's type is a key of the registry; an unconfigured one maps to
// nil, which Get refuses and [Registry.Links] accepts.
func BindPlugins(fs *flag.FlagSet, plugins ...Plugin) func() (Registry, error) {
	builds := make([]func() (Provider, error), len(plugins))
	for i, p := range plugins {
		builds[i] = p.Bind(fs)
	}
	return func() (Registry, error) {
		r := make(Registry, len(plugins))
		for i, p := range plugins {
			provider, err := builds[i]()
			if err != nil {
				return nil, err
			}
			r[p.Type] = provider
		}
		return r, nil
	}
}

// NoFlags is Bind for a provider without flags of its own.
func NoFlags(newProvider func() Provider) func(*flag.FlagSet) func() (Provider, error) {
	return func(*flag.FlagSet) func() (Provider, error) {
		return func() (Provider, error) { return newProvider(), nil }
	}
}
