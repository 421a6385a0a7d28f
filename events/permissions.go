package events

import (
	"slices"
	"strings"
)

// NATS identities: who may publish and subscribe to what. Each of housekeeper's components
// connects as its own identity with the least rights its work needs, so that what reaches a
// function's consumer was published by the component entitled to it: object events only by the
// bridge, due purges and backups only by the server's scheduler (nobody may publish on those
// subjects), redrives only by an operator. `housekeeper nats-auth` turns these into nats-server
// configuration and credentials; events/README has the table.
const (
	// IdentityBridge publishes object events and answers resync requests.
	IdentityBridge = "bridge"
	// IdentitySetup creates and updates the streams and the functions' durable consumers.
	IdentitySetup = "setup"
	// IdentityOperator replays, re-drives dead letters, lists them and asks for a resync.
	IdentityOperator = "operator"
	// IdentityForward delivers the functions' events to them served over HTTP (Knative): it
	// consumes their durable consumers and does none of their work.
	IdentityForward = "forward"
)

// Permission is what one identity may do on NATS: the subjects it may publish to and subscribe
// to, and whether it may answer requests it received (on their reply subjects).
type Permission struct {
	Identity       string
	Publish        []string
	Subscribe      []string
	AllowResponses bool
}

// InboxPrefix is the prefix of the identity's reply subjects. Each identity has its own, and may
// subscribe only below it, so no identity reads another's replies (fetched events among them).
func InboxPrefix(identity string) string {
	return "_INBOX_" + Token(identity)
}

// jsAPI is the JetStream API subject of a request.
func jsAPI(parts ...string) string {
	return "$JS.API." + strings.Join(parts, ".")
}

// streamInfo are the lookups of the streams every process makes at start-up (CheckStreams).
var streamInfo = []string{jsAPI("INFO"), jsAPI("STREAM.INFO", RecordStream), jsAPI("STREAM.INFO", DeadLetterStream), jsAPI("STREAM.INFO", AuditStream)}

// BridgePermission is the bridge's: publish every object event, answer resync, read the stream
// of record (at the start of a term, the last event of every object through an ordered
// consumer; single messages, pending purges' schedule holders, for its metrics) and the last
// completed purge from the audit stream (the stream infos give the dead letters stored), and
// re-drive transient dead
// letters to their functions (read them, publish on the redrive subjects, delete them).
func BridgePermission() Permission {
	return Permission{
		Identity: IdentityBridge,
		Publish: slices.Concat([]string{
			subjectRoot + ".backupbucket.>", subjectRoot + ".backupentry.>", subjectRoot + ".etcdbackupconfig.>",
			SubjectRestoreDrills, SubjectBackupCopyPolicies,
			jsAPI("STREAM.MSG.GET", RecordStream), jsAPI("STREAM.MSG.GET", AuditStream),
			// Its one consumer of the stream of record, by name: the functions' are not its to read.
			jsAPI("CONSUMER.CREATE", RecordStream, RecallConsumer), jsAPI("CONSUMER.CREATE", RecordStream, RecallConsumer, ">"),
			jsAPI("CONSUMER.INFO", RecordStream, RecallConsumer), jsAPI("CONSUMER.MSG.NEXT", RecordStream, RecallConsumer),
			jsAPI("CONSUMER.DELETE", RecordStream, RecallConsumer),
			jsAPI("CONSUMER.CREATE", DeadLetterStream, ">"), jsAPI("CONSUMER.INFO", DeadLetterStream, "*"),
			jsAPI("CONSUMER.MSG.NEXT", DeadLetterStream, "*"), jsAPI("CONSUMER.DELETE", DeadLetterStream, "*"),
			jsAPI("STREAM.MSG.DELETE", DeadLetterStream), subjectRoot + ".redrive.*",
		}, streamInfo),
		Subscribe:      []string{SubjectResync, InboxPrefix(IdentityBridge) + ".>"},
		AllowResponses: true,
	}
}

// FunctionPermission is function's: consume its durable consumer (fetch, ack, its max-delivery
// advisories and the events they name), schedule its own retries, store its dead letters, and
// publish publishes, the subjects of its own work (entry: purge schedules and their reports).
func FunctionPermission(function string, publishes ...string) Permission {
	return Permission{
		Identity: function,
		Publish: slices.Concat([]string{
			jsAPI("CONSUMER.INFO", RecordStream, function),
			jsAPI("CONSUMER.MSG.NEXT", RecordStream, function),
			"$JS.ACK." + RecordStream + "." + function + ".>",
			jsAPI("STREAM.MSG.GET", RecordStream),
			RetryScheduleFilter(function),
			DeadLetterSubject(function),
		}, streamInfo, publishes),
		Subscribe: []string{
			"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + RecordStream + "." + function,
			InboxPrefix(function) + ".>",
		},
	}
}

// ForwardPermission is the forwarder's: what each of functions may do to consume its durable
// consumer (fetch, ack, retries, dead letters, max-delivery advisories), none of the functions'
// own work (no purge schedule, no result). One forwarder serves every function in HTTP mode.
func ForwardPermission(functions ...string) Permission {
	p := Permission{Identity: IdentityForward, Subscribe: []string{InboxPrefix(IdentityForward) + ".>"}}
	for _, fn := range functions {
		f := FunctionPermission(fn)
		for _, s := range f.Publish {
			if !slices.Contains(p.Publish, s) {
				p.Publish = append(p.Publish, s)
			}
		}
		for _, s := range f.Subscribe {
			if s != InboxPrefix(fn)+".>" {
				p.Subscribe = append(p.Subscribe, s)
			}
		}
	}
	return p
}

// SetupPermission is setup's: create and update the streams and the durable consumers on the
// stream of record. It publishes no event.
func SetupPermission() Permission {
	var publish []string
	for _, stream := range StreamNames {
		publish = append(publish, jsAPI("STREAM.CREATE", stream), jsAPI("STREAM.UPDATE", stream))
	}
	publish = append(publish, jsAPI("CONSUMER.CREATE", RecordStream, ">"), jsAPI("CONSUMER.INFO", RecordStream, "*"))
	return Permission{
		Identity:  IdentitySetup,
		Publish:   slices.Concat(publish, streamInfo),
		Subscribe: []string{InboxPrefix(IdentitySetup) + ".>"},
	}
}

// OperatorPermission is the operator CLI's: read the streams through ephemeral ordered
// consumers (replay, dead-letter listing, the audit), re-drive events to a function, delete
// re-driven dead letters, and ask the bridge for a resync. It cannot publish object events or
// fire schedules.
func OperatorPermission() Permission {
	var publish []string
	for _, stream := range StreamNames {
		publish = append(publish,
			jsAPI("CONSUMER.CREATE", stream, ">"), jsAPI("CONSUMER.INFO", stream, "*"),
			jsAPI("CONSUMER.MSG.NEXT", stream, "*"), jsAPI("CONSUMER.DELETE", stream, "*"),
			jsAPI("STREAM.MSG.GET", stream))
	}
	publish = append(publish, jsAPI("STREAM.MSG.DELETE", DeadLetterStream), subjectRoot+".redrive.*", SubjectResync)
	return Permission{
		Identity:  IdentityOperator,
		Publish:   slices.Concat(publish, streamInfo),
		Subscribe: []string{InboxPrefix(IdentityOperator) + ".>"},
	}
}
