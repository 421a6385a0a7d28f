package runner

import (
	"context"
	"fmt"
	"slices"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/housekeeper-dev/housekeeper/events"
)

// Handler handles one event. It must be idempotent and level-triggered: re-read the live
// state and converge, so a duplicated, old or replayed event changes nothing more.
type Handler interface {
	Handle(ctx context.Context, e cloudevents.Event) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, e cloudevents.Event) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, e cloudevents.Event) error { return f(ctx, e) }

// Function is a named handler and the event types it takes.
type Function struct {
	// Name names the durable consumer, the dead-letter subject and the redrive subject.
	Name    string
	Types   []string
	Handler Handler
}

// Validate checks the definition.
func (f Function) Validate() error {
	if f.Handler == nil {
		return fmt.Errorf("function %q: a handler is required", f.Name)
	}
	return f.validateTypes()
}

// validateTypes checks what names and filters the function's consumer.
func (f Function) validateTypes() error {
	if f.Name == "" || len(f.Types) == 0 {
		return fmt.Errorf("function %q: a name and at least one event type are required", f.Name)
	}
	for _, t := range f.Types {
		if !events.IsKnownType(t) {
			return fmt.Errorf("function %s: %w %q", f.Name, events.ErrUnknownType, t)
		}
	}
	return nil
}

// FilterSubjects are the subjects the function's consumer reads: its event types and its
// redrive subject.
func (f Function) FilterSubjects() []string {
	subjects := make([]string, 0, len(f.Types)+1)
	for _, t := range f.Types {
		s, _ := events.SubjectFilter(t)
		subjects = append(subjects, s)
	}
	return append(subjects, events.RedriveSubject(f.Name))
}

// accepts reports whether the function takes events of type t.
func (f Function) accepts(t string) bool { return slices.Contains(f.Types, t) }
