// Package bench holds the burst benchmarks: upstream provider-local's BackupEntry controllers
// and housekeeper (bridge and functions as processes), side by side on one kube-apiserver, under
// the same client limits, driven as gardenlet drives an extension. They print markdown tables;
// run them with
//
//	go test -run '^$' -bench . -benchtime 1x -timeout 90m ./test/bench/
//
// BenchmarkBurst compares the implementations on 500 entries; BenchmarkBurst5000 lets
// housekeeper converge 5,000 entries. BenchmarkAtRest compares what each costs at rest with
// 5,000 entries and 10,000 unrelated secrets on the server — cold starts by phase, a purge woken
// from zero by KEDA's own scaler, the idle footprint of every always-on process, and the latency
// of one change at a time — against upstream's controllers as a process (test/bench/upstream).
// BenchmarkRestart measures, with 5,000 settled entries, what a bridge restart and a leader
// change cause — API requests, function runs, the time until quiet — beside upstream's
// controllers restarted. The code is in the package's _test.go files.
package bench
