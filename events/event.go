package events

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
)

// CloudEvents extension attributes every housekeeper event carries, so consumers filter and
// dedupe without parsing data.
const (
	ExtKind            = "kind"
	ExtName            = "name"
	ExtUID             = "uid"
	ExtResourceVersion = "resourceversion"
	ExtGeneration      = "generation"
	// ExtInputs is on object events only: a digest of what the object's function acts on, as
	// the bridge saw it (see WithInputs).
	ExtInputs = "inputs"
)

// SourcePrefix starts every event source; the cluster name follows.
const SourcePrefix = "/housekeeper/clusters/"

// Source is the CloudEvents source for a cluster: it names the cluster, not an API address.
func Source(cluster string) string { return SourcePrefix + cluster }

// ObjectEventOption adjusts an object event.
type ObjectEventOption func(*objectEventOptions)

type objectEventOptions struct {
	trigger string
	inputs  string
	now     func() time.Time
}

// WithTrigger distinguishes a re-announcement of an unchanged object (say, because the
// namespace it waits for appeared) from earlier events of the same state: it enters the id.
func WithTrigger(trigger string) ObjectEventOption {
	return func(o *objectEventOptions) { o.trigger = trigger }
}

// WithInputs sets the inputs extension: a digest of the object's state that its function acts
// on and of the other objects it reads (its credentials, its namespace). The bridge compares it
// with the last event of the object in the stream of record to tell a changed object from one
// listed again unchanged. It does not enter the id.
func WithInputs(digest string) ObjectEventOption {
	return func(o *objectEventOptions) { o.inputs = digest }
}

// NewObjectEvent builds the event for op on the object ref names, seen in cluster, with data
// its JSON snapshot (the bridge trims it; see MaxDataSize).
func NewObjectEvent(cluster string, op Operation, ref Ref, data []byte, opts ...ObjectEventOption) (cloudevents.Event, error) {
	o := objectEventOptions{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	eventType, err := ObjectType(ref.Kind, op)
	if err != nil {
		return cloudevents.Event{}, err
	}
	if len(data) > MaxDataSize {
		return cloudevents.Event{}, fmt.Errorf("%w: %s %s is %d bytes, limit %d", ErrDataTooLarge, ref.Kind, ref.Name, len(data), MaxDataSize)
	}
	operation := string(op)
	if o.trigger != "" {
		operation += "/" + o.trigger
	}
	e := newEvent(cluster, eventType, ref, ID(cluster, ref.UID, ref.ResourceVersion, operation), o.now())
	if o.inputs != "" {
		e.Context.(*cloudevents.EventContextV1).Extensions[ExtInputs] = o.inputs
	}
	// The snapshot is JSON already: set it as is rather than through SetData, which would
	// marshal it again.
	e.SetDataContentType(cloudevents.ApplicationJSON)
	e.DataEncoded = data
	return e, nil
}

// PurgeData is the data of purge events.
type PurgeData struct {
	// Entry is the BackupEntry name; Prefix the object-store prefix purged (entry name without
	// "source-", with a trailing slash).
	Entry      string `json:"entry"`
	UID        string `json:"uid"`
	BucketName string `json:"bucketName"`
	Prefix     string `json:"prefix"`
	// DueAt is when the retention of the entry's backups ends.
	DueAt time.Time `json:"dueAt"`
	// Deleted counts the objects removed (completed events).
	Deleted int `json:"deleted,omitempty"`
	// Reason says why a purge failed.
	Reason string `json:"reason,omitempty"`
	// Locked counts the objects object lock kept (completed and verified events), marked for
	// deletion; LockedUntil is the latest end of their locks, when a verify purge is due.
	// Deleted and Locked count the bucket's objects and its copies' together.
	Locked      int       `json:"locked,omitempty"`
	LockedUntil time.Time `json:"lockedUntil,omitzero"`
	// LockedCopies are the BackupDestinations whose copies under Prefix hold objects object
	// lock kept: the verify purge deletes their marked objects too.
	LockedCopies []string `json:"lockedCopies,omitempty"`
}

// NewPurgeEvent builds a purge event about entry. Its id is derived from the entry's uid, the
// due time and the operation, so re-scheduling the same purge yields the same id.
func NewPurgeEvent(cluster string, op Operation, entry Ref, data PurgeData, now time.Time) (cloudevents.Event, error) {
	eventType, err := PurgeType(op)
	if err != nil {
		return cloudevents.Event{}, err
	}
	entry.Kind = KindBackupEntry
	id := ID(cluster, entry.UID, data.DueAt.UTC().Format(time.RFC3339), "purge/"+string(op))
	e := newEvent(cluster, eventType, entry, id, now)
	if err := e.SetData(cloudevents.ApplicationJSON, data); err != nil {
		return cloudevents.Event{}, err
	}
	return e, nil
}

// ObjectName is how events name an object: its name, or "<namespace>/<name>" if it is
// namespaced.
func ObjectName(namespace, name string) string {
	if namespace != "" {
		return namespace + "/" + name
	}
	return name
}

// SplitObjectName reverses ObjectName: the namespace ("" if none) and the name.
func SplitObjectName(name string) (namespace, objectName string) {
	if ns, n, ok := strings.Cut(name, "/"); ok {
		return ns, n
	}
	return "", name
}

// EtcdBackupDueData is the data of backup-due events: which EtcdBackupConfig, at which
// generation the schedule was installed.
type EtcdBackupDueData struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Generation int64  `json:"generation"`
	Schedule   string `json:"schedule,omitempty"`
}

