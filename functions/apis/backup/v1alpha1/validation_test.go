package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The generated CRDs, served by a real kube-apiserver: defaults, OpenAPI bounds and the CEL
// rules — above all that a config's destination cannot change once set, and that a
// RestoreDrill chooses its entries at most one way, drills something, and is refused, in words,
// what it cannot run.
func TestValidationOnAPIServer(t *testing.T) {
	env := testenv.Start(t, testenv.WithKube())
	c := env.Client(t)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}); err != nil {
		t.Fatal(err)
	}

	dest := func(name, typ string, mutate func(*backupv1alpha1.BackupDestinationSpec)) *backupv1alpha1.BackupDestination {
		d := &backupv1alpha1.BackupDestination{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: backupv1alpha1.BackupDestinationSpec{Type: typ, Bucket: "etcd-backups",
				CredentialsSecretRef: &backupv1alpha1.SecretReference{Name: "creds", Namespace: "garden"}}}
		if mutate != nil {
			mutate(&d.Spec)
		}
		return d
	}
	for _, d := range []*backupv1alpha1.BackupDestination{
		dest("azure-a", "azure", nil),
		dest("s3-a", "aws", func(s *backupv1alpha1.BackupDestinationSpec) {
			s.Region = "eu-west-1"
			s.Endpoint = "http://127.0.0.1:9000"
		}),
		dest("local-a", "local", func(s *backupv1alpha1.BackupDestinationSpec) { s.CredentialsSecretRef = nil }),
		dest("gcs-a", "gcp", func(s *backupv1alpha1.BackupDestinationSpec) { s.Endpoint = "http://127.0.0.1:4443" }),
		dest("swift-a", "openstack", func(s *backupv1alpha1.BackupDestinationSpec) { s.Region = "RegionOne" }),
	} {
		if err := c.Create(ctx, d); err != nil {
			t.Fatalf("creating BackupDestination %s: %v", d.Name, err)
		}
	}
	rejected := func(t *testing.T, err error, want string) {
		t.Helper()
		if !apierrors.IsInvalid(err) {
			t.Fatalf("want Invalid (%q), got %v", want, err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("want a message with %q, got %v", want, err)
		}
	}
	rejected(t, c.Create(ctx, dest("azure-b", "azure", func(s *backupv1alpha1.BackupDestinationSpec) { s.CredentialsSecretRef = nil })),
		"credentialsSecretRef is required")
	rejected(t, c.Create(ctx, dest("gcs", "gcs", nil)), "Unsupported value")
	rejected(t, c.Create(ctx, dest("bad-bucket", "azure", func(s *backupv1alpha1.BackupDestinationSpec) { s.Bucket = "Etcd_Backups" })), "spec.bucket")
	rejected(t, c.Create(ctx, dest("azure-region", "azure", func(s *backupv1alpha1.BackupDestinationSpec) { s.Region = "westeurope" })), "region is only for types aws and openstack")
	rejected(t, c.Create(ctx, dest("gcs-region", "gcp", func(s *backupv1alpha1.BackupDestinationSpec) { s.Region = "europe-west1" })), "region is only for types aws and openstack")
	for _, typ := range []string{"gcp", "openstack"} {
		rejected(t, c.Create(ctx, dest(typ+"-b", typ, func(s *backupv1alpha1.BackupDestinationSpec) { s.CredentialsSecretRef = nil })),
			"credentialsSecretRef is required for every type but local")
	}
	rejected(t, c.Create(ctx, dest("swift-endpoint", "openstack", func(s *backupv1alpha1.BackupDestinationSpec) { s.Endpoint = "https://swift.example.com" })),
		"endpoint is not for type openstack")

	config := func(name string, mutate func(*backupv1alpha1.EtcdBackupConfigSpec)) *backupv1alpha1.EtcdBackupConfig {
		cfg := &backupv1alpha1.EtcdBackupConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name},
			Spec: backupv1alpha1.EtcdBackupConfigSpec{
				Etcd:        backupv1alpha1.EtcdReference{Endpoints: []string{"https://etcd-main:2379"}, TLSSecretRef: &backupv1alpha1.LocalObjectReference{Name: "etcd-client"}},
				Schedule:    "0 */5 * * * *",
				Destination: "azure-a",
			}}
		if mutate != nil {
			mutate(&cfg.Spec)
		}
		return cfg
	}

	t.Run("keep defaults to 20", func(t *testing.T) {
		cfg := config("defaults", nil)
		if err := c.Create(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.Spec.Keep != backupv1alpha1.DefaultKeep {
			t.Fatalf("keep = %d, want the default %d", cfg.Spec.Keep, backupv1alpha1.DefaultKeep)
		}
	})
	t.Run("admission rejects what it can", func(t *testing.T) {
		rejected(t, c.Create(ctx, config("keep-zero", func(s *backupv1alpha1.EtcdBackupConfigSpec) { s.Keep = -1 })), "spec.keep")
		// A crontab line is the likely mistake: the message says what is wrong in words.
		rejected(t, c.Create(ctx, config("five-fields", func(s *backupv1alpha1.EtcdBackupConfigSpec) { s.Schedule = "*/5 * * * *" })),
			"schedule */5 * * * * is not 6 cron fields with seconds first")
		rejected(t, c.Create(ctx, config("no-endpoints", func(s *backupv1alpha1.EtcdBackupConfigSpec) { s.Etcd.Endpoints = nil })), "spec.etcd.endpoints")
		rejected(t, c.Create(ctx, config("not-a-url", func(s *backupv1alpha1.EtcdBackupConfigSpec) { s.Etcd.Endpoints = []string{"etcd:2379"} })), "spec.etcd.endpoints[0]")
		rejected(t, c.Create(ctx, config("no-destination", func(s *backupv1alpha1.EtcdBackupConfigSpec) { s.Destination = "" })), "spec.destination")
		rejected(t, c.Create(ctx, config("tz-once", func(s *backupv1alpha1.EtcdBackupConfigSpec) { s.Schedule = ""; s.TimeZone = "Europe/Berlin" })),
			"timeZone needs a cron schedule")
		for _, ok := range []string{"", "@hourly", "@every 30s", "* * * * * *", "0 30 2 * * MON-FRI"} {
			cfg := config("ok-"+strings.NewReplacer("@", "", " ", "", "*", "x", "-", "").Replace(strings.ToLower(ok))+"x", func(s *backupv1alpha1.EtcdBackupConfigSpec) { s.Schedule = ok })
			if err := c.Create(ctx, cfg); err != nil {
				t.Errorf("schedule %q: %v", ok, err)
			}
		}
	})
	t.Run("keep below 1 is rejected", func(t *testing.T) {
		// 0 is the unset value Go omits, so the default applies; an explicit 0 is refused.
		cfg := config("explicit-zero", nil)
		if err := c.Create(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		patch := []byte(`{"spec":{"keep":0}}`)
		rejected(t, c.Patch(ctx, cfg, client.RawPatch("application/merge-patch+json", patch)), "spec.keep")
	})
	t.Run("destination is immutable", func(t *testing.T) {
		cfg := config("immutable", nil)
		if err := c.Create(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		base := cfg.DeepCopy()
		cfg.Spec.Destination = "s3-a"
		rejected(t, c.Patch(ctx, cfg, client.MergeFrom(base)), "destination is immutable")
		// Everything else may change.
		cfg.Spec.Destination = base.Spec.Destination
		cfg.Spec.Keep, cfg.Spec.Schedule, cfg.Spec.TimeZone = 3, "0 0 3 * * *", "Europe/Berlin"
		if err := c.Patch(ctx, cfg, client.MergeFrom(base)); err != nil {
			t.Fatalf("changing keep, schedule and time zone: %v", err)
		}
		// So may the status.
		cfg.Status.ObservedGeneration = cfg.Generation
		if err := c.Status().Update(ctx, cfg); err != nil {
			t.Fatalf("status: %v", err)
		}
	})

	drill := func(name string, mutate func(*backupv1alpha1.RestoreDrillSpec)) *backupv1alpha1.RestoreDrill {
		d := &backupv1alpha1.RestoreDrill{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: backupv1alpha1.RestoreDrillSpec{All: true, Schedule: "0 0 3 * * *"}}
		if mutate != nil {
			mutate(&d.Spec)
		}
		return d
	}
	duration := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	quantity := func(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
	const (
		atMostOne = "choose the BackupEntries to drill with at most one of selector, purposes or all: true"
		nothing   = "nothing to drill: choose BackupEntries with one of selector, purposes or all: true, EtcdBackupConfigs with configs, or both"
	)

	t.Run("a RestoreDrill's defaults", func(t *testing.T) {
		d := drill("drill-defaults", nil)
		if err := c.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		s := d.Spec
		if s.Concurrency != backupv1alpha1.DefaultDrillConcurrency || s.MemoryBudget == nil || s.MemoryBudget.Cmp(resource.MustParse(backupv1alpha1.DefaultDrillMemoryBudget)) != 0 ||
			s.MaxRestorableAge == nil || s.MaxRestorableAge.Duration != backupv1alpha1.DefaultMaxRestorableAge ||
			s.Timeout == nil || s.Timeout.Duration != backupv1alpha1.DefaultDrillTimeout {
			t.Fatalf("spec %+v (memoryBudget %v, maxRestorableAge %v, timeout %v), want concurrency %d, memoryBudget %s, maxRestorableAge %s, timeout %s",
				s, s.MemoryBudget, s.MaxRestorableAge, s.Timeout, backupv1alpha1.DefaultDrillConcurrency, backupv1alpha1.DefaultDrillMemoryBudget,
				backupv1alpha1.DefaultMaxRestorableAge, backupv1alpha1.DefaultDrillTimeout)
		}
	})
	t.Run("a RestoreDrill chooses its entries at most one way, and something to drill", func(t *testing.T) {
		for name, spec := range map[string]func(*backupv1alpha1.RestoreDrillSpec){
			"drill-selector": func(s *backupv1alpha1.RestoreDrillSpec) {
				s.All, s.Selector = false, &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
			},
			"drill-purposes": func(s *backupv1alpha1.RestoreDrillSpec) {
				s.All, s.Purposes = false, []string{"production", "infrastructure"}
			},
			"drill-every-config": func(s *backupv1alpha1.RestoreDrillSpec) {
				s.All, s.Configs = false, &backupv1alpha1.ConfigSelection{}
			},
			"drill-entries-and-configs": func(s *backupv1alpha1.RestoreDrillSpec) {
				s.Configs = &backupv1alpha1.ConfigSelection{Namespaces: []string{"team"},
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"drill": "yes"}}}
			},
		} {
			if err := c.Create(ctx, drill(name, spec)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		rejected(t, c.Create(ctx, drill("drill-none", func(s *backupv1alpha1.RestoreDrillSpec) { s.All = false })), nothing)
		rejected(t, c.Create(ctx, drill("drill-all-and-purposes", func(s *backupv1alpha1.RestoreDrillSpec) { s.Purposes = []string{"production"} })), atMostOne)
		rejected(t, c.Create(ctx, drill("drill-selector-and-purposes", func(s *backupv1alpha1.RestoreDrillSpec) {
			s.All, s.Selector, s.Purposes = false, &metav1.LabelSelector{}, []string{"production"}
		})), atMostOne)
		rejected(t, c.Create(ctx, drill("drill-unknown-purpose", func(s *backupv1alpha1.RestoreDrillSpec) { s.All, s.Purposes = false, []string{"staging"} })),
			"Unsupported value: \"staging\"")
		// all: false is no choice either.
		patch := []byte(`{"spec":{"all":false}}`)
		rejected(t, c.Patch(ctx, drill("drill-defaults", nil), client.RawPatch("application/merge-patch+json", patch)), nothing)
	})
	t.Run("a RestoreDrill's schedule", func(t *testing.T) {
		for i, ok := range []string{"@daily", "@every 12h", "0 30 2 * * MON-FRI"} {
			if err := c.Create(ctx, drill(fmt.Sprintf("drill-schedule-%d", i), func(s *backupv1alpha1.RestoreDrillSpec) { s.Schedule = ok })); err != nil {
				t.Errorf("schedule %q: %v", ok, err)
			}
		}
		rejected(t, c.Create(ctx, drill("drill-crontab", func(s *backupv1alpha1.RestoreDrillSpec) { s.Schedule = "0 3 * * *" })),
			"schedule 0 3 * * * is not 6 cron fields with seconds first")
		rejected(t, c.Create(ctx, drill("drill-words", func(s *backupv1alpha1.RestoreDrillSpec) { s.Schedule = "every night" })),
			"schedule every night is not 6 cron fields with seconds first")
		rejected(t, c.Create(ctx, drill("drill-fortnightly", func(s *backupv1alpha1.RestoreDrillSpec) { s.Schedule = "@fortnightly" })),
			"schedule @fortnightly is not 6 cron fields")
		rejected(t, c.Create(ctx, drill("drill-no-schedule", func(s *backupv1alpha1.RestoreDrillSpec) { s.Schedule = "" })), "spec.schedule")
		rejected(t, c.Create(ctx, drill("drill-tz-every", func(s *backupv1alpha1.RestoreDrillSpec) { s.Schedule, s.TimeZone = "@every 12h", "Europe/Berlin" })),
			"timeZone needs a cron schedule")
	})
	t.Run("a RestoreDrill's source", func(t *testing.T) {
		for name, spec := range map[string]func(*backupv1alpha1.RestoreDrillSpec){
			"drill-source-bucket": func(s *backupv1alpha1.RestoreDrillSpec) { s.Source = backupv1alpha1.DrillBucket },
			"drill-source-copy": func(s *backupv1alpha1.RestoreDrillSpec) {
				s.Source, s.CopyPolicy = backupv1alpha1.DrillCopy, "second-copy"
			},
			"drill-source-both": func(s *backupv1alpha1.RestoreDrillSpec) {
				s.Source, s.CopyPolicy = backupv1alpha1.DrillBoth, "second-copy"
			},
		} {
			if err := c.Create(ctx, drill(name, spec)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		rejected(t, c.Create(ctx, drill("drill-copy-no-policy", func(s *backupv1alpha1.RestoreDrillSpec) { s.Source = backupv1alpha1.DrillCopy })),
			"source Copy or Both needs copyPolicy")
		rejected(t, c.Create(ctx, drill("drill-both-no-policy", func(s *backupv1alpha1.RestoreDrillSpec) { s.Source = backupv1alpha1.DrillBoth })),
			"source Copy or Both needs copyPolicy")
		rejected(t, c.Create(ctx, drill("drill-policy-no-source", func(s *backupv1alpha1.RestoreDrillSpec) { s.CopyPolicy = "second-copy" })),
			"copyPolicy needs source Copy or Both")
		rejected(t, c.Create(ctx, drill("drill-policy-bucket", func(s *backupv1alpha1.RestoreDrillSpec) {
			s.Source, s.CopyPolicy = backupv1alpha1.DrillBucket, "second-copy"
		})), "copyPolicy needs source Copy or Both")
		rejected(t, c.Create(ctx, drill("drill-source-unknown", func(s *backupv1alpha1.RestoreDrillSpec) { s.Source, s.CopyPolicy = "Replica", "second-copy" })),
			`Unsupported value: "Replica"`)
	})
	t.Run("a RestoreDrill's bounds", func(t *testing.T) {
		rejected(t, c.Create(ctx, drill("drill-small-budget", func(s *backupv1alpha1.RestoreDrillSpec) { s.MemoryBudget = quantity("10Mi") })),
			"memoryBudget 10Mi is below 64Mi, what one drill needs")
		if err := c.Create(ctx, drill("drill-least-budget", func(s *backupv1alpha1.RestoreDrillSpec) { s.MemoryBudget = quantity("64Mi") })); err != nil {
			t.Errorf("memoryBudget 64Mi: %v", err)
		}
		// A quantity may come as a number (YAML's memoryBudget: 1073741824).
		number := drill("drill-number-budget", nil)
		if err := c.Create(ctx, number); err != nil {
			t.Fatal(err)
		}
		if err := c.Patch(ctx, number, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"memoryBudget":1073741824}}`))); err != nil {
			t.Errorf("memoryBudget 1073741824: %v", err)
		}
		rejected(t, c.Patch(ctx, number, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"memoryBudget":1000}}`))),
			"memoryBudget 1000 is below 64Mi")
		rejected(t, c.Create(ctx, drill("drill-17", func(s *backupv1alpha1.RestoreDrillSpec) { s.Concurrency = 17 })),
			"spec.concurrency: Invalid value: 17: spec.concurrency in body should be less than or equal to 16")
		// 0 is the unset value Go omits, so the default applies; an explicit 0 is refused.
		patch := []byte(`{"spec":{"concurrency":0}}`)
		rejected(t, c.Patch(ctx, drill("drill-defaults", nil), client.RawPatch("application/merge-patch+json", patch)),
			"spec.concurrency: Invalid value: 0: spec.concurrency in body should be greater than or equal to 1")
		rejected(t, c.Create(ctx, drill("drill-negative-age", func(s *backupv1alpha1.RestoreDrillSpec) { s.MaxRestorableAge = duration(-time.Hour) })),
			"maxRestorableAge -1h0m0s is not a positive duration")
		rejected(t, c.Create(ctx, drill("drill-zero-age", func(s *backupv1alpha1.RestoreDrillSpec) { s.MaxRestorableAge = duration(0) })),
			"maxRestorableAge 0s is not a positive duration")
		rejected(t, c.Create(ctx, drill("drill-zero-timeout", func(s *backupv1alpha1.RestoreDrillSpec) { s.Timeout = duration(0) })),
			"timeout 0s is not a positive duration")
	})
	t.Run("a RestoreDrill's status", func(t *testing.T) {
		d := drill("drill-status", nil)
		if err := c.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		result := func(entry string) backupv1alpha1.EntryDrillResult {
			return backupv1alpha1.EntryDrillResult{Entry: entry, Shoot: "shoot--dev--app", Outcome: backupv1alpha1.OutcomeNotRestorable, Time: now,
				Reason: strings.Repeat("x", backupv1alpha1.MaxEntryDrillReasonLength), Object: entry + "/etcd-main/v2/Full-00000000-00000042-1700000000.gz"}
		}
		d.Status = backupv1alpha1.RestoreDrillStatus{ObservedGeneration: d.Generation, LastRun: &now, Entries: 1, Failed: 1, Stale: 1,
			Results: []backupv1alpha1.EntryDrillResult{result("shoot--dev--app--6f1c")}}
		if err := c.Status().Update(ctx, d); err != nil {
			t.Fatalf("status: %v", err)
		}
		d.Status.Results = append(d.Status.Results, result("shoot--dev--app--6f1c"))
		rejected(t, c.Status().Update(ctx, d), "Duplicate value")
		d.Status.Results = []backupv1alpha1.EntryDrillResult{result("shoot--dev--app--6f1c")}
		d.Status.Results[0].Reason += "x"
		rejected(t, c.Status().Update(ctx, d), "status.results[0].reason: Too long")
		d.Status.Results[0].Reason, d.Status.Results[0].Outcome = "", "Maybe"
		rejected(t, c.Status().Update(ctx, d), "Unsupported value: \"Maybe\"")
		// The comparison with the live etcd, and the outcomes it gives.
		d.Status.Results[0].Outcome = backupv1alpha1.OutcomeExact
		d.Status.Results[0].Live = &backupv1alpha1.LiveComparison{Outcome: backupv1alpha1.LiveMatches, Revision: 45, BehindRevisions: 3,
			BehindSeconds: 120, Reason: strings.Repeat("x", backupv1alpha1.MaxEntryDrillReasonLength)}
		if err := c.Status().Update(ctx, d); err != nil {
			t.Fatalf("status with a live comparison: %v", err)
		}
		d.Status.Results[0].Outcome, d.Status.Results[0].Live.Outcome = backupv1alpha1.OutcomeUnverified, backupv1alpha1.LiveCompacted
		if err := c.Status().Update(ctx, d); err != nil {
			t.Fatalf("status Unverified: %v", err)
		}
		d.Status.Results[0].Live.Reason += "x"
		rejected(t, c.Status().Update(ctx, d), "status.results[0].live.reason: Too long")
		d.Status.Results[0].Live.Reason, d.Status.Results[0].Live.Outcome = "", "Same"
		rejected(t, c.Status().Update(ctx, d), "Unsupported value: \"Same\"")
	})

	policy := func(name string, mutate func(*backupv1alpha1.BackupCopyPolicySpec)) *backupv1alpha1.BackupCopyPolicy {
		p := &backupv1alpha1.BackupCopyPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: backupv1alpha1.BackupCopyPolicySpec{Buckets: backupv1alpha1.BucketSelection{Types: []string{"azure"}},
				Destination: "s3-a", Schedule: "@hourly"}}
		if mutate != nil {
			mutate(&p.Spec)
		}
		return p
	}
	t.Run("a BackupCopyPolicy's defaults and choices", func(t *testing.T) {
		p := policy("copy-defaults", nil)
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if p.Spec.Concurrency != backupv1alpha1.DefaultCopyConcurrency || p.Spec.LagObjective == nil || p.Spec.LagObjective.Duration != backupv1alpha1.DefaultLagObjective {
			t.Errorf("defaults: concurrency %d, lagObjective %v; want %d, %s", p.Spec.Concurrency, p.Spec.LagObjective,
				backupv1alpha1.DefaultCopyConcurrency, backupv1alpha1.DefaultLagObjective)
		}
		for name, sel := range map[string]backupv1alpha1.BucketSelection{
			"copy-names":    {Names: []string{"bucket-a"}},
			"copy-selector": {Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"copy": "yes"}}},
			"copy-all-three": {Names: []string{"bucket-a"}, Types: []string{"aws"},
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"copy": "yes"}}},
		} {
			if err := c.Create(ctx, policy(name, func(s *backupv1alpha1.BackupCopyPolicySpec) { s.Buckets = sel })); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		rejected(t, c.Create(ctx, policy("copy-no-buckets", func(s *backupv1alpha1.BackupCopyPolicySpec) { s.Buckets = backupv1alpha1.BucketSelection{} })),
			"choose the BackupBuckets with names, selector or types")
		rejected(t, c.Create(ctx, policy("copy-no-destination", func(s *backupv1alpha1.BackupCopyPolicySpec) { s.Destination = "" })), "spec.destination")
		// names: [] chooses nothing; Go omits it, a manifest may not.
		rejected(t, c.Patch(ctx, policy("copy-defaults", nil), client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"buckets":{"names":[]}}}`))),
			"spec.buckets.names")
	})
	t.Run("a BackupCopyPolicy's schedule and bounds", func(t *testing.T) {
		for i, ok := range []string{"@daily", "@every 15m", "0 0 * * * *"} {
			if err := c.Create(ctx, policy(fmt.Sprintf("copy-schedule-%d", i), func(s *backupv1alpha1.BackupCopyPolicySpec) { s.Schedule = ok })); err != nil {
				t.Errorf("schedule %q: %v", ok, err)
			}
		}
		rejected(t, c.Create(ctx, policy("copy-crontab", func(s *backupv1alpha1.BackupCopyPolicySpec) { s.Schedule = "0 * * * *" })),
			"schedule 0 * * * * is not 6 cron fields with seconds first")
		rejected(t, c.Create(ctx, policy("copy-no-schedule", func(s *backupv1alpha1.BackupCopyPolicySpec) { s.Schedule = "" })), "spec.schedule")
		rejected(t, c.Create(ctx, policy("copy-tz-every", func(s *backupv1alpha1.BackupCopyPolicySpec) { s.Schedule, s.TimeZone = "@every 1h", "Europe/Berlin" })),
			"timeZone needs a cron schedule")
		rejected(t, c.Create(ctx, policy("copy-33", func(s *backupv1alpha1.BackupCopyPolicySpec) { s.Concurrency = 33 })),
			"spec.concurrency in body should be less than or equal to 32")
		patch := []byte(`{"spec":{"concurrency":0}}`)
		rejected(t, c.Patch(ctx, policy("copy-defaults", nil), client.RawPatch("application/merge-patch+json", patch)),
			"spec.concurrency in body should be greater than or equal to 1")
		rejected(t, c.Create(ctx, policy("copy-zero-lag", func(s *backupv1alpha1.BackupCopyPolicySpec) { s.LagObjective = duration(0) })),
			"lagObjective 0s is not a positive duration")
	})
	t.Run("a BackupCopyPolicy's status", func(t *testing.T) {
		p := policy("copy-status", nil)
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		failures := make([]backupv1alpha1.CopyFailure, backupv1alpha1.MaxCopyFailures)
		for i := range failures {
			failures[i] = backupv1alpha1.CopyFailure{Key: fmt.Sprintf("shoot--dev--app--6f1c/etcd-main/v2/Incr-%08d", i), Reason: strings.Repeat("x", backupv1alpha1.MaxCopyReasonLength)}
		}
		p.Status = backupv1alpha1.BackupCopyPolicyStatus{ObservedGeneration: p.Generation, LastRun: &now, Entries: 1, Failed: 1,
			Results: []backupv1alpha1.EntryCopyResult{{Entry: "shoot--dev--app--6f1c", Bucket: "bucket-a", Time: now, Differing: 1, Failures: failures}}}
		if err := c.Status().Update(ctx, p); err != nil {
			t.Fatalf("status: %v", err)
		}
		p.Status.Results[0].Failures = append(p.Status.Results[0].Failures, failures[0])
		rejected(t, c.Status().Update(ctx, p), "status.results[0].failures: Too many")
	})
}
