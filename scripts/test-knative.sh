#!/usr/bin/env bash
# Judges the chart's knative mode with Knative Serving's own code: runs the tests of test/knative,
# a Go module of its own (Knative's dependencies never enter housekeeper's go.mod) that renders
# infra/chart in knative mode and sends every Knative Service through Knative's defaulting and
# validation webhook (with Knative's released config-features, config-defaults and
# config-autoscaler), then checks what Knative's controllers and autoscaler make of them against
# the forwarder and the NetworkPolicies.
#
# Knative itself is not run: its controller, activator, autoscaler and webhook at
# knative.dev/serving v0.51.0 cannot be built from the module proxy as released (the
# knative.dev/pkg, networking, caching and hack versions they require are refused, 403), and
# Traefik v3.7.13, the networking layer, cannot be built from it at all (test/knative/go.mod and
# test/knative/doc.go say more).
#
# The first run downloads Knative's modules (about 530 MB of module cache with the chart's own
# dependencies) and compiles them: about 5 minutes on 2 cores shared with other builds; then
# about 10 s (the tests themselves take under a second).
#
#   scripts/test-knative.sh               # go test ./... in test/knative
#   scripts/test-knative.sh -run Admits -v   # arguments go to go test
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../test/knative"
exec ${GO:-go} test -count=1 -mod=readonly "$@" ./...
