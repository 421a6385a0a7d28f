package events

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
)

// Wire format: CloudEvents binary content mode over NATS, attributes in lower-case ce-*
// headers, data as the message body.
const (
	headerPrefix      = "ce-"
	headerContentType = "content-type"
	// HeaderMsgID is JetStream's de-duplication header; it carries the event id.
	HeaderMsgID = nats.MsgIdHdr

	contentTypeStructured = "application/cloudevents+json"
)

// extensionHeaders are the headers of the extensions every event has, built once.
var extensionHeaders = map[string]string{
	ExtKind: headerPrefix + ExtKind, ExtName: headerPrefix + ExtName, ExtUID: headerPrefix + ExtUID,
	ExtResourceVersion: headerPrefix + ExtResourceVersion, ExtGeneration: headerPrefix + ExtGeneration,
}

// extensions returns e's extensions for reading: the map itself where the SDK would copy it.
func extensions(e cloudevents.Event) map[string]any {
	if ec, ok := e.Context.(*cloudevents.EventContextV1); ok {
		return ec.Extensions
	}
	return e.Extensions()
}

// Encode turns e into a NATS message in binary mode on its subject, with Nats-Msg-Id = id.
func Encode(e cloudevents.Event) (*nats.Msg, error) {
	if len(e.Data()) > MaxDataSize {
		return nil, fmt.Errorf("%w: data is %d bytes, limit %d", ErrDataTooLarge, len(e.Data()), MaxDataSize)
	}
	// What consumers would reject is never published.
	if err := Validate(e); err != nil {
		return nil, err
	}
	subject, err := Subject(e.Type(), e.Subject())
	if err != nil {
		return nil, err
	}
	ext := extensions(e)
	// One map of the right size and one slice backing every value: an event is encoded per
	// change of every object, and growing the header map dominated the encoding.
	h := make(nats.Header, 10+len(ext))
	values := make([]string, 0, 10+len(ext))
	set := func(name, value string) {
		values = append(values, value)
		h[name] = values[len(values)-1 : len(values) : len(values)]
	}
	set(headerPrefix+"specversion", e.SpecVersion())
	set(headerPrefix+"id", e.ID())
	set(headerPrefix+"source", e.Source())
	set(headerPrefix+"type", e.Type())
	if e.Subject() != "" {
		set(headerPrefix+"subject", e.Subject())
	}
	if !e.Time().IsZero() {
		set(headerPrefix+"time", types.FormatTime(e.Time()))
	}
	if e.DataSchema() != "" {
		set(headerPrefix+"dataschema", e.DataSchema())
	}
	if e.DataContentType() != "" {
		set(headerContentType, e.DataContentType())
	}
	for name, value := range ext {
		s, err := types.Format(value)
		if err != nil {
			return nil, fmt.Errorf("%w: extension %s: %v", ErrInvalidEvent, name, err)
		}
		header, ok := extensionHeaders[name]
		if !ok {
			header = headerPrefix + name
		}
		set(header, s)
	}
	set(HeaderMsgID, e.ID())
	return &nats.Msg{Subject: subject, Header: h, Data: e.Data()}, nil
}

// Decode reads a housekeeper event from a NATS message's headers and data (binary mode, or
// structured mode when the content type says so) and validates it against the contract. Every
// error wraps ErrInvalidEvent and names what is wrong.
func Decode(header nats.Header, data []byte) (cloudevents.Event, error) {
	h := make(map[string]string, len(header))
	for k, v := range header {
		lk := strings.ToLower(k)
		for _, value := range v {
			if prev, ok := h[lk]; ok && prev != value {
				// Which one wins would depend on map or value order: the same message could
				// decode differently.
				return cloudevents.Event{}, fmt.Errorf("%w: header %s is given twice with different values", ErrInvalidEvent, lk)
			}
			h[lk] = value
		}
	}
	var (
		e   cloudevents.Event
		err error
	)
	if strings.HasPrefix(h[headerContentType], contentTypeStructured) {
		e, err = decodeStructured(data)
	} else {
		e, err = decodeBinary(h, data)
	}
	if err != nil {
		return cloudevents.Event{}, err
	}
	if err := Validate(e); err != nil {
		return cloudevents.Event{}, err
	}
	return e, nil
}

func decodeStructured(data []byte) (cloudevents.Event, error) {
	if len(data) > MaxDataSize+4096 {
		return cloudevents.Event{}, fmt.Errorf("%w: structured event is %d bytes, limit %d", ErrInvalidEvent, len(data), MaxDataSize)
	}
	e := cloudevents.New()
	if err := json.Unmarshal(data, &e); err != nil {
		return cloudevents.Event{}, fmt.Errorf("%w: structured event is not valid CloudEvents JSON: %v", ErrInvalidEvent, err)
	}
	return e, nil
}

