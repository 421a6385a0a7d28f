package testenv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/housekeeper-dev/housekeeper/scripts/stack"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// NATS keeps its streams across a stop and start on the same URL, which the outage tests need.
func TestNATSSurvivesRestart(t *testing.T) {
	env := testenv.Start(t, testenv.WithNATS())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	publish := func(data string) {
		nc, err := nats.Connect(env.NATS.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "probe", Subjects: []string{"probe.>"}, Storage: jetstream.FileStorage}); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, "probe.one", []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	publish("before")
	url := env.NATS.URL
	env.NATS.Stop()
	if err := env.NATS.Start(); err != nil {
		t.Fatal(err)
	}
	if env.NATS.URL != url {
		t.Fatalf("restart moved nats-server from %s to %s", url, env.NATS.URL)
	}
	publish("after")

	nc, err := nats.Connect(env.NATS.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := js.Stream(ctx, "probe")
	if err != nil {
		t.Fatal(err)
	}
	if n := stream.CachedInfo().State.Msgs; n != 2 {
		t.Errorf("stream holds %d messages after restart, want 2", n)
	}
}

func TestAzuriteServesBlobs(t *testing.T) {
	env := testenv.Start(t, testenv.WithAzurite())
	ctx := context.Background()
	cred, err := azblob.NewSharedKeyCredential(stack.AzuriteAccount, stack.AzuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := azblob.NewClientWithSharedKeyCredential(env.Azurite.Endpoint, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateContainer(ctx, "probe", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadBuffer(ctx, "probe", "shoot--a--b/etcd-main/Full-1", []byte("snapshot"), nil); err != nil {
		t.Fatal(err)
	}
	pager := c.NewListBlobsFlatPager("probe", nil)
	page, err := pager.NextPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Segment.BlobItems) != 1 || !strings.HasPrefix(*page.Segment.BlobItems[0].Name, "shoot--a--b/") {
		t.Errorf("listed %d blobs, want the one uploaded", len(page.Segment.BlobItems))
	}
}
