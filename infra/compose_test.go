package infra_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/functions/all"
	hkcli "github.com/housekeeper-dev/housekeeper/functions/cli"
	"github.com/housekeeper-dev/housekeeper/functions/runner"
	"github.com/housekeeper-dev/housekeeper/scripts/images"
)

// loadCompose loads docker-compose.yaml as `docker compose` would (no Docker engine needed),
// with an empty environment so the result does not depend on the shell that runs the test.
func loadCompose(t *testing.T) (*types.Project, string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return loadComposeFile(t, filepath.Join(root, "docker-compose.yaml"), root), root
}

// loadComposeFile loads the compose file as loadCompose does, its paths relative to root.
func loadComposeFile(t *testing.T, file, root string) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{file}, cli.WithWorkingDirectory(root), cli.WithInterpolation(true), cli.WithResolvedPaths(true))
	if err != nil {
		t.Fatal(err)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(file), err)
	}
	return project
}

// placeholder is a ${NAME} in an example, filled in by whoever applies it.
var placeholder = regexp.MustCompile(`\$\{([A-Z0-9_]+)\}`)

// The compose file runs the whole stack: the components housekeeper needs, pinned to the
// versions the rest of the repository pins, published on loopback only, started in order,
// and housekeeper's own services running the images the project's builder makes (scripts/images)
// and pointed at them.
func TestComposeFile(t *testing.T) {
	project, root := loadCompose(t)
	checkCompose(t, project, root, all.Functions, func(name string) binary { return binary{function: name} })
}

