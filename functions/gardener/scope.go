package gardener

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/housekeeper-dev/housekeeper/functions/config"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// ImplementedTypes are the spec.types housekeeper has an object store for. An installation
// serves those of them it is told to (Scope.Types).
var ImplementedTypes = []string{"aws", "azure", "gcp", "local", "openstack"}

// ErrNoTypes means an installation was told no types: it would serve nothing, and an empty
// list must never mean every type, or housekeeper would take other providers' objects.
var ErrNoTypes = errors.New("no types to serve")

// Scope is which BackupBuckets and BackupEntries an installation serves: those whose
// spec.type is one of Types and whose class is one of Classes (an unset class is shoot, as
// Gardener has it). The bridge announces only those, and the functions touch only those, on the
// live object: an event about another object changes nothing.
type Scope struct {
	Types, Classes config.List
}

// BindFlags registers --types and --extension-classes (upstream's flag) on fs, classes defaulting to shoot.
func (s *Scope) BindFlags(fs *flag.FlagSet) {
	s.Classes = config.List{string(extensionsv1alpha1.ExtensionClassShoot)}
	fs.Var(&s.Types, "types", "spec.types to serve, comma-separated (required; of "+strings.Join(ImplementedTypes, ", ")+")")
	fs.Var(&s.Classes, "extension-classes", "extension classes to serve, comma-separated: shoot, garden (gardener-operator's garden--<uid> entries), seed (an unset class is shoot)")
}

// Validate says what is wrong with s: no types, a type housekeeper does not implement, no
// classes or an unknown class.
func (s Scope) Validate() error {
	if len(s.Types) == 0 {
		return fmt.Errorf("%w: set --types (%s) to the spec.types this installation owns, of %s",
			ErrNoTypes, config.EnvName("types"), strings.Join(ImplementedTypes, ", "))
	}
	for _, t := range s.Types {
		if !slices.Contains(ImplementedTypes, t) {
			return fmt.Errorf("--types: housekeeper does not implement type %q (it implements %s)", t, strings.Join(ImplementedTypes, ", "))
		}
	}
	if len(s.Classes) == 0 {
		return errors.New("--extension-classes: no extension class to serve")
	}
	for _, c := range s.Classes {
		switch extensionsv1alpha1.ExtensionClass(c) {
		case extensionsv1alpha1.ExtensionClassShoot, extensionsv1alpha1.ExtensionClassSeed, extensionsv1alpha1.ExtensionClassGarden:
		default:
			return fmt.Errorf("--extension-classes: unknown extension class %q (shoot, seed or garden)", c)
		}
	}
	return nil
}

// Serves says whether obj is in the scope.
func (s Scope) Serves(obj extensionsv1alpha1.Object) bool {
	spec := obj.GetExtensionSpec()
	class := string(extensionsv1alpha1.ExtensionClassShoot)
	if c := spec.GetExtensionClass(); c != nil && *c != "" {
		class = string(*c)
	}
	return slices.Contains(s.Types, spec.GetExtensionType()) && slices.Contains(s.Classes, class)
}

// BindScope registers the scope's flags on fs, for a function's Definition.Bind; the returned
// func gives the scope once fs is parsed, or what is wrong with it. stores is the registry the
// function opens buckets with, which must open every type of the scope; nil for a function
// that opens none.
func BindScope(fs *flag.FlagSet) func(stores objectstore.Registry) (Scope, error) {
	s := &Scope{}
	s.BindFlags(fs)
	return func(stores objectstore.Registry) (Scope, error) {
		if err := s.Validate(); err != nil {
			return *s, err
		}
		if stores != nil {
			return *s, s.opens(stores)
		}
		return *s, nil
	}
}

// ScopeArgs are the arguments that give def the scope of types, or none when def does not serve
// Gardener objects: for whoever builds functions in-process from their definitions.
func ScopeArgs(def runner.Definition, types ...string) []string {
	fs := flag.NewFlagSet(def.Name, flag.ContinueOnError)
	def.Bind(fs)
	if fs.Lookup("types") == nil {
		return nil
	}
	return []string{"--types=" + strings.Join(types, ",")}
}

// Links checks that the binary links the provider of every type of the scope, configured or
// not (a function that writes secrets for a type without opening its buckets).
func (s Scope) Links(stores objectstore.Registry) error {
	for _, t := range s.Types {
		if !stores.Links(t) {
			return fmt.Errorf("--types names %q, whose provider this binary does not link: run the image that has it (housekeeper, or housekeeper-%s)", t, t)
		}
	}
	return nil
}

// opens checks that stores opens every type of the scope: a function that opens buckets
// cannot serve a type it has no store for (the local provider needs --local-root).
func (s Scope) opens(stores objectstore.Registry) error {
	for _, t := range s.Types {
		if _, err := stores.Get(t); err != nil {
			return fmt.Errorf("--types names %q, which this process cannot open: %w", t, err)
		}
	}
	return nil
}
