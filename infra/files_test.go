package infra_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/housekeeper-dev/housekeeper/events"
	"github.com/housekeeper-dev/housekeeper/scripts/testenv"
)

var update = flag.Bool("update", false, "rewrite infra/nats/*.json from events.StreamConfigs")

// nonKubernetes are the files under infra/ that are not Kubernetes manifests, each with the
// check that it is what it claims to be. TestEveryFileIsChecked fails on any other.
var nonKubernetes = map[string]func(t *testing.T, file string){
	"monitoring/prometheus-scrape-config.yaml": checkPrometheusScrapeConfig,
	"chart/files/prometheus-rules.yaml":        checkPrometheusRules,
	"chart/files/dashboard.json":               checkGrafanaDashboard,
	"nats/HOUSEKEEPER.json":                    checkStreamConfigFile,
	"nats/HOUSEKEEPER_DEADLETTER.json":         checkStreamConfigFile,
	"nats/HOUSEKEEPER_AUDIT.json":              checkStreamConfigFile,
}

// metricNames are the metrics the binaries export (TestMetricNamesMatchCode keeps them in step
// with what the code under functions/ and bridge/ declares). test/monitoring checks each against
// the running processes' /metrics.
var metricNames = []string{
	"housekeeper_bridge_events_published_total",
	"housekeeper_bridge_events_duplicate_total",
	"housekeeper_bridge_objects_unchanged_total",
	"housekeeper_bridge_publish_errors_total",
	"housekeeper_bridge_publish_latency_seconds",
	"housekeeper_bridge_queue_depth",
	"housekeeper_bridge_leader",
	"housekeeper_deadletter_messages",
	"housekeeper_stream_lost_messages",
	"housekeeper_purges_pending",
	"housekeeper_purges_oldest_due_timestamp_seconds",
	"housekeeper_purge_last_success_timestamp_seconds",
	"housekeeper_function_handled_total",
	"housekeeper_function_failed_total",
	"housekeeper_function_handler_duration_seconds",
	"housekeeper_function_in_flight",
	"housekeeper_function_oldest_waiting_seconds",
	"housekeeper_function_cold_start_seconds",
	"housekeeper_drill_last_run_timestamp_seconds",
	"housekeeper_drill_entry_last_success",
	"housekeeper_drill_entry_restorable_point_timestamp_seconds",
	"housekeeper_drill_max_restorable_age_seconds",
	"housekeeper_drill_entries",
	"housekeeper_drill_duration_seconds",
	"housekeeper_copy_objects_total",
	"housekeeper_copy_bytes_total",
	"housekeeper_copy_server_side_objects_total",
	"housekeeper_copy_verification_failures_total",
	"housekeeper_copy_entry_lag_seconds",
	"housekeeper_copy_policy_entries",
	"housekeeper_copy_policy_lag_objective_seconds",
	"housekeeper_copy_policy_last_run_timestamp_seconds",
	"housekeeper_copy_entry_last_complete_timestamp_seconds",
	"housekeeper_copy_policy_failed_over",
	"housekeeper_purge_copies_total",
	"housekeeper_purge_verifications_total",
	"housekeeper_purge_verified_objects_total",
	"housekeeper_kube_requests_total",
}

// gaugesInSeconds are the metrics in seconds that are gauges, not histograms.
var gaugesInSeconds = map[string]bool{
	"housekeeper_function_cold_start_seconds":       true,
	"housekeeper_drill_max_restorable_age_seconds":  true,
	"housekeeper_function_oldest_waiting_seconds":   true,
	"housekeeper_copy_entry_lag_seconds":            true,
	"housekeeper_copy_policy_lag_objective_seconds": true,
}

func TestNonKubernetesFiles(t *testing.T) {
	for file, check := range nonKubernetes {
		t.Run(file, func(t *testing.T) { check(t, file) })
	}
}