// checkCompose checks a compose file for the registry: a service for each of its functions,
// beside the stack's. binaryOf is the binary that runs a function, whose flags its environment
// must be.
func checkCompose(t *testing.T, project *types.Project, root string, registry []runner.Definition, binaryOf func(function string) binary) {
	functionServices := all.NamesOf(registry)
	want := append([]string{"azurite", "bridge", "etcd", "gcs", "k3s", "kube-init", "nats", "nats-auth", "s3", "setup"}, functionServices...)
	slices.Sort(want)
	if got := slices.Sorted(slices.Values(project.ServiceNames())); !slices.Equal(got, want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	svc := func(name string) types.ServiceConfig {
		s, err := project.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	entrypoints := map[string]string{}
	for _, d := range images.Deployables() {
		entrypoints[d.Name] = d.Path
	}
	housekeeperServices := map[string]binary{"setup": {setup: true}, "bridge": {bridge: true}, "nats-auth": {natsAuth: true}}
	for _, name := range functionServices {
		housekeeperServices[name] = binaryOf(name)
	}

	t.Run("images", func(t *testing.T) {
		for _, s := range project.Services {
			_, tag, ok := strings.Cut(s.Image, ":")
			if !ok || tag == "" || tag == "latest" || strings.Contains(tag, "/") {
				t.Errorf("%s: image %q is not pinned to a tag", s.Name, s.Image)
			}
			if s.Build != nil {
				t.Errorf("%s: built by compose; the images come from `make images` (scripts/images)", s.Name)
			}
		}
		// nats: JetStream message scheduling needs >= 2.14; same minor as the embedded server.
		natsTag := strings.TrimPrefix(imageTag(svc("nats").Image), "v")
		natsVersion := parseVersion(t, strings.SplitN(natsTag, "-", 2)[0])
		if natsVersion[0] != 2 || natsVersion[1] < 14 {
			t.Errorf("nats image %s: want nats-server 2.14 or newer (message scheduling)", svc("nats").Image)
		}
		embedded := parseVersion(t, strings.TrimPrefix(goModVersion(t, root, "github.com/nats-io/nats-server/v2"), "v"))
		if natsVersion[0] != embedded[0] || natsVersion[1] != embedded[1] {
			t.Errorf("nats image %s: not the minor version the tests embed (nats-server %v in go.mod)", svc("nats").Image, embedded)
		}
		if got, want := imageTag(svc("azurite").Image), azuriteVersion(t, root); got != want {
			t.Errorf("azurite image tag %s, want %s as pinned in scripts/azurite/package-lock.json", got, want)
		}
		versions := versionsEnv(t, root)
		if got, want := "v"+imageTag(svc("gcs").Image), versions["FAKE_GCS_SERVER_VERSION"]; got != want {
			t.Errorf("gcs image tag %s, want %s (FAKE_GCS_SERVER_VERSION in scripts/versions.env, without its v)", got, want)
		}
		for name, pin := range map[string]string{"s3": "VERSITYGW_VERSION", "etcd": "ETCD_VERSION"} {
			if got := imageTag(svc(name).Image); got != versions[pin] {
				t.Errorf("%s image tag %s, want %s (%s in scripts/versions.env)", name, got, versions[pin], pin)
			}
		}
		k8s := versions["KUBERNETES_VERSION"]
		for _, name := range []string{"k3s", "kube-init"} {
			if tag := imageTag(svc(name).Image); !strings.HasPrefix(tag, k8s+"-k3s") {
				t.Errorf("%s: image %s, want rancher/k3s:%s-k3sN (KUBERNETES_VERSION in scripts/versions.env)", name, svc(name).Image, k8s)
			}
		}
	})

	t.Run("ports", func(t *testing.T) {
		want := map[string][][2]uint32{ // service → (published, target)
			"nats": {{4222, 4222}, {8222, 8222}}, "azurite": {{10000, 10000}}, "s3": {{7070, 7070}}, "gcs": {{4443, 4443}}, "etcd": {{2379, 2379}},
			"k3s": {{6443, 6443}}, "bridge": {{8080, 8080}},
		}
		// Each function's /healthz and /readyz on a host port of its own, from 8081 on.
		for _, name := range functionServices {
			if ports := svc(name).Ports; len(ports) == 1 {
				if published, err := strconv.ParseUint(ports[0].Published, 10, 32); err == nil && published > 8080 {
					want[name] = [][2]uint32{{uint32(published), 8080}}
				}
			}
			if want[name] == nil {
				t.Errorf("%s: ports %+v, want one host port above 8080 to its 8080", name, svc(name).Ports)
			}
		}
		hostPorts := map[string]string{}
		for _, s := range project.Services {
			var got [][2]uint32
			for _, p := range s.Ports {
				published, err := strconv.ParseUint(p.Published, 10, 32)
				if err != nil {
					t.Errorf("%s: port %+v is not published on a fixed host port", s.Name, p)
					continue
				}
				if p.HostIP != "127.0.0.1" {
					t.Errorf("%s: port %d published on %q, want 127.0.0.1 only", s.Name, published, p.HostIP)
				}
				if other := hostPorts[p.Published]; other != "" {
					t.Errorf("host port %s published by %s and %s", p.Published, other, s.Name)
				}
				hostPorts[p.Published] = s.Name
				got = append(got, [2]uint32{uint32(published), p.Target})
			}
			if !slices.Equal(got, want[s.Name]) {
				t.Errorf("%s: ports %v, want %v", s.Name, got, want[s.Name])
			}
		}
	})

	t.Run("healthchecks", func(t *testing.T) {
		// The program each image has to run its check with.
		programs := map[string]string{"nats": "wget", "azurite": "node", "s3": "wget", "gcs": "wget", "etcd": "/usr/local/bin/etcdctl", "k3s": "kubectl"}
		for name, program := range programs {
			hc := svc(name).HealthCheck
			if hc == nil || hc.Disable || len(hc.Test) < 2 {
				t.Errorf("%s: no healthcheck", name)
				continue
			}
			switch hc.Test[0] {
			case "CMD":
				if hc.Test[1] != program {
					t.Errorf("%s: healthcheck runs %q, want %s (what the image has)", name, hc.Test[1], program)
				}
			case "CMD-SHELL":
				if !strings.HasPrefix(hc.Test[1], program+" ") {
					t.Errorf("%s: healthcheck %q does not start with %s", name, hc.Test[1], program)
				}
			default:
				t.Errorf("%s: healthcheck %v", name, hc.Test)
			}
			if hc.Interval == nil || hc.Retries == nil {
				t.Errorf("%s: healthcheck without interval or retries", name)
			}
		}
		// The housekeeper image holds its binary only: no shell, no curl, and the binaries have no
		// probe subcommand. A healthcheck there could only run one of the binaries.
		for name := range housekeeperServices {
			if hc := svc(name).HealthCheck; hc != nil && !hc.Disable {
				if len(hc.Test) < 2 || hc.Test[0] != "CMD" || !strings.HasPrefix(hc.Test[1], "/usr/local/bin/housekeeper") {
					t.Errorf("%s: healthcheck %v runs something the image does not have", name, hc.Test)
				}
			}
		}
	})

	t.Run("depends_on", func(t *testing.T) {
		want := map[string]map[string]string{
			"kube-init": {"k3s": types.ServiceConditionHealthy},
			// NATS starts with the identities nats-auth issued.
			"nats": {"nats-auth": types.ServiceConditionCompletedSuccessfully},
			// The setup alone creates the streams and consumers: everything else waits for it.
			"setup":  {"nats": types.ServiceConditionHealthy},
			"bridge": {"setup": types.ServiceConditionCompletedSuccessfully, "kube-init": types.ServiceConditionCompletedSuccessfully},
		}
		for _, fn := range functionServices {
			want[fn] = map[string]string{"setup": types.ServiceConditionCompletedSuccessfully, "azurite": types.ServiceConditionHealthy,
				"s3": types.ServiceConditionHealthy, "gcs": types.ServiceConditionHealthy, "kube-init": types.ServiceConditionCompletedSuccessfully}
		}
		for _, s := range project.Services {
			got := map[string]string{}
			for dep, d := range s.DependsOn {
				got[dep] = d.Condition
				if d.Condition == types.ServiceConditionHealthy && svc(dep).HealthCheck == nil {
					t.Errorf("%s waits for %s to be healthy, which has no healthcheck", s.Name, dep)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want[s.Name]) {
				t.Errorf("%s: depends_on %v, want %v", s.Name, got, want[s.Name])
			}
		}
		for _, name := range []string{"kube-init", "setup", "nats-auth"} {
			if r := svc(name).Restart; r != "no" && r != "" {
				t.Errorf("%s restarts (%q): a one-shot must not, or service_completed_successfully never comes", name, r)
			}
		}
	})

	t.Run("housekeeper images", func(t *testing.T) {
		for name, bin := range housekeeperServices {
			wantImage, wantEntrypoint := "housekeeper:local", "/usr/local/bin/housekeeper"
			if bin.bridge {
				wantImage, wantEntrypoint = "housekeeper-bridge:local", "/usr/local/bin/housekeeper-bridge"
			}
			image := svc(name).Image
			if image != wantImage {
				t.Errorf("%s: image %q, want %q (make images REGISTRY= TAG=local)", name, image, wantImage)
			}
			if got := entrypoints[strings.TrimSuffix(image, ":local")]; got != wantEntrypoint {
				t.Errorf("%s: the image builder's %s runs %q, want %q", name, image, got, wantEntrypoint)
			}
		}
	})

	t.Run("environment", func(t *testing.T) {
		natsPort := "4222"
		for name, bin := range housekeeperServices {
			s := svc(name)
			env := map[string]string{}
			for k, v := range s.Environment {
				if v == nil {
					t.Errorf("%s: %s has no value", name, k)
					continue
				}
				env[k] = *v
			}
			if bin.natsAuth {
				continue // issues credentials; see "nats identities"
			}
			if bin.function != "" && !slices.Equal(s.Command, []string{"function", name}) {
				t.Errorf("%s: command %q, want [function %s]", name, s.Command, name)
			}
			u, err := url.Parse(env["HOUSEKEEPER_NATS_URL"])
			if err != nil || u.Scheme != "nats" || u.Hostname() != "nats" || u.Port() != natsPort {
				t.Errorf("%s: HOUSEKEEPER_NATS_URL=%q, want nats://nats:%s (the nats service)", name, env["HOUSEKEEPER_NATS_URL"], natsPort)
			}
			if bin.setup {
				if !slices.Equal(s.Command, []string{"setup"}) {
					t.Errorf("%s: command %q, want [setup]", name, s.Command)
				}
				checkEnv(t, "docker-compose.yaml: "+name, bin, env, nil)
				continue // talks to NATS only
			}
			// The kubeconfig is the one kube-init writes, on the volume they share.
			kubeconfig := env["HOUSEKEEPER_KUBECONFIG"]
			if vol := volumeAt(s, filepath.Dir(kubeconfig)); vol == "" || volumeAt(svc("kube-init"), "/output") != vol {
				t.Errorf("%s: HOUSEKEEPER_KUBECONFIG=%s is not on the volume kube-init writes to", name, kubeconfig)
			}
			if !strings.Contains(strings.Join(svc("kube-init").Command, " "), "/output/"+filepath.Base(kubeconfig)) {
				t.Errorf("%s: kube-init does not write %s", name, filepath.Base(kubeconfig))
			}
			if env["HOUSEKEEPER_CLUSTER"] == "" {
				t.Errorf("%s: no HOUSEKEEPER_CLUSTER", name)
			}
			if !bin.bridge && env["HOUSEKEEPER_MODE"] != "pull" {
				t.Errorf("%s: HOUSEKEEPER_MODE=%q, want pull (nothing delivers over HTTP here)", name, env["HOUSEKEEPER_MODE"])
			}
			if root := env["HOUSEKEEPER_LOCAL_ROOT"]; root != "" && volumeAt(s, root) == "" {
				t.Errorf("%s: HOUSEKEEPER_LOCAL_ROOT=%s is not a volume", name, root)
			}
			checkEnv(t, "docker-compose.yaml: "+name, bin, env, nil)
		}
		// bucket creates the local buckets, purge empties them, snapshot writes backups into
		// them, drill reads them, copy reads them and writes its copy: the same volume.
		buckets := volumeAt(svc("bucket"), "/var/lib/housekeeper/buckets")
		for _, name := range functionsNeedingOf(registry, func(n runner.Needs) bool { return n.Stores }) {
			if v := volumeAt(svc(name), "/var/lib/housekeeper/buckets"); buckets == "" || v != buckets {
				t.Errorf("bucket and %s do not share the local buckets' volume (%q, %q)", name, buckets, v)
			}
		}
		// The bridge announces the types the examples use.
		types, _ := svc("bridge").Environment["HOUSEKEEPER_TYPES"]
		for _, typ := range []string{"azure", "local", "aws", "gcp"} {
			if types == nil || !slices.Contains(strings.Split(*types, ","), typ) {
				t.Errorf("bridge: HOUSEKEEPER_TYPES=%v, want %s among them (the examples' types)", types, typ)
			}
		}
	})

	// nats-auth issues every identity of `housekeeper nats-auth` with TLS for the name "nats";
	// NATS loads them; each housekeeper process connects as its own identity over TLS.
	t.Run("nats identities", func(t *testing.T) {
		const dir = "/var/lib/housekeeper/nats"
		issuer := svc("nats-auth")
		if cmd := strings.Join(issuer.Command, " "); !strings.HasPrefix(cmd, "nats-auth --out "+dir+" ") || !strings.Contains(cmd, "--tls-hosts nats,") {
			t.Errorf("nats-auth: command %q, want nats-auth --out %s --tls-hosts nats,…", cmd, dir)
		}
		vol := volumeAt(issuer, dir)
		if vol == "" {
			t.Fatalf("nats-auth does not write to a volume at %s", dir)
		}
		nats := svc("nats")
		if cmd := strings.Join(nats.Command, " "); !strings.Contains(cmd, "--config "+dir+"/nats-server.conf") || volumeAt(nats, dir) != vol {
			t.Errorf("nats: command %q does not load %s/nats-server.conf from nats-auth's volume", cmd, dir)
		}
		identities := map[string]bool{}
		for _, p := range hkcli.PermissionsOf(registry) {
			identities[p.Identity] = true
		}
		for name, bin := range housekeeperServices {
			if bin.natsAuth {
				continue
			}
			identity := name
			if bin.bridge {
				identity = events.IdentityBridge
			}
			s := svc(name)
			if !identities[identity] {
				t.Errorf("%s: no identity %q among those nats-auth issues", name, identity)
			}
			for k, want := range map[string]string{"HOUSEKEEPER_NATS_NKEY": dir + "/" + identity + ".nk", "HOUSEKEEPER_NATS_TLS_CA": dir + "/ca.pem",
				"HOUSEKEEPER_NATS_TLS_CERT": dir + "/client.pem", "HOUSEKEEPER_NATS_TLS_KEY": dir + "/client-key.pem"} {
				if v := s.Environment[k]; v == nil || *v != want {
					t.Errorf("%s: %s=%v, want %s", name, k, v, want)
				}
			}
			if volumeAt(s, dir) != vol {
				t.Errorf("%s: nats-auth's volume is not at %s", name, dir)
			}
		}
	})

	t.Run("kube-init", func(t *testing.T) {
		s := svc("kube-init")
		script := strings.Join(s.Command, "\n")
		for _, want := range []string{"/infra/crds", "/infra/chart/files/crds", "/infra/examples/", "${AZURITE_ENDPOINT}", "http://azurite:10000/devstoreaccount1",
			"${S3_ENDPOINT}", "http://s3:7070", "${EXAMPLE_ETCD_ADDRESS}", "etcd:2379", "https://k3s:6443", "kubectl wait --for=condition=Established",
			// Every CRD established before the bridge starts: it lists every kind from its start.
			"crd/etcdbackupconfigs.backup.housekeeper.dev", "crd/restoredrills.backup.housekeeper.dev", "crd/backupcopypolicies.backup.housekeeper.dev"} {
			if !strings.Contains(script, want) {
				t.Errorf("kube-init's script lacks %q (escaped $ lost to compose's interpolation?):\n%s", want, script)
			}
		}
		mounted := false
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind && v.Source == filepath.Join(root, "infra") && v.Target == "/infra" && v.ReadOnly {
				mounted = true
			}
		}
		if !mounted {
			t.Errorf("kube-init does not mount ./infra read-only at /infra: %+v", s.Volumes)
		}
		// The placeholders it fills in are the ones the examples use, and no other.
		examples, _ := filepath.Glob(filepath.Join(root, "infra/examples/*.yaml"))
		used := map[string]bool{}
		for _, f := range examples {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range placeholder.FindAllStringSubmatch(string(data), -1) {
				used[m[1]] = true
			}
		}
		for _, name := range []string{"AZURITE_ENDPOINT", "S3_ENDPOINT", "GCS_ENDPOINT", "EXAMPLE_ETCD_ADDRESS"} {
			if !used[name] {
				t.Errorf("no example uses ${%s}: the substitution in kube-init is stale", name)
			}
			delete(used, name)
		}
		for name := range used {
			t.Errorf("an example uses ${%s}, which kube-init does not fill in", name)
		}
		if !slices.Contains(svc("azurite").Command, "10000") {
			t.Errorf("azurite does not listen on 10000: %v", svc("azurite").Command)
		}
		if !strings.Contains(strings.Join(svc("s3").Command, " "), "--port :7070") {
			t.Errorf("s3 does not listen on 7070: %v", svc("s3").Command)
		}
		if !slices.Contains(svc("gcs").Command, "4443") {
			t.Errorf("gcs does not listen on 4443: %v", svc("gcs").Command)
		}
		if !slices.Contains(svc("etcd").Command, "--listen-client-urls=http://0.0.0.0:2379") {
			t.Errorf("etcd does not listen on 2379: %v", svc("etcd").Command)
		}
	})
}

// The operator's guide (infra/README.md and infra/docs) has the promised sections (what their
// links and commands name is scripts/doclint's).
func TestReadme(t *testing.T) {
	sections := map[string][]string{
		"README.md":             {"# Running housekeeper: the operator's guide"},
		"docs/deploy.md":        {"## Deploy into a Gardener landscape", "## Deploy with gardener-operator", "## Deploy with Helm", "## NATS identities", "## Private registries"},
		"docs/configuration.md": {"## Values", "## KEDA mode", "## Knative mode"},
		"docs/operating.md":     {"## Running the CLI in a seed", "## Runbooks"},
		"docs/monitoring.md":    {"## Alerts", "## Metrics"},
		"docs/upgrading.md":     {"## Releasing", "## Upgrading"},
	}
	for file, headings := range sections {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range headings {
			if !strings.Contains("\n"+string(data), "\n"+h+"\n") {
				t.Errorf("infra/%s has no section %q", file, h)
			}
		}
	}
}

// volumeAt is the named volume or bind source mounted at dir (or a parent) in s.
func volumeAt(s types.ServiceConfig, dir string) string {
	for _, v := range s.Volumes {
		if dir == v.Target || strings.HasPrefix(dir, v.Target+"/") {
			return v.Type + ":" + v.Source
		}
	}
	return ""
}

func imageTag(image string) string {
	_, tag, _ := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
	return tag
}

func parseVersion(t *testing.T, v string) [3]int {
	t.Helper()
	var out [3]int
	parts := strings.Split(v, ".")
	if len(parts) < 2 || len(parts) > 3 {
		t.Fatalf("version %q: want major.minor[.patch]", v)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("version %q: %v", v, err)
		}
		out[i] = n
	}
	return out
}

// goModVersion is the version go.mod requires of module.
func goModVersion(t *testing.T, root, module string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(module) + `\s+(v\S+)`).FindStringSubmatch(readFile(t, filepath.Join(root, "go.mod")))
	if m == nil {
		t.Fatalf("go.mod does not require %s", module)
	}
	return m[1]
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func azuriteVersion(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "scripts/azurite/package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	if err := json.Unmarshal(data, &lock); err != nil {
		t.Fatal(err)
	}
	v := lock.Packages["node_modules/azurite"].Version
	if v == "" {
		t.Fatal("scripts/azurite/package-lock.json pins no azurite")
	}
	return v
}

func versionsEnv(t *testing.T, root string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "scripts/versions.env"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out
}
