package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "github.com/housekeeper-dev/housekeeper/functions/apis/backup/v1alpha1"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

// The generated CRDs, served by a real kube-apiserver: defaults, OpenAPI bounds and the CEL
// rules — above all that a config's destination cannot change once set.
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
	rejected(t, c.Create(ctx, dest("azure-region", "azure", func(s *backupv1alpha1.BackupDestinationSpec) { s.Region = "westeurope" })), "region is only for type aws")

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
}
