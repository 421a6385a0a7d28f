package entry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/housekeeper-dev/housekeeper/functions/entry"
	"github.com/housekeeper-dev/housekeeper/functions/kube"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore"
	"github.com/housekeeper-dev/housekeeper/functions/objectstore/azure"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv/pipeline"
)

// slowProvider wraps a provider so that deletes go 100 keys at a time with a pause between.
type slowProvider struct{ objectstore.Provider }

func (p slowProvider) Open(bucket string, credentials map[string][]byte) (objectstore.Store, error) {
	s, err := p.Provider.Open(bucket, credentials)
	return slowStore{s}, err
}

type slowStore struct{ objectstore.Store }

func (s slowStore) DeleteKeys(ctx context.Context, keys []string) (map[string]error, error) {
	failed := map[string]error{}
	for len(keys) > 0 {
		n := min(100, len(keys))
		f, err := s.Store.DeleteKeys(ctx, keys[:n])
		if err != nil {
			return nil, err
		}
		for k, e := range f {
			failed[k] = e
		}
		keys = keys[n:]
		time.Sleep(150 * time.Millisecond)
	}
	return failed, nil
}

func runSlowPurge(t *testing.T, setting string) {
	kubeconfig, natsURL, _ := strings.Cut(setting, ",")
	cfg, err := kube.Options{Kubeconfig: kubeconfig, QPS: kube.DefaultQPS, Burst: kube.DefaultBurst}.Config()
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	fn, err := entry.PurgeDefinition.Build(context.Background(), runner.Deps{Client: c, JetStream: js,
		Stores: objectstore.NewRegistry(slowProvider{azure.New()}), Cluster: pipeline.Cluster, Log: zaptest.NewLogger(t)}, "--types=azure")
	if err != nil {
		t.Fatal(err)
	}
	w, err := runner.NewWorker(js, fn, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Run(context.Background()) // until killed
}
