package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
)

// fuzzHeaders are the headers FuzzDecode sets from its arguments; bit i of present says whether
// fuzzHeaders[i] is there at all (absent and empty differ).
var fuzzHeaders = []string{
	"ce-specversion", "ce-id", "ce-source", "ce-type", "ce-subject", "ce-time", "content-type",
	"ce-kind", "ce-name", "ce-uid", "ce-resourceversion", "ce-generation",
}

// extraBit marks the one additional header whose name is fuzzed too.
const extraBit = 1 << 12

// fuzzArgs is one fuzz input. Bit i of repeated gives fuzzHeaders[i] (if present) the second
// value again, so multi-valued headers are tried too.
type fuzzArgs struct {
	present, repeated uint16
	values            [12]string
	second            string
	extraKey, extraV  string
	data              []byte
}

func argsOf(h nats.Header, data []byte) fuzzArgs {
	a := fuzzArgs{data: data}
	for i, k := range fuzzHeaders {
		if v, ok := h[k]; ok {
			a.present |= 1 << i
			a.values[i] = v[0]
			if len(v) > 1 {
				a.repeated |= 1 << i
				a.second = v[1]
			}
		}
	}
	var extra []string
	for k := range h {
		if !slices.Contains(fuzzHeaders, k) && k != HeaderMsgID {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		a.present |= extraBit
		a.extraKey, a.extraV = extra[0], h.Get(extra[0])
	}
	return a
}

func (a fuzzArgs) header() nats.Header {
	h := nats.Header{}
	if a.present&extraBit != 0 {
		h.Set(a.extraKey, a.extraV)
	}
	for i, k := range fuzzHeaders {
		if a.present&(1<<i) != 0 {
			h.Set(k, a.values[i])
			if a.repeated&(1<<i) != 0 {
				h.Add(k, a.second)
			}
		}
	}
	return h
}

// conflicting reports whether a header holds two different values.
func conflicting(h nats.Header) bool {
	for _, v := range h {
		for _, value := range v {
			if value != v[0] {
				return true
			}
		}
	}
	return false
}

func addSeed(f *testing.F, a fuzzArgs) {
	v := a.values
	f.Add(a.present, a.repeated, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], a.second, a.extraKey, a.extraV, a.data)
}

