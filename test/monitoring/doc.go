// Package monitoring judges the monitoring the chart ships to a seed with Prometheus's own code:
// every alert of the PrometheusRule and every query of the Plutono dashboard is parsed by
// Prometheus's PromQL parser and evaluated by its engine and rule code against metrics scraped
// from the running processes (housekeeper-bridge and the bucket, entry, purge and drill functions,
// built from this checkout, on a kube-apiserver and a nats-server), labelled as the chart's
// PodMonitor labels them in a seed. A selector no process exports fails the test, and the
// dead-letter and overdue-purge alerts are driven to firing and back by what an operator and the
// functions do, the no-restorable-backup alert by a RestoreDrill's status counting an entry stale
// (the bridge exports it while no drill runs) and the drill's deletion, the drill-failed alert by
// a real drill of a backup whose full snapshot is cut short and the drill's deletion.
//
// It is a Go module of its own, like test/keda and test/knative: Prometheus's dependencies never
// enter housekeeper's go.mod. `make test` runs it with -race (scripts/test-monitoring.sh, which
// has its cost); `make tools` downloads its modules beforehand. The seed's Prometheus is modelled,
// not run: samples are appended to a TSDB on a clock of the test's own (a scrape is a step after
// the last, never before the real time; a series gone gets Prometheus's staleness marker), so
// "the state held for 75 minutes" takes no real time.
package monitoring