// Every file under infra/ is checked by some test: a manifest (rendered and applied), a file
// named in nonKubernetes, or one of the few listed here.
func TestEveryFileIsChecked(t *testing.T) {
	others := map[string]string{
		"README.md":                  "compose_test.go (TestReadme: sections, links)",
		"docs/deploy.md":             "compose_test.go (TestReadme: sections, links)",
		"docs/configuration.md":      "compose_test.go (TestReadme: sections, links)",
		"docs/operating.md":          "compose_test.go (TestReadme: sections, links); test/seed runs its CLI block",
		"docs/monitoring.md":         "compose_test.go (TestReadme: sections, links)",
		"docs/upgrading.md":          "compose_test.go (TestReadme: sections, links)",
		"examples/README.md":         "compose_test.go (TestReadme: links)",
		"chart/Chart.yaml":           "TestChartAsGardenletInstallsIt (versions), TestChartRenders",
		"chart/files/functions.json": "registry_test.go (TestChartFactsAreTheRegistrys: byte-equal to the registry's), TestChartRenders",
		"chart/files/bridge.json":    "registry_test.go (TestBridgeRulesAreWhatItWatches: byte-equal to bridge.Watched), TestChartRenders",
		"chart/values.yaml":          "TestChartRenders, TestChartRefusesUnsafeValues, TestChartDrillMemoryHoldsTheDefaultBudget",
		"chart/.helmignore":          "TestChartRenders (the chart archive)",
		"chart/values.schema.json":   "TestChartSchemaRefusesWrongValuesByName, TestChartSchemaCoversTheValues, registry_test.go (TestChartSchemaListsAreTheRegistrys: its lists of the functions are make registry's)",
	}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch ext := filepath.Ext(path); {
		case strings.HasPrefix(path, "crds/"), strings.HasPrefix(path, "chart/files/crds/"), ext == ".go":
		case nonKubernetes[path] != nil, others[path] != "":
		case strings.HasPrefix(path, "chart/templates/"):
			// TestChartRenders: every template renders in some rendering, which the other tests check.
		case (ext == ".yaml" || ext == ".yml") && !strings.HasPrefix(path, "chart/"):
			// allManifests accounts for every YAML file outside the chart.
		default:
			t.Errorf("infra/%s: no test checks this file; add it to nonKubernetes in files_test.go with a check", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkPrometheusScrapeConfig(t *testing.T, file string) {
	var cfg struct {
		ScrapeConfigs []struct {
			JobName             string `yaml:"job_name"`
			ScrapeInterval      string `yaml:"scrape_interval"`
			KubernetesSDConfigs []struct {
				Role       string
				Namespaces struct{ Names []string }
			} `yaml:"kubernetes_sd_configs"`
			RelabelConfigs []relabelConfig `yaml:"relabel_configs"`
		} `yaml:"scrape_configs"`
	}
	decodeStrict(t, file, &cfg)
	if len(cfg.ScrapeConfigs) != 1 || cfg.ScrapeConfigs[0].JobName != "housekeeper" {
		t.Fatalf("want one scrape config, job housekeeper: %+v", cfg.ScrapeConfigs)
	}
	sc := cfg.ScrapeConfigs[0]
	if _, err := time.ParseDuration(sc.ScrapeInterval); err != nil {
		t.Errorf("scrape_interval: %v", err)
	}
	if len(sc.KubernetesSDConfigs) != 1 || sc.KubernetesSDConfigs[0].Role != "pod" || !slices.Equal(sc.KubernetesSDConfigs[0].Namespaces.Names, []string{namespace}) {
		t.Errorf("want pod discovery in namespace %s: %+v", namespace, sc.KubernetesSDConfigs)
	}
	// The relabelling must keep the pods the manifests annotate, at their annotated port.
	labels := map[string]string{
		"__address__":                                                    "10.0.0.7:8012",
		"__meta_kubernetes_namespace":                                    namespace,
		"__meta_kubernetes_pod_name":                                     "housekeeper-bucket-7d9c",
		"__meta_kubernetes_pod_phase":                                    "Running",
		"__meta_kubernetes_pod_label_app_kubernetes_io_component":        "bucket",
		"__meta_kubernetes_pod_annotation_prometheus_io_scrape":          "true",
		"__meta_kubernetes_pod_annotation_prometheus_io_port":            "8080",
		"__meta_kubernetes_pod_annotation_prometheus_io_path":            "/metrics",
		"__meta_kubernetes_pod_annotationpresent_prometheus_io_scrape":   "true",
		"__meta_kubernetes_pod_container_port_number":                    "8012",
		"__meta_kubernetes_pod_label_app_kubernetes_io_name":             "housekeeper",
		"__meta_kubernetes_pod_annotationpresent_prometheus_io_path":     "true",
		"__meta_kubernetes_pod_annotationpresent_prometheus_io_port":     "true",
		"__meta_kubernetes_pod_label_app_kubernetes_io_part_of":          "housekeeper",
		"__meta_kubernetes_pod_labelpresent_app_kubernetes_io_component": "true",
	}
	got, keep := relabel(t, sc.RelabelConfigs, labels)
	if !keep {
		t.Fatal("the relabelling drops an annotated, running housekeeper pod")
	}
	for k, want := range map[string]string{"__address__": "10.0.0.7:8080", "__metrics_path__": "/metrics", "component": "bucket", "pod": "housekeeper-bucket-7d9c", "namespace": namespace} {
		if got[k] != want {
			t.Errorf("after relabelling %s = %q, want %q", k, got[k], want)
		}
	}
	labels["__meta_kubernetes_pod_annotation_prometheus_io_scrape"] = ""
	if _, keep := relabel(t, sc.RelabelConfigs, labels); keep {
		t.Error("the relabelling keeps a pod without prometheus.io/scrape")
	}
	// The manifests carry the annotations the relabelling reads, unless the chart's PodMonitor
	// scrapes them (monitoring.enabled): then none, so that nothing scrapes them twice.
	for _, overlay := range renderings {
		_, values := variant(t, overlay)
		podMonitor, _, _ := unstructured.NestedBool(values, "monitoring", "enabled")
		for _, m := range render(t, overlay) {
			if podSpecPath(m.obj) == nil || m.obj.GetKind() == "Job" { // a one-shot serves no /metrics
				continue
			}
			ann, _, _ := unstructured.NestedStringMap(m.obj.Object, "spec", "template", "metadata", "annotations")
			annotated := ann["prometheus.io/scrape"] == "true" && ann["prometheus.io/port"] == "8080" && ann["prometheus.io/path"] == "/metrics"
			switch {
			case podMonitor && ann["prometheus.io/scrape"] != "":
				t.Errorf("%s: the PodMonitor scrapes it, yet the pod template has the prometheus.io annotations: %v", m, ann)
			case !podMonitor && !annotated:
				t.Errorf("%s: pod template lacks the prometheus.io annotations: %v", m, ann)
			}
		}
	}
}

type relabelConfig struct {
	SourceLabels []string `yaml:"source_labels"`
	Separator    *string
	Regex        *string
	TargetLabel  string `yaml:"target_label"`
	Replacement  *string
	Action       string
}

// relabel applies Prometheus relabel rules (keep, drop, replace: the actions used here) the way
// Prometheus does: regexes are RE2, fully anchored; $1-style references in the replacement.
func relabel(t *testing.T, rules []relabelConfig, labels map[string]string) (map[string]string, bool) {
	t.Helper()
	out := map[string]string{}
	for k, v := range labels {
		out[k] = v
	}
	for i, r := range rules {
		sep, regex, replacement, action := ";", "(.*)", "$1", r.Action
		if r.Separator != nil {
			sep = *r.Separator
		}
		if r.Regex != nil {
			regex = *r.Regex
		}
		if r.Replacement != nil {
			replacement = *r.Replacement
		}
		if action == "" {
			action = "replace"
		}
		re, err := regexp.Compile("^(?s:" + regex + ")$")
		if err != nil {
			t.Fatalf("relabel_configs[%d]: regex %q is not RE2: %v", i, regex, err)
		}
		values := make([]string, len(r.SourceLabels))
		for j, l := range r.SourceLabels {
			values[j] = out[l]
		}
		value := strings.Join(values, sep)
		switch action {
		case "keep":
			if !re.MatchString(value) {
				return out, false
			}
		case "drop":
			if re.MatchString(value) {
				return out, false
			}
		case "replace":
			if r.TargetLabel == "" {
				t.Fatalf("relabel_configs[%d]: replace without target_label", i)
			}
			m := re.FindStringSubmatchIndex(value)
			if m == nil {
				continue
			}
			res := string(re.ExpandString(nil, replacement, value, m))
			if res == "" {
				delete(out, r.TargetLabel)
			} else {
				out[r.TargetLabel] = res
			}
		default:
			t.Fatalf("relabel_configs[%d]: action %q: the test knows keep, drop and replace", i, action)
		}
	}
	return out, true
}

func checkPrometheusRules(t *testing.T, file string) {
	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert       string
				Expr        string
				For         string
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
	decodeStrict(t, file, &rules)
	if len(rules.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: want alert, severity label and summary", r)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for: %v", r.Alert, err)
				}
			}
			checkPromQL(t, r.Alert, r.Expr)
		}
	}
}

