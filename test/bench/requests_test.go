package bench

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"k8s.io/client-go/rest"

	"github.com/housekeeper-dev/housekeeper/functions/kube"
)

// verbs are the request verbs counted (list: a get of a collection, kube.Verb); watches are
// excluded everywhere.
var verbs = []string{"get", "list", "create", "update", "patch", "delete"}

// writeVerbs are the verbs that change objects.
var writeVerbs = []string{"create", "update", "patch", "delete"}

// counts are API requests by process, then verb.
type counts map[string]map[string]float64

// minus is c - base, per process and verb.
func (c counts) minus(base counts) counts {
	out := counts{}
	for proc, byVerb := range c {
		out[proc] = map[string]float64{}
		for verb, v := range byVerb {
			out[proc][verb] = v - base[proc][verb]
		}
	}
	return out
}

// byVerb sums over processes.
func (c counts) byVerb() map[string]float64 {
	out := map[string]float64{}
	for _, byVerb := range c {
		for verb, v := range byVerb {
			out[verb] += v
		}
	}
	return out
}

// total sums the given verbs over processes.
func (c counts) total(vs ...string) float64 {
	sum := 0.0
	bv := c.byVerb()
	for _, v := range vs {
		sum += bv[v]
	}
	return sum
}

// describe is "3.00 patch, 1.00 create, 2.00 get" per entry, largest first.
func describe(byVerb map[string]float64, n int) string {
	type kv struct {
		verb string
		v    float64
	}
	var kvs []kv
	for _, verb := range verbs {
		if byVerb[verb] != 0 {
			kvs = append(kvs, kv{verb, byVerb[verb] / float64(n)})
		}
	}
	sort.SliceStable(kvs, func(i, j int) bool { return kvs[i].v > kvs[j].v })
	if len(kvs) == 0 {
		return "none"
	}
	parts := make([]string, len(kvs))
	for i, x := range kvs {
		parts[i] = fmt.Sprintf("%.2f %s", x.v, x.verb)
	}
	return strings.Join(parts, ", ")
}

// requestCounter counts the requests of a rest.Config's clients by verb, and by verb and
// resource for the breakdown.
type requestCounter struct {
	mu         sync.Mutex
	byVerb     map[string]float64
	byResource map[string]float64 // "verb resource[/subresource]"
}

func newRequestCounter() *requestCounter {
	return &requestCounter{byVerb: map[string]float64{}, byResource: map[string]float64{}}
}

// instrument makes cfg count every request it sends.
func (c *requestCounter) instrument(cfg *rest.Config) {
	kube.OnRequest(cfg, func(r *http.Request) {
		verb := kube.Verb(r)
		c.mu.Lock()
		c.byVerb[verb]++
		c.byResource[verb+" "+kube.Resource(r.URL.Path)]++
		c.mu.Unlock()
	})
}

func (c *requestCounter) snapshot() (map[string]float64, map[string]float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, r := map[string]float64{}, map[string]float64{}
	for k, x := range c.byVerb {
		if k != "watch" {
			v[k] = x
		}
	}
	for k, x := range c.byResource {
		if !strings.HasPrefix(k, "watch ") {
			r[k] = x
		}
	}
	return v, r
}

// scrapeRequests reads housekeeper's request counter from a process's /metrics, without
// watches: by verb, and by "verb resource".
func scrapeRequests(addr string) (byVerb, byResource map[string]float64, err error) {
	all, err := scrapeAllRequests(addr)
	if err != nil {
		return nil, nil, err
	}
	byVerb, byResource = map[string]float64{}, map[string]float64{}
	for k, v := range all {
		if verb, _, _ := strings.Cut(k, " "); verb != "watch" {
			byVerb[verb] += v
			byResource[k] += v
		}
	}
	return byVerb, byResource, nil
}

// scrapeAllRequests reads housekeeper's request counter from a process's /metrics, watches
// included, by "verb resource".
func scrapeAllRequests(addr string) (map[string]float64, error) {
	byResource := map[string]float64{}
	prefix := kube.RequestsMetric + "{"
	err := metricLines(addr, func(line string) error {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			return nil
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			return fmt.Errorf("%s/metrics: cannot parse %q", addr, line)
		}
		resource, verb := labelValue(labels, "resource"), labelValue(labels, "verb")
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || verb == "" {
			return fmt.Errorf("%s/metrics: cannot parse %q", addr, line)
		}
		byResource[verb+" "+resource] += v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return byResource, nil
}

// metricLines calls each with every line of a process's /metrics, until each fails.
func metricLines(addr string, each func(line string) error) error {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s/metrics: %s: %s", addr, resp.Status, body)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if err := each(sc.Text()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// labelValue is the value of label name in a Prometheus text label set (`a="x",b="y"`).
func labelValue(labels, name string) string {
	for _, pair := range strings.Split(labels, ",") {
		if k, v, ok := strings.Cut(pair, "="); ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}
