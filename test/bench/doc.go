// Package bench holds the burst benchmarks: upstream provider-local's BackupEntry controllers
// and housekeeper (bridge and functions as processes), side by side on one kube-apiserver, under
// the same client limits, driven as gardenlet drives an extension. They print markdown tables;
// run them with
//
//	go test -run '^$' -bench . -benchtime 1x -timeout 90m ./test/bench/
//
// BenchmarkBurst compares the implementations on 500 entries; BenchmarkBurst5000 lets
// housekeeper converge 5,000 entries. The code is in the package's _test.go files.
package bench
