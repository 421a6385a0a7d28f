package testenv

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Published is a message as jetstream's PublishMsg sends it to the server: a fake JetStream's
// record of one call.
type Published struct {
	Subject string
	Header  nats.Header
	Data    []byte
}

// AsPublished is msg as PublishMsg with opts would send it: a copy, with the schedule headers
// the options make.
func AsPublished(msg *nats.Msg, opts []jetstream.PublishOpt) Published {
	h := nats.Header{}
	maps.Copy(h, msg.Header)
	for k, v := range publishHeaders(opts) {
		h.Set(k, v)
	}
	return Published{Subject: msg.Subject, Header: h, Data: slices.Clone(msg.Data)}
}

// publishHeaders applies opts as jetstream's PublishMsg does and returns the schedule headers
// they make. The options' target type is unexported: it is reached by reflection, so a
// renamed field in a new nats.go fails here, loudly.
func publishHeaders(opts []jetstream.PublishOpt) map[string]string {
	if len(opts) == 0 {
		return nil
	}
	o := reflect.New(reflect.TypeOf(opts[0]).In(0).Elem())
	for _, opt := range opts {
		if out := reflect.ValueOf(opt).Call([]reflect.Value{o}); !out[0].IsNil() {
			panic(fmt.Sprintf("publish option: %v", out[0].Interface()))
		}
	}
	fields := map[string]string{
		"schedule": jetstream.ScheduleHeader, "scheduleTarget": jetstream.ScheduleTargetHeader,
		"scheduleTTL": jetstream.ScheduleTTLHeader, "scheduleTZ": jetstream.ScheduleTimeZoneHeader,
	}
	h := map[string]string{}
	for field, header := range fields {
		f := o.Elem().FieldByName(field)
		if !f.IsValid() {
			panic("nats.go's publish options have no field " + field)
		}
		if v := f.String(); v != "" {
			h[header] = v
		}
	}
	return h
}
