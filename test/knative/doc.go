// Package knative judges housekeeper's chart in knative mode (infra/chart, mode: knative) with
// Knative Serving's own code, since Knative cannot be run on the test node (see
// scripts/test-knative.sh): every Knative Service the chart renders goes through Knative's
// defaulting and validation admission controllers as Knative's webhook builds them (its config
// store, fed by Knative's released config-features, config-defaults and config-autoscaler), and
// what Knative's controllers derive from the admitted Service (the Revision, its Deployment and
// PodAutoscaler, the autoscaler's decisions) is checked against what the chart's forwarder and
// NetworkPolicies assume.
//
// It is a module of its own (test/knative/go.mod) so that Knative's dependencies never enter
// housekeeper's; it renders the chart from this tree (replace ../..). Run it with
//
//	scripts/test-knative.sh
package knative
