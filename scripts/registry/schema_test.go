package registry_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/housekeeper-dev/housekeeper/functions/all"
	"github.com/housekeeper-dev/housekeeper/functions/drill"
	"github.com/housekeeper-dev/housekeeper/infra/chart"
	"github.com/housekeeper-dev/housekeeper/scripts/registry"
)

// A function more in the registry is a value more, required, and an identity more; the rest
// of the schema is kept byte for byte (writing the registry without it gives the file back).
func TestSchemaListsTheRegistrysFunctions(t *testing.T) {
	current, err := chart.FS.ReadFile(registry.SchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	extra := drill.Definition
	extra.Name = "extra"
	defs := append(slices.Clone(all.Functions), extra)
	written, err := registry.Schema(current, defs)
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Functions struct {
				Properties map[string]struct {
					Ref string `json:"$ref"`
				}
				Required []string
			}
			NATS struct {
				Properties struct {
					Identities struct {
						PropertyNames struct{ Enum []string }
					}
				}
			} `json:"nats"`
		}
	}
	if err := json.Unmarshal(written, &schema); err != nil {
		t.Fatal(err)
	}
	fns := schema.Properties.Functions
	if got := fns.Properties["extra"].Ref; got != "#/definitions/functionWithResources" {
		t.Errorf("functions.extra, a function with OwnResources, is %q, want functionWithResources", got)
	}
	if got := fns.Properties["purge"].Ref; got != "#/definitions/function" {
		t.Errorf("functions.purge is %q, want function", got)
	}
	if want := all.NamesOf(defs); !slices.Equal(fns.Required, want) {
		t.Errorf("functions required %v, want %v", fns.Required, want)
	}
	if ids := schema.Properties.NATS.Properties.Identities.PropertyNames.Enum; !slices.Contains(ids, "extra") || !slices.Contains(ids, "ca") {
		t.Errorf("nats.identities may name %v, want the CA and extra among them", ids)
	}

	back, err := registry.Schema(written, all.Functions)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, current) {
		t.Errorf("the schema written without extra is not the chart's:\n%s", back)
	}
}

func TestSchemaWithoutAListIsRefused(t *testing.T) {
	_, err := registry.Schema([]byte(`{"properties": {"functions": {"type": "object"}}}`), all.Functions)
	if !errors.Is(err, registry.ErrNoSuchValue) {
		t.Fatalf("err = %v, want ErrNoSuchValue", err)
	}
}
