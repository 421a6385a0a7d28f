package bridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// watchedEntry is a BackupEntry as a seed's API server sends it: with gardenlet's labels and
// annotations, two finalizers, the managed fields of three writers, and a status.
func watchedEntry(name, rv string) *extensionsv1alpha1.BackupEntry {
	now := metav1.NewTime(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
	fields := metav1.NewFieldsV1
	return &extensionsv1alpha1.BackupEntry{
		TypeMeta: metav1.TypeMeta{APIVersion: "extensions.gardener.cloud/v1alpha1", Kind: "BackupEntry"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID("5b0c6c1e-1f7e-4a51-9d0e-" + rv), ResourceVersion: rv, Generation: 2, CreationTimestamp: now,
			Labels:      map[string]string{"shoot.gardener.cloud/no-cleanup": "true"},
			Annotations: map[string]string{"gardener.cloud/timestamp": now.Format(time.RFC3339Nano), "shoot.gardener.cloud/purpose": "production"},
			Finalizers:  []string{"extensions.gardener.cloud/housekeeper", "gardener.cloud/backupentry"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "gardenlet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "extensions.gardener.cloud/v1alpha1", Time: &now, FieldsType: "FieldsV1",
					FieldsV1: fields(`{"f:metadata":{"f:annotations":{".":{},"f:gardener.cloud/timestamp":{}},"f:labels":{".":{},"f:shoot.gardener.cloud/no-cleanup":{}}},"f:spec":{".":{},"f:bucketName":{},"f:region":{},"f:secretRef":{".":{},"f:name":{},"f:namespace":{}},"f:type":{}}}`)},
				{Manager: "housekeeper-entry", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "extensions.gardener.cloud/v1alpha1", Time: &now, FieldsType: "FieldsV1",
					FieldsV1: fields(`{"f:metadata":{"f:finalizers":{".":{},"v:\"extensions.gardener.cloud/housekeeper\"":{}}}}`)},
				{Manager: "housekeeper-entry", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "extensions.gardener.cloud/v1alpha1", Time: &now, FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: fields(`{"f:status":{".":{},"f:lastOperation":{".":{},"f:description":{},"f:lastUpdateTime":{},"f:progress":{},"f:state":{},"f:type":{}},"f:observedGeneration":{}}}`)},
			},
		},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"},
			Region:      "local", BucketName: "bucket-" + name,
			SecretRef: corev1.SecretReference{Namespace: "garden", Name: "backupentry-" + name},
		},
		Status: extensionsv1alpha1.BackupEntryStatus{DefaultStatus: extensionsv1alpha1.DefaultStatus{
			ObservedGeneration: 2,
			LastOperation: &gardencorev1beta1.LastOperation{Type: gardencorev1beta1.LastOperationTypeReconcile, State: gardencorev1beta1.LastOperationStateSucceeded,
				Progress: 100, Description: "BackupEntry reconciled", LastUpdateTime: now},
		}},
	}
}

// watchStream is what the API server writes to a JSON watch: one event per line.
func watchStream(t testing.TB, events ...metav1.WatchEvent) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func watchEvent(t testing.TB, typ watch.EventType, obj kruntime.Object) metav1.WatchEvent {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return metav1.WatchEvent{Type: string(typ), Object: kruntime.RawExtension{Raw: raw}}
}

// clientGoDecoder decodes a watch stream as client-go's REST client does for the bridge's
// extensions client (kube.ExtensionsRESTClient).
func clientGoDecoder(t testing.TB, body io.ReadCloser) watch.Decoder {
	t.Helper()
	info, ok := kruntime.SerializerInfoForMediaType(serializer.NewCodecFactory(kube.Scheme).WithoutConversion().SupportedMediaTypes(), kruntime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	frames := info.StreamSerializer.Framer.NewFrameReader(body)
	return restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer),
		serializer.NewCodecFactory(kube.Scheme).WithoutConversion().DecoderToVersion(info.Serializer, extensionsv1alpha1.SchemeGroupVersion))
}

func newEntryObject() kruntime.Object { return &extensionsv1alpha1.BackupEntry{} }

