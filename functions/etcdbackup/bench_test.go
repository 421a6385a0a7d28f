package etcdbackup_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/functions/etcdbackup"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/local"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/s3"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// BenchmarkSnapshot1GiB snapshots an etcd holding 1 GiB (1024 values of 1 MiB) into a local
// and an S3 (versitygw) destination and reports the peak Go heap and the peak RSS of this
// process while it streams: both stay at a few tens of MiB, not the database's size.
//
//	go test -run '^$' -bench Snapshot1GiB -benchtime 1x ./functions/etcdbackup/
func BenchmarkSnapshot1GiB(b *testing.B) {
	env := testenv.Start(b, testenv.WithKube(), testenv.WithS3())
	c := env.Client(b)
	createNamespaces(b, c, "garden", "team")
	etcd := testenv.StartEtcd(b, 0)
	fill(b, etcd.ClientURL, 1024, 1<<20)
	reg, _ := providers(b)
	snap := &etcdbackup.Snapshotter{Client: c, Providers: reg, Log: zap.NewNop(), Now: time.Now}

	for _, typ := range []string{local.Type, s3.Type} {
		b.Run(typ, func(b *testing.B) {
			ctx := context.Background()
			dest := newDestination(b, env, c, reg, typ, "bench-"+typ)
			cfg := newConfig("team", "bench-"+typ, dest.obj.Name, 1, etcd.ClientURL)
			if err := c.Create(ctx, cfg); err != nil {
				b.Fatal(err)
			}
			base := time.Now().Truncate(time.Second)
			goruntime.GC()
			resetPeakRSS(b)
			stopSampling, peakHeap := sampleHeap()
			b.ResetTimer()
			for i := range b.N {
				fctx := runner.WithFire(ctx, runner.Fire{At: base.Add(time.Duration(i) * time.Second)})
				if err := snap.Handle(fctx, dueEvent(b, cfg)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			stopSampling()
			live, cond := condition(b, c, cfg, backupv1alpha1.ConditionBackupSucceeded)
			if cond == nil || cond.Status != "True" || live.Status.LastBackup == nil {
				b.Fatalf("no backup: %+v", cond)
			}
			size := live.Status.LastBackup.Size
			b.SetBytes(size)
			b.ReportMetric(float64(size)/(1<<20), "snapshot-MiB")
			b.ReportMetric(float64(peakHeap())/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(peakRSS(b))/(1<<20), "peak-RSS-MiB")
			b.Logf("%s: %d MiB snapshot in %s; peak heap %d MiB, peak RSS %d MiB", typ, size>>20,
				live.Status.LastBackup.Duration.Duration, peakHeap()>>20, peakRSS(b)>>20)
		})
	}
}

// fill writes n values of size bytes, a few at a time.
func fill(b *testing.B, endpoint string, n, size int) {
	b.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	start := time.Now()
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(4)
	for i := range n {
		g.Go(func() error {
			v := make([]byte, size)
			_, _ = rand.Read(v)
			_, err := cli.Put(ctx, fmt.Sprintf("/registry/blobs/%05d", i), string(v))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	b.Logf("etcd filled with %d MiB in %s", n*size>>20, time.Since(start).Round(time.Second))
}

// sampleHeap records the largest heap in use until stopped.
func sampleHeap() (stop func(), peak func() uint64) {
	var max atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var m goruntime.MemStats
		for {
			goruntime.ReadMemStats(&m)
			if m.HeapInuse > max.Load() {
				max.Store(m.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	return func() { close(done); wg.Wait() }, max.Load
}

// resetPeakRSS resets the kernel's high-water mark of this process's RSS (VmHWM).
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("cannot reset the peak RSS (%v): it includes the set-up", err)
	}
}

// peakRSS is VmHWM from /proc/self/status, in bytes.
func peakRSS(b *testing.B) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}