// NewEtcdBackupDueEvent builds the event an EtcdBackupConfig's schedule fires. Its id derives
// from the config's uid and generation: installing the same schedule again is a duplicate.
func NewEtcdBackupDueEvent(cluster string, config Ref, schedule string, now time.Time) (cloudevents.Event, error) {
	config.Kind = KindEtcdBackupConfig
	id := ID(cluster, config.UID, strconv.FormatInt(config.Generation, 10), "etcdbackup/due")
	e := newEvent(cluster, TypeEtcdBackupDue, config, id, now)
	namespace, name := SplitObjectName(config.Name)
	data := EtcdBackupDueData{Namespace: namespace, Name: name, UID: config.UID,
		Generation: config.Generation, Schedule: schedule}
	if err := e.SetData(cloudevents.ApplicationJSON, data); err != nil {
		return cloudevents.Event{}, err
	}
	return e, nil
}

// DueData is the data of drill-due and copy-due events: which cluster-scoped object (a
// RestoreDrill, a BackupCopyPolicy), at which generation its schedule was installed.
type DueData struct {
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Generation int64  `json:"generation"`
	Schedule   string `json:"schedule,omitempty"`
}

// NewDrillDueEvent builds the event a RestoreDrill's schedule fires. Its id derives from the
// drill's uid and generation: installing the same schedule again is a duplicate.
func NewDrillDueEvent(cluster string, drill Ref, schedule string, now time.Time) (cloudevents.Event, error) {
	return newDueEvent(cluster, KindRestoreDrill, TypeDrillDue, "drill/due", drill, schedule, now)
}

// NewCopyDueEvent builds the event a BackupCopyPolicy's schedule fires. Its id derives from the
// policy's uid and generation: installing the same schedule again is a duplicate.
func NewCopyDueEvent(cluster string, policy Ref, schedule string, now time.Time) (cloudevents.Event, error) {
	return newDueEvent(cluster, KindBackupCopyPolicy, TypeCopyDue, "copy/due", policy, schedule, now)
}

func newDueEvent(cluster string, kind Kind, eventType, idPurpose string, ref Ref, schedule string, now time.Time) (cloudevents.Event, error) {
	ref.Kind = kind
	id := ID(cluster, ref.UID, strconv.FormatInt(ref.Generation, 10), idPurpose)
	e := newEvent(cluster, eventType, ref, id, now)
	data := DueData{Name: ref.Name, UID: ref.UID, Generation: ref.Generation, Schedule: schedule}
	if err := e.SetData(cloudevents.ApplicationJSON, data); err != nil {
		return cloudevents.Event{}, err
	}
	return e, nil
}

func newEvent(cluster, eventType string, ref Ref, id string, now time.Time) cloudevents.Event {
	e := cloudevents.New(cloudevents.CloudEventsVersionV1)
	e.SetSource(Source(cluster)) // parsed and checked: a cluster name is configuration
	name := ref.Name
	// The rest directly: the setters validate and lower-case names and values that are fixed
	// here, and an event is built for every change of every object.
	ec := e.Context.(*cloudevents.EventContextV1)
	ec.ID, ec.Type, ec.Subject = id, eventType, &name
	ec.Time = &types.Timestamp{Time: now.UTC()}
	ec.Extensions = map[string]any{
		ExtKind:            string(ref.Kind),
		ExtName:            name,
		ExtUID:             ref.UID,
		ExtResourceVersion: ref.ResourceVersion,
		ExtGeneration:      strconv.FormatInt(ref.Generation, 10),
	}
	return e
}

// Ref is what every event names: the object, by kind, name (ObjectName) and uid, at a
// resourceVersion and generation.
type Ref struct {
	Kind            Kind
	Name            string
	UID             string
	ResourceVersion string
	Generation      int64
}

// refKinds are the kinds events name.
var refKinds = []Kind{KindBackupBucket, KindBackupEntry, KindEtcdBackupConfig, KindRestoreDrill, KindBackupCopyPolicy}

// RefOf reads the object reference from a decoded event's extensions.
func RefOf(e cloudevents.Event) (Ref, error) {
	ext := extensions(e)
	str := func(key string) string {
		v, _ := ext[key].(string)
		return v
	}
	r := Ref{Kind: Kind(str(ExtKind)), Name: str(ExtName), UID: str(ExtUID), ResourceVersion: str(ExtResourceVersion)}
	if !slices.Contains(refKinds, r.Kind) {
		return r, fmt.Errorf("%w: extension %s is %q, want %s, %s, %s, %s or %s", ErrInvalidEvent, ExtKind, r.Kind, KindBackupBucket, KindBackupEntry, KindEtcdBackupConfig, KindRestoreDrill, KindBackupCopyPolicy)
	}
	if r.Name == "" {
		return r, fmt.Errorf("%w: extension %s is missing", ErrInvalidEvent, ExtName)
	}
	if g := str(ExtGeneration); g != "" {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return r, fmt.Errorf("%w: extension %s is %q, not an integer", ErrInvalidEvent, ExtGeneration, g)
		}
		r.Generation = n
	}
	return r, nil
}

// MaxDataSize caps an object event's data. Events are triggers; consumers re-read the object,
// so a snapshot only has to be good enough to filter and audit by.
const MaxDataSize = 32 << 10