// checkGrafanaDashboard checks the dashboard the chart ships to the seed's Plutono (a Grafana 7.5
// fork: schema 27 at most, the graph and stat panels): every panel queries the data source
// variable, which defaults to the seed Prometheus's data source, and every metric is on some
// panel. test/monitoring parses each query with Prometheus's parser against live metrics.
func checkGrafanaDashboard(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID, Title    string
		SchemaVersion int
		Templating    struct {
			List []struct {
				Name, Type string
				Current    struct{ Value string }
			}
		}
		Panels []struct {
			ID         int
			Type       string
			Title      string
			Datasource string
			GridPos    struct{ X, Y, W, H int } `json:"gridPos"`
			Targets    []struct {
				RefID string `json:"refId"`
				Expr  string
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&dash); err != nil {
		t.Fatalf("not a dashboard: %v", err)
	}
	if dash.UID == "" || dash.Title == "" || dash.SchemaVersion == 0 || dash.SchemaVersion > 27 {
		t.Errorf("uid %q title %q schemaVersion %d (Plutono reads up to 27)", dash.UID, dash.Title, dash.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = v.Current.Value
	}
	if _, ok := vars["namespace"]; !ok || vars["datasource"] != "prometheus-seed" {
		t.Errorf("want the variables datasource (default prometheus-seed, the seed Plutono's) and namespace: %+v", dash.Templating.List)
	}
	used := map[string]bool{}
	ids := map[int]bool{}
	var titles []string
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %q: gridPos %+v", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Type != "graph" && p.Type != "stat" {
			t.Errorf("panel %q: type %q, Plutono's graph or stat", p.Title, p.Type)
		}
		if p.Datasource != "$datasource" {
			t.Errorf("panel %q: datasource %q, want $datasource", p.Title, p.Datasource)
		}
		titles = append(titles, p.Title)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, name := range checkPromQL(t, p.Title, tg.Expr) {
				used[name] = true
			}
		}
	}
	for _, m := range metricNames {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
	for _, want := range []string{"Purges pending", "Purges done", "Since the last successful purge", "Handled by outcome",
		"Dead letters stored", "Cold starts", "Events published", "Queue depth"} {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q", want)
		}
	}
}

