// Package registry is what `make registry` writes into the chart from the registry beside
// files/functions.json (functions/all.Facts) and files/bridge.json (bridge.WatchedFile): the
// lists of values.schema.json that name the functions and the provider types. infra's tests keep the chart's copy
// byte-equal to it.
package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/natsconn"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/providers"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
)

// SchemaFile is the chart's values schema, under infra/chart.
const SchemaFile = "values.schema.json"

// ErrNoSuchValue means the schema has nothing at a path the registry writes.
var ErrNoSuchValue = errors.New("values.schema.json has no value at")

// Schema is schema (values.schema.json) with the lists the registry defs own written in, in
// the registry's order: the properties and required of functions (a function with
// OwnResources is a functionWithResources), and the names nats.identities may have (the CA
// and every workload's identity); and the types an installation may serve, every linked
// provider's, in order. The rest of the file is kept byte for byte.
func Schema(schema []byte, defs []runner.Definition) ([]byte, error) {
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	identities := append([]string{natsconn.GardenSecretCAKey}, cli.WorkloadIdentitiesOf(defs)...)
	var types []string
	for _, p := range providers.All {
		types = append(types, p.Type)
	}
	slices.Sort(types)
	writes := []struct {
		path  []string
		value func(indent string) string
	}{
		{[]string{"properties", "functions", "properties"}, func(indent string) string {
			lines := make([]string, len(defs))
			for i, d := range defs {
				ref := "function"
				if d.Needs.OwnResources {
					ref = "functionWithResources"
				}
				lines[i] = fmt.Sprintf(`%s  %s: {"$ref": "#/definitions/%s"}`, indent, strconv.Quote(d.Name), ref)
			}
			return "{\n" + strings.Join(lines, ",\n") + "\n" + indent + "}"
		}},
		{[]string{"properties", "functions", "required"}, func(string) string { return list(names) }},
		{[]string{"properties", "nats", "properties", "identities", "propertyNames", "enum"}, func(string) string { return list(identities) }},
		{[]string{"properties", "types", "items", "enum"}, func(string) string { return list(types) }},
	}
	for _, w := range writes {
		start, end, err := span(schema, w.path)
		if err != nil {
			return nil, err
		}
		prefix := schema[bytes.LastIndexByte(schema[:start], '\n')+1 : start]
		indent := prefix[:len(prefix)-len(bytes.TrimLeft(prefix, " "))]
		schema = append(append(append([]byte{}, schema[:start]...), w.value(string(indent))...), schema[end:]...)
	}
	if !json.Valid(schema) {
		return nil, errors.New("values.schema.json: not JSON once the registry's lists are written")
	}
	return schema, nil
}

// list is a JSON list of strings on one line, as the schema writes its enums.
func list(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// span is where the value at path (object keys from the top) starts and ends in data.
func span(data []byte, path []string) (start, end int, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	for depth, key := range path {
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return 0, 0, fmt.Errorf("%w %s: %s is no object", ErrNoSuchValue, strings.Join(path, "."), strings.Join(path[:depth], "."))
		}
		for {
			if !dec.More() {
				return 0, 0, fmt.Errorf("%w %s", ErrNoSuchValue, strings.Join(path, "."))
			}
			tok, err := dec.Token()
			if err != nil {
				return 0, 0, err
			}
			if tok == key {
				break
			}
			if err := skip(dec); err != nil {
				return 0, 0, err
			}
		}
	}
	// The value starts past the key's colon and the space around it.
	start = int(dec.InputOffset())
	start += len(data[start:]) - len(bytes.TrimLeft(data[start:], " \t\r\n:"))
	if err := skip(dec); err != nil {
		return 0, 0, err
	}
	return start, int(dec.InputOffset()), nil
}

// skip reads the next value of dec, whole.
func skip(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}