func decodeBinary(h map[string]string, data []byte) (cloudevents.Event, error) {
	version, ok := h[headerPrefix+"specversion"]
	if !ok {
		return cloudevents.Event{}, fmt.Errorf("%w: missing header %sspecversion (not a binary-mode CloudEvent)", ErrInvalidEvent, headerPrefix)
	}
	if version != cloudevents.CloudEventsVersionV1 {
		return cloudevents.Event{}, fmt.Errorf("%w: header %sspecversion is %q, want %q", ErrInvalidEvent, headerPrefix, version, cloudevents.CloudEventsVersionV1)
	}
	e := cloudevents.New(version)
	for _, attr := range []string{"id", "source", "type"} {
		if h[headerPrefix+attr] == "" {
			return cloudevents.Event{}, fmt.Errorf("%w: missing header %s%s", ErrInvalidEvent, headerPrefix, attr)
		}
	}
	for name, value := range h {
		attr, ok := strings.CutPrefix(name, headerPrefix)
		if !ok {
			continue
		}
		switch attr {
		case "specversion":
		case "id":
			e.SetID(value)
		case "source":
			e.SetSource(value)
		case "type":
			e.SetType(value)
		case "subject":
			e.SetSubject(value)
		case "dataschema":
			e.SetDataSchema(value)
		case "time":
			t, err := types.ParseTime(value)
			if err != nil {
				return cloudevents.Event{}, fmt.Errorf("%w: header %stime %q is not RFC 3339", ErrInvalidEvent, headerPrefix, value)
			}
			e.SetTime(t)
		default:
			if !cloudevents.IsExtensionNameValid(attr) {
				return cloudevents.Event{}, fmt.Errorf("%w: header %s%s is not a valid CloudEvents extension name", ErrInvalidEvent, headerPrefix, attr)
			}
			e.SetExtension(attr, value)
		}
	}
	if ct := h[headerContentType]; ct != "" {
		e.SetDataContentType(ct)
	}
	if len(data) > 0 {
		e.DataEncoded = data
	}
	return e, nil
}

// Validate checks e against the CloudEvents spec and housekeeper's contract: a known type,
// the extensions that name the object, and small JSON data.
func Validate(e cloudevents.Event) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	// Binary mode checks this header itself; structured mode would otherwise let 0.3 through.
	if v := e.SpecVersion(); v != cloudevents.CloudEventsVersionV1 {
		return fmt.Errorf("%w: specversion is %q, want %q", ErrInvalidEvent, v, cloudevents.CloudEventsVersionV1)
	}
	if !IsKnownType(e.Type()) {
		return fmt.Errorf("%w: %w %q", ErrInvalidEvent, ErrUnknownType, e.Type())
	}
	if !strings.HasPrefix(e.Source(), SourcePrefix) {
		return fmt.Errorf("%w: source %q does not start with %s", ErrInvalidEvent, e.Source(), SourcePrefix)
	}
	ref, err := RefOf(e)
	if err != nil {
		return err
	}
	// Encode derives the NATS subject from the CloudEvents subject, the object name.
	if e.Subject() == "" {
		return fmt.Errorf("%w: subject is missing (it is the object name)", ErrInvalidEvent)
	}
	if e.Subject() != ref.Name {
		return fmt.Errorf("%w: subject %q is not the object name %q of extension %s", ErrInvalidEvent, e.Subject(), ref.Name, ExtName)
	}
	// Encode writes the time in UTC as RFC 3339, which has four-digit years only.
	if t := e.Time(); !t.IsZero() && (t.UTC().Year() < 0 || t.UTC().Year() > 9999) {
		return fmt.Errorf("%w: time %s is outside the years 0000-9999 in UTC", ErrInvalidEvent, t.Format(time.RFC3339Nano))
	}
	data := e.Data()
	if len(data) > MaxDataSize {
		return fmt.Errorf("%w: data is %d bytes, limit %d", ErrInvalidEvent, len(data), MaxDataSize)
	}
	if len(data) > 0 {
		if ct := e.DataContentType(); ct != cloudevents.ApplicationJSON && !strings.HasPrefix(ct, cloudevents.ApplicationJSON+";") {
			return fmt.Errorf("%w: data content type is %q, want %s", ErrInvalidEvent, ct, cloudevents.ApplicationJSON)
		}
		if !json.Valid(data) {
			return fmt.Errorf("%w: data is not valid JSON", ErrInvalidEvent)
		}
	}
	return nil
}
