package garden

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	resourcesv1alpha1 "github.com/gardener/gardener/pkg/apis/resources/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ConditionOf is the condition of the type, nil if there is none.
func ConditionOf(conditions []gardencorev1beta1.Condition, typ gardencorev1beta1.ConditionType) *gardencorev1beta1.Condition {
	for i := range conditions {
		if conditions[i].Type == typ {
			return &conditions[i]
		}
	}
	return nil
}

// ExpectCondition checks a condition's status and reason, and that its message contains
// message.
func ExpectCondition(conditions []gardencorev1beta1.Condition, typ gardencorev1beta1.ConditionType, status gardencorev1beta1.ConditionStatus, reason, message string) error {
	c := ConditionOf(conditions, typ)
	if c == nil {
		return fmt.Errorf("no condition %s", typ)
	}
	if c.Status != status || c.Reason != reason || !strings.Contains(c.Message, message) {
		return fmt.Errorf("%s=%s/%s %q, want %s/%s containing %q", typ, c.Status, c.Reason, c.Message, status, reason, message)
	}
	return nil
}

// DescribeConditions is "Type=Status/Reason" for each condition (of the types only, if any
// are given), with the message if asked.
func DescribeConditions(conditions []gardencorev1beta1.Condition, messages bool, only ...gardencorev1beta1.ConditionType) string {
	var out []string
	for _, c := range conditions {
		if len(only) > 0 && !slices.Contains(only, c.Type) {
			continue
		}
		s := fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason)
		if messages {
			s += fmt.Sprintf(" %q", c.Message)
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// A ConditionRecorder records every distinct state of one object's conditions that a watch
// delivers: states that last only milliseconds too.
type ConditionRecorder struct {
	mu     sync.Mutex
	seen   []string
	cancel context.CancelFunc
	done   chan struct{}
}

// RecordConditions watches the object key of the list's kind (a ManagedResourceList or a
// ControllerInstallationList) and records the states of the condition types given, as
// DescribeConditions describes them without messages, until Stop.
func RecordConditions(cfg *rest.Config, scheme *runtime.Scheme, list client.ObjectList, key client.ObjectKey, types ...gardencorev1beta1.ConditionType) (*ConditionRecorder, error) {
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	opts := []client.ListOption{client.MatchingFields{"metadata.name": key.Name}}
	if key.Namespace != "" {
		opts = append(opts, client.InNamespace(key.Namespace))
	}
	watcher, err := wc.Watch(ctx, list, opts...)
	if err != nil {
		cancel()
		return nil, err
	}
	r := &ConditionRecorder{cancel: func() { watcher.Stop(); cancel() }, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ev := range watcher.ResultChan() {
			var conditions []gardencorev1beta1.Condition
			switch o := ev.Object.(type) {
			case *resourcesv1alpha1.ManagedResource:
				conditions = o.Status.Conditions
			case *gardencorev1beta1.ControllerInstallation:
				conditions = o.Status.Conditions
			default:
				continue
			}
			s := DescribeConditions(conditions, false, types...)
			r.mu.Lock()
			if len(r.seen) == 0 || r.seen[len(r.seen)-1] != s {
				r.seen = append(r.seen, s)
			}
			r.mu.Unlock()
		}
	}()
	return r, nil
}

// Stop ends the watch and returns the states seen, in order; again, the same.
func (r *ConditionRecorder) Stop() []string {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// An Installation is a ControllerInstallation as an operator reads it: its ManagedResource
// garden/<Name> in the seed, and itself in the garden.
type Installation struct {
	Name string
	// Seed is a client of the seed's API with a scheme that knows ManagedResources; Garden one of
	// the garden's with the garden's scheme.
	Seed, Garden client.Client
}

// ManagedResourceKey is the installation's ManagedResource in the seed.
func (i Installation) ManagedResourceKey() client.ObjectKey {
	return client.ObjectKey{Namespace: Namespace, Name: i.Name}
}

// ManagedResource reads the installation's ManagedResource and returns it with check's verdict,
// which names the ManagedResource's conditions.
func (i Installation) ManagedResource(ctx context.Context, check func(*resourcesv1alpha1.ManagedResource) error) (*resourcesv1alpha1.ManagedResource, error) {
	mr := &resourcesv1alpha1.ManagedResource{}
	if err := i.Seed.Get(ctx, i.ManagedResourceKey(), mr); err != nil {
		return nil, err
	}
	if err := check(mr); err != nil {
		return mr, fmt.Errorf("%v (conditions: %s)", err, DescribeConditions(mr.Status.Conditions, true))
	}
	return mr, nil
}

// ControllerInstallation reads the ControllerInstallation and returns it with check's verdict,
// which names its conditions.
func (i Installation) ControllerInstallation(ctx context.Context, check func(*gardencorev1beta1.ControllerInstallation) error) (*gardencorev1beta1.ControllerInstallation, error) {
	ci := &gardencorev1beta1.ControllerInstallation{}
	if err := i.Garden.Get(ctx, client.ObjectKey{Name: i.Name}, ci); err != nil {
		return nil, err
	}
	if err := check(ci); err != nil {
		return ci, fmt.Errorf("%v (conditions: %s)", err, DescribeConditions(ci.Status.Conditions, true))
	}
	return ci, nil
}