var metricRef = regexp.MustCompile(`\bhousekeeper_[a-z_]+`)

// checkPromQL checks what can be checked of a PromQL expression without Prometheus: brackets
// balance, every housekeeper metric exists (histograms by their _bucket series, quantiles over
// le), and returns the metrics it uses.
func checkPromQL(t *testing.T, where, expr string) []string {
	t.Helper()
	if strings.TrimSpace(expr) == "" {
		t.Errorf("%s: empty expression", where)
		return nil
	}
	var stack []rune
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	inString := false
	for _, r := range expr {
		switch {
		case r == '"':
			inString = !inString
		case inString:
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case pairs[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				t.Errorf("%s: unbalanced %q in %s", where, r, expr)
				return nil
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 || inString {
		t.Errorf("%s: unclosed brackets or quotes in %s", where, expr)
	}
	var used []string
	for _, ref := range metricRef.FindAllString(expr, -1) {
		name := ref
		isBucket := strings.HasSuffix(ref, "_bucket")
		if isBucket {
			name = strings.TrimSuffix(ref, "_bucket")
		}
		if !slices.Contains(metricNames, name) {
			t.Errorf("%s: %s is not a housekeeper metric", where, ref)
			continue
		}
		isHistogram := strings.HasSuffix(name, "_seconds") && !strings.HasSuffix(name, "_timestamp_seconds") && !gaugesInSeconds[name]
		if isHistogram != isBucket {
			t.Errorf("%s: %s: histograms are queried by their _bucket series, nothing else is", where, ref)
		}
		if isBucket && (!strings.Contains(expr, "histogram_quantile(") || !strings.Contains(expr, "le)")) {
			t.Errorf("%s: %s without histogram_quantile over le", where, ref)
		}
		if strings.HasSuffix(name, "_total") && !strings.Contains(expr, "rate(") && !strings.Contains(expr, "increase(") {
			t.Errorf("%s: counter %s not under rate or increase", where, ref)
		}
		used = append(used, name)
	}
	return used
}

// The metric names above are the ones the code declares, and the ones monitoring.md lists.
func TestMetricNamesMatchCode(t *testing.T) {
	inCode := metricsInCode(t, "../functions", "../bridge")
	for list, names := range map[string][]string{"metricNames (the dashboard's and alerts')": metricNames, "docs/monitoring.md's table": documentedMetrics(t, "docs/monitoring.md")} {
		if missing := without(inCode, names); len(missing) > 0 {
			t.Errorf("declared in the code, missing from %s: %v", list, missing)
		}
		if extra := without(names, inCode); len(extra) > 0 {
			t.Errorf("in %s, declared nowhere in the code: %v", list, extra)
		}
	}
}

// without is a's names that b lacks.
func without(a, b []string) []string {
	var out []string
	for _, name := range a {
		if !slices.Contains(b, name) {
			out = append(out, name)
		}
	}
	return out
}

// metricsInCode are the metrics every package under roots declares: the names of
// prometheus's metric options (Namespace, Subsystem and Name joined as prometheus.BuildFQName
// joins them) and of collectors' descriptors (prometheus.NewDesc). A name the test cannot read
// (neither a string literal nor a string constant of its package) fails it, so no metric
// escapes the list.
func metricsInCode(t *testing.T, roots ...string) []string {
	t.Helper()
	var names []string
	for _, root := range roots {
		err := filepath.WalkDir(root, func(dir string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			found, err := declaredMetrics(dir)
			names = append(names, found...)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// declaredMetrics are the metrics the package in dir declares outside its tests.
func declaredMetrics(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	consts := map[string]string{}
	for _, f := range files {
		for _, decl := range f.Decls {
			if gen, ok := decl.(*ast.GenDecl); ok && gen.Tok == token.CONST {
				for _, spec := range gen.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								consts[name.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			}
		}
	}
	var names []string
	var errs []error
	str := func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.BasicLit:
			if s, err := strconv.Unquote(e.Value); err == nil && e.Kind == token.STRING {
				return s
			}
		case *ast.Ident:
			if s, ok := consts[e.Name]; ok {
				return s
			}
		}
		errs = append(errs, fmt.Errorf("%s: a metric's name the test cannot read: %s", fset.Position(e.Pos()), types.ExprString(e)))
		return ""
	}
	for _, f := range files {
		prom := promImport(f)
		if prom == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if sel := promSelector(n.Type, prom); strings.HasSuffix(sel, "Opts") && sel != "HandlerOpts" {
					parts := map[string]string{}
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if key := kv.Key.(*ast.Ident).Name; key == "Namespace" || key == "Subsystem" || key == "Name" {
								parts[key] = str(kv.Value)
							}
						}
					}
					names = append(names, prometheus.BuildFQName(parts["Namespace"], parts["Subsystem"], parts["Name"]))
				}
			case *ast.CallExpr:
				if promSelector(n.Fun, prom) == "NewDesc" && len(n.Args) > 0 {
					names = append(names, str(n.Args[0]))
				}
			}
			return true
		})
	}
	return names, errors.Join(errs...)
}

// promImport is the name f imports the prometheus client under, or "".
func promImport(f *ast.File) string {
	for _, imp := range f.Imports {
		if imp.Path.Value == `"github.com/prometheus/client_golang/prometheus"` {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return "prometheus"
		}
	}
	return ""
}

// promSelector is the name e selects from the prometheus package (prom.X), or "".
func promSelector(e ast.Expr, prom string) string {
	if sel, ok := e.(*ast.SelectorExpr); ok {
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == prom {
			return sel.Sel.Name
		}
	}
	return ""
}

// documentedMetrics are the metrics the table under "## Metrics" in file lists.
func documentedMetrics(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Metrics\n")
	if !ok {
		t.Fatalf("%s has no section Metrics", file)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var names []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(housekeeper_\\w+)").FindAllStringSubmatch(section, -1) {
		names = append(names, m[1])
	}
	return names
}

// checkStreamConfigFile checks one stream definition for `nats stream add --config`: it is
// exactly the configuration the processes create at start-up (events.StreamConfigs, defaults).
// TestStreamConfigFilesOnNATS has a real nats-server accept it.
func checkStreamConfigFile(t *testing.T, file string) {
	var want jetstream.StreamConfig
	for _, cfg := range events.StreamConfigs().All() {
		if cfg.Name == strings.TrimSuffix(filepath.Base(file), ".json") {
			want = cfg
		}
	}
	if want.Name == "" {
		t.Fatalf("%s names no stream of events.StreamConfigs", file)
	}
	if *update {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(want); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := readStreamConfig(t, file)
	if !reflect.DeepEqual(got, want) {
		gotJSON, _ := json.Marshal(got)
		wantJSON, _ := json.Marshal(want)
		t.Errorf("infra/%s differs from events.StreamConfigs (run go test ./infra -run TestNonKubernetesFiles -update):\n got %s\nwant %s", file, gotJSON, wantJSON)
	}
}

func readStreamConfig(t *testing.T, file string) jetstream.StreamConfig {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cfg jetstream.StreamConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("infra/%s: %v", file, err)
	}
	return cfg
}

// A real nats-server creates the streams from the files, and `housekeeper setup`
// (events.EnsureStreams) then finds nothing to change: the files are what it would create.
func TestStreamConfigFilesOnNATS(t *testing.T) {
	env := testenv.Start(t, testenv.WithNATS())
	_, js := env.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created := map[string]jetstream.StreamConfig{}
	for _, file := range []string{"nats/HOUSEKEEPER.json", "nats/HOUSEKEEPER_DEADLETTER.json", "nats/HOUSEKEEPER_AUDIT.json"} {
		s, err := js.CreateStream(ctx, readStreamConfig(t, file))
		if err != nil {
			t.Fatalf("nats-server rejects infra/%s: %v", file, err)
		}
		created[s.CachedInfo().Config.Name] = s.CachedInfo().Config
	}
	if err := events.EnsureStreams(ctx, js); err != nil {
		t.Fatalf("the setup cannot reconcile the streams created from the files: %v", err)
	}
	for name, before := range created {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		after := s.CachedInfo().Config
		if !reflect.DeepEqual(before, after) {
			t.Errorf("stream %s changed when the setup ran:\n before %+v\n after  %+v", name, before, after)
		}
		if name == events.RecordStream && (!after.AllowMsgSchedules || !after.AllowMsgTTL) {
			t.Errorf("stream %s: message schedules %v, per-message TTL %v; both are needed for purges", name, after.AllowMsgSchedules, after.AllowMsgTTL)
		}
	}
}

// decodeStrict decodes a YAML file, failing on fields the target does not know.
func decodeStrict(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("infra/%s: %v", file, err)
	}
}
