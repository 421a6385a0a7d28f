package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
)

func TestObjectEventRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		op          Operation
		obj         testObject
		wantSubject string
		wantType    string
	}{
		{OpCreated, testBucketObj(), "housekeeper.backupbucket.created." + testBucket, "dev.housekeeper.backupbucket.created.v1"},
		{OpDeleted, testBucketObj(), "housekeeper.backupbucket.deleted." + testBucket, "dev.housekeeper.backupbucket.deleted.v1"},
		{OpDeleting, testEntry(), "housekeeper.backupentry.deleting." + testEntryName, "dev.housekeeper.backupentry.deleting.v1"},
		{OpSynced, testEntry(), "housekeeper.backupentry.synced." + testEntryName, "dev.housekeeper.backupentry.synced.v1"},
	} {
		t.Run(tc.wantType, func(t *testing.T) {
			obj := tc.obj
			e, err := NewObjectEvent(testCluster, tc.op, obj.Ref, obj.Data, at(testNow))
			if err != nil {
				t.Fatal(err)
			}
			msg, err := Encode(e)
			if err != nil {
				t.Fatal(err)
			}

			if msg.Subject != tc.wantSubject {
				t.Errorf("subject = %q, want %q", msg.Subject, tc.wantSubject)
			}
			wantID := ID(testCluster, obj.UID, obj.ResourceVersion, string(tc.op))
			if e.ID() != wantID {
				t.Errorf("id = %q, want ID(cluster, uid, resourceVersion, op) = %q", e.ID(), wantID)
			}
			if got := msg.Header.Get(nats.MsgIdHdr); got != wantID {
				t.Errorf("%s = %q, want the event id %q", nats.MsgIdHdr, got, wantID)
			}
			wantHeaders := map[string]string{
				"ce-specversion":     "1.0",
				"ce-id":              wantID,
				"ce-source":          "/housekeeper/clusters/" + testCluster,
				"ce-type":            tc.wantType,
				"ce-subject":         obj.Name,
				"ce-time":            "2025-03-14T09:26:53Z",
				"content-type":       "application/json",
				"ce-kind":            string(obj.Kind),
				"ce-name":            obj.Name,
				"ce-uid":             obj.UID,
				"ce-resourceversion": obj.ResourceVersion,
				"ce-generation":      fmt.Sprint(obj.Generation),
				"Nats-Msg-Id":        wantID,
			}
			for k, want := range wantHeaders {
				if got := msg.Header.Values(k); len(got) != 1 || got[0] != want {
					t.Errorf("header %s = %q, want [%q]", k, got, want)
				}
			}
			for k := range msg.Header {
				if _, ok := wantHeaders[k]; !ok {
					t.Errorf("unexpected header %s: %q", k, msg.Header.Values(k))
				}
				if k != nats.MsgIdHdr && k != strings.ToLower(k) {
					t.Errorf("header %s is not lower-case", k)
				}
			}

			// The data is the snapshot, as given.
			if string(msg.Data) != string(obj.Data) {
				t.Errorf("data:\n got %s\nwant %s", msg.Data, obj.Data)
			}

			d, err := Decode(msg.Header, msg.Data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if d.ID() != wantID || d.Type() != tc.wantType || d.Subject() != obj.Name ||
				d.Source() != Source(testCluster) || !d.Time().Equal(testNow) || d.SpecVersion() != "1.0" {
				t.Errorf("decoded %s", d)
			}
			if string(d.Data()) != string(msg.Data) {
				t.Errorf("decoded data differs:\n got %s\nwant %s", d.Data(), msg.Data)
			}
			ref, err := RefOf(d)
			if err != nil {
				t.Fatal(err)
			}
			wantRef := obj.Ref
			if ref != wantRef {
				t.Errorf("RefOf = %+v, want %+v", ref, wantRef)
			}
		})
	}
}

// Data up to MaxDataSize is carried; above it, ErrDataTooLarge names the object.
func TestObjectEventDataLimit(t *testing.T) {
	entry := testEntry()
	atLimit := []byte(`"` + strings.Repeat("x", MaxDataSize-2) + `"`)
	if _, err := NewObjectEvent(testCluster, OpUpdated, entry.Ref, atLimit); err != nil {
		t.Errorf("%d bytes: %v", len(atLimit), err)
	}
	above := []byte(`"` + strings.Repeat("x", MaxDataSize-1) + `"`)
	_, err := NewObjectEvent(testCluster, OpUpdated, entry.Ref, above)
	if !errors.Is(err, ErrDataTooLarge) || !strings.Contains(err.Error(), testEntryName) {
		t.Errorf("%d bytes: %v, want ErrDataTooLarge naming %s", len(above), err, testEntryName)
	}
}

