package config

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestFlagsWinOverEnvironmentWhichWinsOverDefaults(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	url := fs.String("nats-url", "nats://default", "")
	cluster := fs.String("cluster", "", "")
	resync := fs.Duration("resync-period", time.Minute, "")
	var types List
	fs.Var(&types, "types", "")
	env := map[string]string{
		"HOUSEKEEPER_NATS_URL":      "nats://env",
		"HOUSEKEEPER_CLUSTER":       "seed-env",
		"HOUSEKEEPER_TYPES":         "azure, local",
		"HOUSEKEEPER_RESYNC_PERIOD": "2m",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := parse(fs, []string{"--cluster", "seed-flag"}, lookup); err != nil {
		t.Fatal(err)
	}
	if *cluster != "seed-flag" || *url != "nats://env" || *resync != 2*time.Minute || strings.Join(types, "|") != "azure|local" {
		t.Errorf("got cluster=%s url=%s resync=%s types=%v", *cluster, *url, *resync, types)
	}
}

func TestBadEnvironmentValueNamesTheVariable(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.Duration("resync-period", time.Minute, "")
	err := parse(fs, nil, func(string) (string, bool) { return "soon", true })
	if err == nil || !strings.Contains(err.Error(), "HOUSEKEEPER_RESYNC_PERIOD") {
		t.Errorf("got %v, want an error naming HOUSEKEEPER_RESYNC_PERIOD", err)
	}
}
