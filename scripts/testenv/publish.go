package testenv

import (
	"fmt"
	"reflect"

	"github.com/nats-io/nats.go/jetstream"
)

// PublishHeaders applies opts as jetstream's PublishMsg does and returns the schedule headers
// they make. The options' target type is unexported: it is reached by reflection, so a
// renamed field in a new nats.go fails here, loudly.
func PublishHeaders(opts []jetstream.PublishOpt) map[string]string {
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