// The bridge's decoder yields what client-go's does, event for event: the same objects, the
// server's Status for an ERROR, and io.EOF at the end.
func TestJSONEventDecoderDecodesAsClientGo(t *testing.T) {
	bookmark := &extensionsv1alpha1.BackupEntry{TypeMeta: watchedEntry("a", "1").TypeMeta, ObjectMeta: metav1.ObjectMeta{ResourceVersion: "42",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	gone := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 1 (42)"}
	stream := watchStream(t,
		watchEvent(t, watch.Added, watchedEntry("a", "10")),
		watchEvent(t, watch.Modified, watchedEntry("a", "11")),
		watchEvent(t, watch.Bookmark, bookmark),
		watchEvent(t, watch.Deleted, watchedEntry("a", "12")),
		watchEvent(t, watch.Error, gone),
	)
	ours := newJSONEventDecoder(io.NopCloser(bytes.NewReader(stream)), newEntryObject)
	theirs := clientGoDecoder(t, io.NopCloser(bytes.NewReader(stream)))
	for i := 0; ; i++ {
		typ, obj, err := ours.Decode()
		wantTyp, want, wantErr := theirs.Decode()
		if errors.Is(wantErr, io.EOF) {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("event %d: client-go's stream ended, ours gave %s %v %v", i, typ, obj, err)
			}
			if i != 5 {
				t.Fatalf("decoded %d events, want 5", i)
			}
			return
		}
		if wantErr != nil || err != nil {
			t.Fatalf("event %d: client-go: %v; ours: %v", i, wantErr, err)
		}
		if typ != wantTyp || !equality.Semantic.DeepEqual(obj, want) {
			t.Fatalf("event %d: got %s %#v\nclient-go: %s %#v", i, typ, obj, wantTyp, want)
		}
	}
}

// A stream the bridge cannot read ends the watch with an error that says why (the stream
// watcher reports it, and the reflector lists again); it is never an event.
func TestJSONEventDecoderRejects(t *testing.T) {
	entry := watchStream(t, watchEvent(t, watch.Added, watchedEntry("a", "10")))
	for name, tc := range map[string]struct {
		stream string
		want   string
	}{
		"unknown type":   {`{"type":"RENAMED","object":{}}`, `unknown type "RENAMED"`},
		"no object":      {`{"type":"ADDED"}`, "without an object"},
		"wrong shape":    {`{"type":"ADDED","object":{"spec":[]}}`, "decoding the object of a watch event ADDED"},
		"cut off":        {string(entry[:len(entry)/2]), "unexpected EOF"},
		"not JSON":       {"<html>", "invalid character"},
		"field in caps":  {`{"type":"ADDED","object":{"Spec":{"bucketName":"x"}}}`, ""},
		"empty is EOF":   {"", "EOF"},
		"space then EOF": {"\n", "EOF"},
	} {
		t.Run(name, func(t *testing.T) {
			typ, obj, err := newJSONEventDecoder(io.NopCloser(strings.NewReader(tc.stream)), newEntryObject).Decode()
			if tc.want == "" { // decodes, case-sensitively: "Spec" is not spec
				if err != nil || obj.(*extensionsv1alpha1.BackupEntry).Spec.BucketName != "" {
					t.Fatalf("got %s %#v %v, want an entry without spec", typ, obj, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %s %v %v, want an error with %q", typ, obj, err, tc.want)
			}
		})
	}
}

// BenchmarkWatchDecode decodes a seed's BackupEntry watch events with client-go's decoder
// (upstream, as every controller-runtime informer does) and with the bridge's.
func BenchmarkWatchDecode(b *testing.B) {
	const perStream = 1000
	evs := make([]metav1.WatchEvent, perStream)
	for i := range evs {
		evs[i] = watchEvent(b, watch.Modified, watchedEntry("entry", "1"))
	}
	stream := watchStream(b, evs...)
	for _, bc := range []struct {
		name    string
		decoder func(io.ReadCloser) watch.Decoder
	}{
		{"client-go", func(r io.ReadCloser) watch.Decoder { return clientGoDecoder(b, r) }},
		{"housekeeper", func(r io.ReadCloser) watch.Decoder { return newJSONEventDecoder(r, newEntryObject) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(stream) / perStream))
			for i := 0; i < b.N; {
				d := bc.decoder(io.NopCloser(bytes.NewReader(stream)))
				for j := 0; j < perStream && i < b.N; j, i = j+1, i+1 {
					if _, _, err := d.Decode(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