// FuzzDecode feeds Decode arbitrary header values, repeated headers and data. Decode must
// never panic, every rejection must wrap ErrInvalidEvent, a header with two different values
// must be rejected, and whatever it accepts must re-encode with Encode and decode again to the
// same event: every attribute, every extension and the data. The corpus it found is kept in
// testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	// Valid messages of every shape: object events, purge events, structured mode.
	bucket, _ := NewObjectEvent(testCluster, OpCreated, testBucketObj().Ref, testBucketObj().Data, at(testNow))
	entry, _ := NewObjectEvent(testCluster, OpDeleted, testEntry().Ref, testEntry().Data, at(testNow))
	purge, _ := NewPurgeEvent(testCluster, OpPurgeFailed, testEntry().Ref, PurgeData{Entry: testEntryName, Reason: "403 Forbidden"}, testNow)
	valid := encoded(f)
	for _, e := range []*nats.Msg{valid, mustEncode(f, bucket), mustEncode(f, entry), mustEncode(f, purge)} {
		addSeed(f, argsOf(e.Header, e.Data))
	}
	structured, err := json.Marshal(entry)
	if err != nil {
		f.Fatal(err)
	}
	addSeed(f, argsOf(nats.Header{"content-type": {contentTypeStructured}}, structured))
	for _, body := range []string{
		strings.Replace(string(structured), `"specversion":"1.0"`, `"specversion":"0.3"`, 1),
		`{"specversion":"1.0","id":"1","source":"/housekeeper/clusters/c","type":"dev.housekeeper.purge.due.v1","subject":"n","kind":"BackupEntry","name":"n","datacontenttype":"application/json","data_base64":"eyJlbnRyeSI6Im4ifQ=="}`,
		`{"specversion":"1.0","id":"1","source":"/housekeeper/clusters/c","type":"dev.housekeeper.purge.due.v1","subject":"n","kind":"BackupEntry","name":"n","generation":7,"datacontenttype":"application/json","data":"x"}`,
	} {
		addSeed(f, argsOf(nats.Header{"content-type": {contentTypeStructured}}, []byte(body)))
	}
	// Each malformed case, and edge cases of the attributes.
	for _, tc := range malformed {
		h := cloneHeader(valid.Header)
		addSeed(f, argsOf(h, tc.mutate(h, append([]byte(nil), valid.Data...))))
	}
	for _, mutate := range []func(nats.Header, []byte) []byte{
		set("ce-time", "9999-12-31T23:59:59-01:00"), // beyond year 9999 in UTC
		set("ce-time", "0000-01-01T00:00:00+01:00"), // before year 0 in UTC
		del("ce-subject"),
		set("ce-subject", "other-name"),
		set("ce-name", "a.b c"),
		set("CE-ID", "another-id"),
	} {
		h := cloneHeader(valid.Header)
		addSeed(f, argsOf(h, mutate(h, append([]byte(nil), valid.Data...))))
	}
	// Repeated headers: the same value twice (fine) and two values (ambiguous).
	for _, second := range []string{valid.Header.Get("ce-id"), "another-id"} {
		h := cloneHeader(valid.Header)
		h.Add("ce-id", second)
		addSeed(f, argsOf(h, valid.Data))
	}

	f.Fuzz(func(t *testing.T, present, repeated uint16, specversion, id, source, typ, subject, tm, ct, kind, name, uid, rv, gen, second, extraKey, extraV string, data []byte) {
		a := fuzzArgs{
			present: present, repeated: repeated,
			values:   [12]string{specversion, id, source, typ, subject, tm, ct, kind, name, uid, rv, gen},
			second:   second,
			extraKey: extraKey, extraV: extraV, data: data,
		}
		h := a.header()
		e, err := Decode(h, data)
		for range 3 { // header map order must not matter
			again, againErr := Decode(h, data)
			if (err == nil) != (againErr == nil) || eventString(again) != eventString(e) {
				t.Fatalf("Decode is not deterministic: first %s (%v), then %s (%v)", eventString(e), err, eventString(again), againErr)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("Decode error %q does not wrap ErrInvalidEvent", err)
			}
			return
		}
		if conflicting(h) {
			t.Fatalf("Decode accepted a header with two different values: %v", h)
		}
		msg, err := Encode(e)
		if err != nil {
			t.Fatalf("Decode accepted an event Encode rejects: %v\nheaders %v\ndata %q", err, h, data)
		}
		if want, _ := Subject(e.Type(), e.Subject()); msg.Subject != want {
			t.Fatalf("encoded on %q, want %q", msg.Subject, want)
		}
		if msg.Header.Get(HeaderMsgID) != e.ID() {
			t.Fatalf("%s = %q, want %q", HeaderMsgID, msg.Header.Get(HeaderMsgID), e.ID())
		}
		d, err := Decode(msg.Header, msg.Data)
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v\nfirst headers %v\nre-encoded headers %v", err, h, msg.Header)
		}
		if diff := eventDiff(e, d); diff != "" {
			t.Fatalf("round trip changed the event: %s\nfirst  %s\nsecond %s", diff, e, d)
		}
	})
}

// eventDiff names the first attribute, extension or data that differs between a and b ("" if
// none). Extensions compare by their canonical string: a structured event's number and a
// binary event's header string are the same value.
func eventDiff(a, b cloudevents.Event) string {
	attrs := []struct {
		name   string
		av, bv string
	}{
		{"specversion", a.SpecVersion(), b.SpecVersion()},
		{"id", a.ID(), b.ID()},
		{"source", a.Source(), b.Source()},
		{"type", a.Type(), b.Type()},
		{"subject", a.Subject(), b.Subject()},
		{"datacontenttype", a.DataContentType(), b.DataContentType()},
		{"dataschema", a.DataSchema(), b.DataSchema()},
		{"data", string(a.Data()), string(b.Data())},
	}
	for _, attr := range attrs {
		if attr.av != attr.bv {
			return fmt.Sprintf("%s %q became %q", attr.name, attr.av, attr.bv)
		}
	}
	if !a.Time().Equal(b.Time()) {
		return fmt.Sprintf("time %s became %s", a.Time(), b.Time())
	}
	ae, be := formatted(a.Extensions()), formatted(b.Extensions())
	if !maps.Equal(ae, be) {
		return fmt.Sprintf("extensions %v became %v", ae, be)
	}
	return ""
}

func formatted(ext map[string]any) map[string]string {
	out := make(map[string]string, len(ext))
	for k, v := range ext {
		s, err := types.Format(v)
		if err != nil {
			s = fmt.Sprintf("unformattable %T", v)
		}
		out[k] = s
	}
	return out
}

func mustEncode(tb testing.TB, e cloudevents.Event) *nats.Msg {
	tb.Helper()
	msg, err := Encode(e)
	if err != nil {
		tb.Fatal(err)
	}
	return msg
}

// eventString is e.String() for events that may be the zero Event.
func eventString(e cloudevents.Event) string {
	if e.Context == nil {
		return "<no event>"
	}
	return e.String()
}