func TestObjectEventID(t *testing.T) {
	entry := testEntry()
	build := func(op Operation, opts ...ObjectEventOption) string {
		t.Helper()
		e, err := NewObjectEvent(testCluster, op, entry.Ref, entry.Data, append(opts, at(testNow))...)
		if err != nil {
			t.Fatal(err)
		}
		return e.ID()
	}
	// Seen twice, at different times: the same id.
	first := build(OpUpdated)
	e, err := NewObjectEvent(testCluster, OpUpdated, entry.Ref, entry.Data, at(testNow.Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if e.ID() != first {
		t.Errorf("the same change seen later got id %s, want %s", e.ID(), first)
	}
	if build(OpSynced) == first {
		t.Error("another operation on the same resourceVersion got the same id")
	}
	triggered := build(OpUpdated, WithTrigger("namespace"))
	if triggered == first {
		t.Error("WithTrigger did not change the id")
	}
	if want := ID(testCluster, testEntryUID, "48213", "updated/namespace"); triggered != want {
		t.Errorf("triggered id = %s, want %s", triggered, want)
	}
	entry.ResourceVersion = "48214"
	if build(OpUpdated) == first {
		t.Error("a new resourceVersion got the same id")
	}
}

func TestNewObjectEventRejectsOperations(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		op   Operation
	}{
		{KindBackupEntry, OpPurgeDue},
		{KindBackupBucket, OpPurgeScheduled},
		{Kind("purge"), OpPurgeDue},      // would spell a purge type
		{Kind("etcdbackup"), OpPurgeDue}, // would spell the backup-due type
		{Kind("drill"), OpPurgeDue},      // would spell the drill-due type
		{KindRestoreDrill, OpPurgeDue},
		{Kind("copy"), OpPurgeDue}, // would spell the copy-due type
		{KindBackupCopyPolicy, OpPurgeDue},
		{Kind("Secret"), OpCreated},
		{KindBackupEntry, Operation("exploded")},
	} {
		ref := testEntry().Ref
		ref.Kind = tc.kind
		_, err := NewObjectEvent(testCluster, tc.op, ref, testEntry().Data)
		if !errors.Is(err, ErrUnknownType) {
			t.Errorf("NewObjectEvent(%s, %s) = %v, want ErrUnknownType", tc.kind, tc.op, err)
		}
	}
}

func TestPurgeEventRoundTrip(t *testing.T) {
	data := testPurgeData()
	data.Deleted, data.Locked, data.LockedCopies = 1234, 2, []string{"second-copy"}
	e, err := NewPurgeEvent(testCluster, OpPurgeCompleted, testEntry().Ref, data, testNow)
	if err != nil {
		t.Fatal(err)
	}
	wantID := ID(testCluster, testEntryUID, "2025-03-21T09:26:53Z", "purge/completed")
	if e.ID() != wantID {
		t.Errorf("id = %s, want %s", e.ID(), wantID)
	}
	msg, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	if want := "housekeeper-audit.purge.completed." + testEntryName; msg.Subject != want {
		t.Errorf("subject = %q, want %q", msg.Subject, want)
	}
	if msg.Header.Get("ce-kind") != "BackupEntry" || msg.Header.Get("ce-type") != TypePurgeCompleted {
		t.Errorf("headers %v", msg.Header)
	}
	d, err := Decode(msg.Header, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	var got PurgeData
	if err := d.DataAs(&got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, data) {
		t.Errorf("data = %+v, want %+v", got, data)
	}

	// Re-scheduling the same purge gives the same id; another due time, another id.
	again, _ := NewPurgeEvent(testCluster, OpPurgeCompleted, testEntry().Ref, data, testNow.Add(time.Minute))
	if again.ID() != wantID {
		t.Error("the same purge built later got another id")
	}
	data.DueAt = data.DueAt.Add(time.Second)
	later, _ := NewPurgeEvent(testCluster, OpPurgeCompleted, testEntry().Ref, data, testNow)
	if later.ID() == wantID {
		t.Error("a purge due at another time got the same id")
	}

	if _, err := NewPurgeEvent(testCluster, OpDeleted, testEntry().Ref, data, testNow); !errors.Is(err, ErrUnknownType) {
		t.Errorf("NewPurgeEvent(deleted) = %v, want ErrUnknownType", err)
	}
}

// Structured content mode (one JSON document) is accepted too, e.g. from the HTTP mode.
func TestDecodeStructured(t *testing.T) {
	e, err := NewObjectEvent(testCluster, OpUpdated, testBucketObj().Ref, testBucketObj().Data, at(testNow))
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"specversion":"1.0"`) || !strings.Contains(string(body), `"data":{`) {
		t.Fatalf("not a structured JSON event: %s", body)
	}
	for _, ct := range []string{"application/cloudevents+json", "application/cloudevents+json; charset=utf-8"} {
		for _, key := range []string{"content-type", "Content-Type"} {
			d, err := Decode(nats.Header{key: {ct}}, body)
			if err != nil {
				t.Fatalf("%s: %s: %v", key, ct, err)
			}
			if d.ID() != e.ID() || d.Type() != TypeBucketUpdated || d.Subject() != testBucket || !d.Time().Equal(testNow) {
				t.Errorf("decoded %s", d)
			}
			if !jsonEqual(t, d.Data(), e.Data()) {
				t.Errorf("data = %s, want %s", d.Data(), e.Data())
			}
			ref, err := RefOf(d)
			if err != nil || ref.UID != testBucketUID || ref.Generation != 1 {
				t.Errorf("RefOf = %+v, %v", ref, err)
			}
			// And it re-encodes to binary mode.
			msg, err := Encode(d)
			if err != nil {
				t.Fatal(err)
			}
			if msg.Header.Get("ce-id") != e.ID() || msg.Subject != "housekeeper.backupbucket.updated."+testBucket {
				t.Errorf("re-encoded to %s %v", msg.Subject, msg.Header)
			}
		}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// malformed are the ways a message breaks the contract, each with the phrase its error must
// contain. Every case starts from a valid binary-mode message (see encoded).
var malformed = []struct {
	name   string
	mutate func(h nats.Header, data []byte) []byte
	phrase string
}{
	{"missing specversion", del("ce-specversion"), "missing header ce-specversion"},
	{"specversion 0.3", set("ce-specversion", "0.3"), `header ce-specversion is "0.3", want "1.0"`},
	{"missing id", del("ce-id"), "missing header ce-id"},
	{"empty id", set("ce-id", ""), "missing header ce-id"},
	{"missing source", del("ce-source"), "missing header ce-source"},
	{"foreign source", set("ce-source", "https://10.0.0.1:6443"), `source "https://10.0.0.1:6443" does not start with /housekeeper/clusters/`},
	{"missing type", del("ce-type"), "missing header ce-type"},
	{"unknown type", set("ce-type", "dev.housekeeper.backupentry.exploded.v1"), `unknown event type "dev.housekeeper.backupentry.exploded.v1"`},
	{"bad time", set("ce-time", "yesterday"), `header ce-time "yesterday" is not RFC 3339`},
	{"time beyond year 9999 in UTC", set("ce-time", "9999-12-31T23:59:59-01:00"), "outside the years 0000-9999 in UTC"},
	{"missing subject", del("ce-subject"), "subject is missing"},
	{"subject is not the object name", set("ce-subject", "other"), `subject "other" is not the object name`},
	{"conflicting duplicate header", set("CE-ID", "another-id"), "header ce-id is given twice with different values"},
	{"missing kind extension", del("ce-kind"), `extension kind is "", want BackupBucket, BackupEntry, EtcdBackupConfig, RestoreDrill or BackupCopyPolicy`},
	{"wrong kind extension", set("ce-kind", "Secret"), `extension kind is "Secret"`},
	{"missing name extension", del("ce-name"), "extension name is missing"},
	{"bad generation", set("ce-generation", "three"), `extension generation is "three", not an integer`},
	{"bad JSON data", func(h nats.Header, _ []byte) []byte { return []byte(`{"metadata":`) }, "data is not valid JSON"},
	{"data over MaxDataSize", func(h nats.Header, _ []byte) []byte {
		return []byte(`"` + strings.Repeat("x", MaxDataSize-1) + `"`) // valid JSON, one byte too many
	}, fmt.Sprintf("data is %d bytes, limit %d", MaxDataSize+1, MaxDataSize)},
	{"wrong content type", set("content-type", "text/plain"), `data content type is "text/plain", want application/json`},
	{"missing content type", del("content-type"), `data content type is "", want application/json`},
	{"invalid extension name", set("ce-bucket_name", "x"), "header ce-bucket_name is not a valid CloudEvents extension name"},
	{"reserved attribute as extension", set("ce-datacontenttype", "application/json"), "MUST NOT be overwritten by extension"},
	{"structured mode, not JSON", func(h nats.Header, _ []byte) []byte {
		h.Set("content-type", "application/cloudevents+json")
		return []byte("specversion=1.0")
	}, "structured event is not valid CloudEvents JSON"},
	{"structured mode, specversion 0.3", func(h nats.Header, _ []byte) []byte {
		h.Set("content-type", "application/cloudevents+json")
		return []byte(`{"specversion":"0.3","id":"1","source":"/housekeeper/clusters/c","type":"dev.housekeeper.purge.due.v1","subject":"n","kind":"BackupEntry","name":"n"}`)
	}, `specversion is "0.3", want "1.0"`},
	{"structured mode, unknown type", func(h nats.Header, _ []byte) []byte {
		h.Set("content-type", "application/cloudevents+json")
		return []byte(`{"specversion":"1.0","id":"1","source":"/housekeeper/clusters/c","type":"com.example.other","subject":"n","kind":"BackupEntry","name":"n"}`)
	}, `unknown event type "com.example.other"`},
}

func del(key string) func(nats.Header, []byte) []byte {
	return func(h nats.Header, data []byte) []byte { h.Del(key); return data }
}

func set(key, value string) func(nats.Header, []byte) []byte {
	return func(h nats.Header, data []byte) []byte { h.Set(key, value); return data }
}

func TestDecodeRejectsMalformed(t *testing.T) {
	valid := encoded(t)
	if _, err := Decode(valid.Header, valid.Data); err != nil {
		t.Fatalf("the unmodified message does not decode: %v", err)
	}
	for _, tc := range malformed {
		t.Run(tc.name, func(t *testing.T) {
			h := cloneHeader(valid.Header)
			data := tc.mutate(h, append([]byte(nil), valid.Data...))
			e, err := Decode(h, data)
			if err == nil {
				t.Fatalf("Decode accepted it: %s", e)
			}
			if !errors.Is(err, ErrInvalidEvent) {
				t.Errorf("error %q does not wrap ErrInvalidEvent", err)
			}
			if !strings.Contains(err.Error(), tc.phrase) {
				t.Errorf("error %q does not say %q", err, tc.phrase)
			}
			if e.Context != nil {
				t.Errorf("Decode returned an event with its error: %s", e)
			}
		})
	}
}

// Unknown types are both invalid events and ErrUnknownType, so callers can tell them apart.
func TestDecodeUnknownTypeIsErrUnknownType(t *testing.T) {
	msg := encoded(t)
	msg.Header.Set("ce-type", "dev.housekeeper.backupentry.v2")
	_, err := Decode(msg.Header, msg.Data)
	if !errors.Is(err, ErrUnknownType) || !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("Decode = %v, want both ErrInvalidEvent and ErrUnknownType", err)
	}
}

// Header names are matched case-insensitively (NATS headers are case-sensitive, senders vary).
func TestDecodeHeaderCase(t *testing.T) {
	msg := encoded(t)
	h := nats.Header{}
	for k, v := range msg.Header {
		h[strings.ToUpper(k[:1])+k[1:]] = v
	}
	d, err := Decode(h, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID() != msg.Header.Get("ce-id") || d.Type() != TypeEntryDeleting {
		t.Errorf("decoded %s", d)
	}
}

// Attributes that are absent stay absent, and unknown valid extensions survive a round trip.
func TestDecodeOptionalAttributes(t *testing.T) {
	msg := encoded(t)
	msg.Header.Del("ce-time")
	msg.Header.Set("ce-traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	msg.Header.Set("ce-dataschema", "https://housekeeper.dev/schemas/backupentry.json")
	d, err := Decode(msg.Header, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Time().IsZero() {
		t.Errorf("time = %s, want none", d.Time())
	}
	re, err := Encode(d)
	if err != nil {
		t.Fatal(err)
	}
	if re.Header.Get("ce-traceparent") != msg.Header.Get("ce-traceparent") ||
		re.Header.Get("ce-dataschema") != msg.Header.Get("ce-dataschema") {
		t.Errorf("re-encoded headers %v", re.Header)
	}
	if _, ok := re.Header["ce-time"]; ok {
		t.Error("re-encoding invented a time")
	}
}

func TestDecodeEmptyData(t *testing.T) {
	msg := encoded(t)
	d, err := Decode(msg.Header, nil)
	if err != nil {
		t.Fatalf("an event without data is valid: %v", err)
	}
	if len(d.Data()) != 0 {
		t.Errorf("data = %q", d.Data())
	}
}

func TestEncodeRejects(t *testing.T) {
	valid := func() cloudevents.Event {
		e, err := NewObjectEvent(testCluster, OpCreated, testEntry().Ref, testEntry().Data, at(testNow))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, tc := range []struct {
		name   string
		mutate func(*cloudevents.Event)
		want   error
	}{
		{"no id", func(e *cloudevents.Event) { e.SetID("") }, ErrInvalidEvent},
		{"unknown type", func(e *cloudevents.Event) { e.SetType("dev.housekeeper.other.v1") }, ErrUnknownType},
		{"no subject", func(e *cloudevents.Event) { e.SetSubject("") }, ErrInvalidEvent},
		{"data too large", func(e *cloudevents.Event) {
			_ = e.SetData(cloudevents.ApplicationJSON, []byte(`"`+strings.Repeat("x", MaxDataSize)+`"`))
		}, ErrDataTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := valid()
			tc.mutate(&e)
			msg, err := Encode(e)
			if !errors.Is(err, tc.want) {
				t.Errorf("Encode = %v, %v; want %v", msg, err, tc.want)
			}
		})
	}
}
