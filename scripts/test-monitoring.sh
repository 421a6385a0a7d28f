#!/usr/bin/env bash
# Judges the monitoring the chart ships to a seed with Prometheus's own code: runs the tests of
# test/monitoring, a Go module of its own (Prometheus's dependencies never enter housekeeper's
# go.mod). It renders the chart as gardenlet does, runs housekeeper-bridge and the bucket, entry,
# purge, drill and copy functions (built from this checkout with -race, as `go test -race` built
# their packages just before) on kube-apiserver and nats-server, scrapes their /metrics into a
# Prometheus TSDB labelled as the PodMonitor labels them, and evaluates every alert of the
# PrometheusRule and every query of the dashboard with Prometheus's parser, engine and rules.
#
# Cost, measured on 2 cores shared with other builds (2026-11-27): warm, about 45 s (the test
# itself about 39 s, most of it processes starting and the purge's 20 s retention). With -race
# the test binary shares the packages `go test -race ./...` compiled just before: compiling it then
# took 59 s (Prometheus's packages); from an empty build cache it takes about 6 minutes. Its
# modules beyond housekeeper's and test/knative's (Prometheus's, about 55 MB) download in `make
# tools`.
#
#   scripts/test-monitoring.sh           # go test ./... in test/monitoring
#   scripts/test-monitoring.sh -v        # arguments go to go test
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../test/monitoring"
exec ${GO:-go} test -race -count=1 -mod=readonly -timeout 20m "$@" ./...
