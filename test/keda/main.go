// Command kedascaler is KEDA's own nats-jetstream scaler, built from the KEDA module, judging
// housekeeper's ScaledObjects: it reads ScaledObjects (YAML documents, as the chart renders
// them), validates each as KEDA's admission webhook does (strict fields, replica bounds,
// fallback, triggers), builds the scaler from each nats-jetstream trigger's metadata, asks it
// once for the lag and the activity, as KEDA's operator does each polling interval, and prints
// one JSON line per trigger.
//
// It is a module of its own (test/keda/go.mod) so that KEDA's dependencies never enter
// housekeeper's; test/autoscaling builds and runs it against the real stack.
//
//	kedascaler -f scaledobjects.yaml
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"github.com/kedacore/keda/v2/pkg/scalers"
	"github.com/kedacore/keda/v2/pkg/scalers/scalersconfig"
	"sigs.k8s.io/yaml"
)

// Reading is what the scaler said of one trigger.
type Reading struct {
	ScaledObject string `json:"scaledObject"`
	Consumer     string `json:"consumer"`
	Active       bool   `json:"active"`
	Lag          int64  `json:"lag"`
	// Error is the scaler's error: KEDA would count a failure towards the fallback.
	Error string `json:"error,omitempty"`
}

func main() {
	file := flag.String("f", "", "the ScaledObjects, YAML documents separated by ---")
	timeout := flag.Duration("http-timeout", 3*time.Second, "KEDA's global HTTP timeout (KEDA_HTTP_DEFAULT_TIMEOUT)")
	flag.Parse()
	if err := run(*file, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "kedascaler:", err)
		os.Exit(1)
	}
}

func run(file string, timeout time.Duration) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	objects, err := parse(data)
	if err != nil {
		return err
	}
	if len(objects) == 0 {
		return fmt.Errorf("%s holds no ScaledObject", file)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, so := range objects {
		for i, trigger := range so.Spec.Triggers {
			if trigger.Type != "nats-jetstream" {
				continue
			}
			r := read(so, i, trigger, timeout)
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// parse decodes and validates the ScaledObjects in data.
func parse(data []byte) ([]*kedav1alpha1.ScaledObject, error) {
	var out []*kedav1alpha1.ScaledObject
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		so := &kedav1alpha1.ScaledObject{}
		if err := yaml.UnmarshalStrict(doc, so); err != nil {
			return nil, fmt.Errorf("not a ScaledObject as KEDA reads it: %w\n%s", err, doc)
		}
		if so.Kind != "ScaledObject" || so.APIVersion != kedav1alpha1.SchemeGroupVersion.String() {
			return nil, fmt.Errorf("%s %s/%s is not a %s ScaledObject", so.Kind, so.APIVersion, so.Name, kedav1alpha1.SchemeGroupVersion)
		}
		if err := errors.Join(kedav1alpha1.CheckReplicaCountBoundsAreValid(so), kedav1alpha1.CheckFallbackValid(so), kedav1alpha1.ValidateTriggers(so.Spec.Triggers)); err != nil {
			return nil, fmt.Errorf("ScaledObject %s: %w", so.Name, err)
		}
		out = append(out, so)
	}
	return out, nil
}

// read builds the scaler for trigger i of so and polls it once. Like KEDA's scalers cache, a
// failed poll rebuilds the scaler and polls once more (a cached consumer leader may be gone).
func read(so *kedav1alpha1.ScaledObject, i int, trigger kedav1alpha1.ScaleTriggers, timeout time.Duration) Reading {
	r := Reading{ScaledObject: so.Name, Consumer: trigger.Metadata["consumer"]}
	var err error
	for range 2 {
		var active bool
		var lag int64
		if active, lag, err = poll(so, i, trigger, timeout); err == nil {
			r.Active, r.Lag = active, lag
			return r
		}
	}
	r.Error = err.Error()
	return r
}

func poll(so *kedav1alpha1.ScaledObject, i int, trigger kedav1alpha1.ScaleTriggers, timeout time.Duration) (bool, int64, error) {
	scaler, err := scalers.NewNATSJetStreamScaler(&scalersconfig.ScalerConfig{
		ScalableObjectName:      so.Name,
		ScalableObjectNamespace: so.Namespace,
		ScalableObjectType:      "ScaledObject",
		GlobalHTTPTimeout:       timeout,
		TriggerName:             trigger.Name,
		TriggerType:             trigger.Type,
		TriggerMetadata:         trigger.Metadata,
		TriggerIndex:            i,
		MetricType:              trigger.MetricType,
	})
	if err != nil {
		return false, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*timeout)
	defer cancel()
	defer scaler.Close(ctx)
	specs := scaler.GetMetricSpecForScaling(ctx)
	if len(specs) != 1 || specs[0].External == nil {
		return false, 0, fmt.Errorf("the scaler offers %d metrics, not one external metric", len(specs))
	}
	name := specs[0].External.Metric.Name
	metrics, active, err := scaler.GetMetricsAndActivity(ctx, name)
	if err != nil {
		return false, 0, err
	}
	if len(metrics) != 1 || !strings.EqualFold(metrics[0].MetricName, name) {
		return false, 0, fmt.Errorf("the scaler returned %d values for metric %s", len(metrics), name)
	}
	return active, metrics[0].Value.Value(), nil
}
