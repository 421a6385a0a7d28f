package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	sigsjson "sigs.k8s.io/json"
)

// jsonListWatch lists resource through c as cache.NewListWatchFromClient does, and watches it
// with a decoder of its own (jsonEventDecoder). Custom resources are served as JSON only, and
// client-go's watch decoder reads each event about five times over: to frame it, to guess its
// kind, to parse the envelope, to guess the object's kind again and to parse the object. The
// bridge knows the kind of each watch, so it frames and parses an event once and decodes its
// object straight into newObject(): half the bridge's CPU went into those reads.
func jsonListWatch(c rest.Interface, resource string, newObject func() kruntime.Object) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (kruntime.Object, error) {
			return c.Get().Resource(resource).VersionedParams(&options, metav1.ParameterCodec).Do(ctx).Get()
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.Watch = true
			body, err := c.Get().Resource(resource).VersionedParams(&options, metav1.ParameterCodec).Stream(ctx)
			if err != nil {
				return nil, err
			}
			// As client-go's own watch: a decoding error ends the watch with a 500, and the
			// reflector lists again.
			return watch.NewStreamWatcher(newJSONEventDecoder(body, newObject),
				apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
		},
	}
}

// jsonEventDecoder reads the API server's JSON watch stream: one metav1.WatchEvent after
// another, each an object {"type": ..., "object": ...}.
type jsonEventDecoder struct {
	body      io.ReadCloser
	stream    *json.Decoder
	newObject func() kruntime.Object
}

func newJSONEventDecoder(body io.ReadCloser, newObject func() kruntime.Object) *jsonEventDecoder {
	return &jsonEventDecoder{body: body, stream: json.NewDecoder(body), newObject: newObject}
}

// wireEvent is a watch event as it arrives: the object is decoded once its type says into what.
type wireEvent struct {
	Type   watch.EventType `json:"type"`
	Object json.RawMessage `json:"object"`
}

// Decode returns the next event. Its object is newObject() for ADDED, MODIFIED, DELETED and
// BOOKMARK, and the server's *metav1.Status for ERROR. At the end of the stream the error is
// io.EOF, which the stream watcher takes as the watch's normal end.
func (d *jsonEventDecoder) Decode() (watch.EventType, kruntime.Object, error) {
	var e wireEvent
	if err := d.stream.Decode(&e); err != nil {
		return "", nil, err
	}
	var obj kruntime.Object
	switch e.Type {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		obj = d.newObject()
	case watch.Error:
		obj = &metav1.Status{}
	default:
		return "", nil, fmt.Errorf("watch event of unknown type %q", e.Type)
	}
	if len(e.Object) == 0 {
		return "", nil, fmt.Errorf("watch event %s without an object", e.Type)
	}
	// Case-sensitive, as apimachinery's JSON serializer: "Spec" is not "spec".
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(e.Object, obj); err != nil {
		return "", nil, fmt.Errorf("decoding the object of a watch event %s: %w", e.Type, err)
	}
	// As client-go's typed decoding: the kind is the informer's, not the object's to carry.
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return e.Type, obj, nil
}

// Close ends the stream.
func (d *jsonEventDecoder) Close() { _ = d.body.Close() }
