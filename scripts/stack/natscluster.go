package stack

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// NATSCluster is nats-server run as separate processes, as production runs it: one node, or
// three routed on loopback. A process can be killed (an embedded server hands its leaderships
// off when it shuts down, so it cannot crash).
type NATSCluster struct {
	// URL lists every node's client URL, comma-separated, as housekeeper's --nats-url takes it.
	URL string
	// MonitorEndpoint is the first node's monitoring host:port, as KEDA's
	// natsServerMonitoringEndpoint names a NATS service.
	MonitorEndpoint string
	Nodes           []*NATSNode
}

// NATSNode is one nats-server of a NATSCluster.
type NATSNode struct {
	// Name is the server name: what stream and consumer infos call their leader.
	Name       string
	ClientURL  string
	MonitorURL string
	// Args is the command line, for a harness that runs the process itself.
	Args []string

	logs io.Writer
	proc *Process
}

// NATSOption changes how NATSClusterLayout configures its nodes.
type NATSOption func(*natsOptions)

type natsOptions struct {
	sync string // jetstream.sync_interval; "" for nats-server's default
}

// NATSDefaultSync leaves JetStream's sync interval at nats-server's default (every two
// minutes) instead of syncing every write: as the chart's NATS runs, which replicates a write
// to a quorum before it acknowledges it.
func NATSDefaultSync() NATSOption { return func(o *natsOptions) { o.sync = "" } }

// NATSClusterLayout writes the configuration of nodes nats-servers (1 or 3) under dir and
// returns them, not started. Node i listens on 127.0.0.i, and every node uses the same client,
// monitoring and route ports: KEDA's scaler finds a consumer's leader by host with the one
// monitoring port it was given. Every write is synced before it is acknowledged (a single
// server is only as durable as its sync; a cluster acknowledges once replicated) unless opts
// say otherwise (NATSDefaultSync). The ports
// stay the nodes' across restarts, so clients' URLs stay valid. include, if not empty, names a
// configuration file in dir every node includes (TLS, accounts).
func NATSClusterLayout(dir string, nodes int, include string, opts ...NATSOption) ([]*NATSNode, error) {
	o := natsOptions{sync: "always"}
	for _, opt := range opts {
		opt(&o)
	}
	if nodes != 1 && nodes != 3 {
		return nil, fmt.Errorf("a NATS cluster of %d nodes: run 1, or 3 for quorum", nodes)
	}
	bin, err := NATSServerBinary()
	if err != nil {
		return nil, err
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = FreePort(); err != nil {
			return nil, fmt.Errorf("no free port for nats-server: %w", err)
		}
	}
	client, monitor, route := ports[0], ports[1], ports[2]
	var routes []string
	for i := range nodes {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.%d:%d", i+1, route))
	}
	var out []*NATSNode
	for i := range nodes {
		host, name := fmt.Sprintf("127.0.0.%d", i+1), fmt.Sprintf("n%d", i+1)
		cluster := ""
		if nodes > 1 {
			cluster = fmt.Sprintf("cluster {\n  name: housekeeper\n  listen: %s:%d\n  routes: [%s]\n}\n", host, route, strings.Join(routes, ", "))
		}
		if include != "" {
			// nats-server resolves an include relative to the including file.
			cluster += fmt.Sprintf("include %q\n", include)
		}
		conf := filepath.Join(dir, "nats-"+name+".conf")
		sync := ""
		if o.sync != "" {
			sync = "  sync_interval: " + o.sync + "\n"
		}
		content := fmt.Sprintf("server_name: %s\nlisten: %s:%d\nhttp: %s:%d\njetstream {\n  store_dir: %q\n%s}\n%s",
			name, host, client, host, monitor, filepath.Join(dir, "jetstream-"+name), sync, cluster)
		if err := os.WriteFile(conf, []byte(content), 0o644); err != nil {
			return nil, err
		}
		out = append(out, &NATSNode{
			Name:       name,
			ClientURL:  fmt.Sprintf("nats://%s:%d", host, client),
			MonitorURL: fmt.Sprintf("http://%s:%d", host, monitor),
			Args:       []string{bin, "-c", conf},
		})
	}
	return out, nil
}

// StartNATSCluster starts nodes nats-servers (1 or 3) with their files under dir, each
// including include (see NATSClusterLayout) and logging to logs(its name), and waits until
// JetStream answers on each.
func StartNATSCluster(dir string, nodes int, include string, logs func(name string) io.Writer, opts ...NATSOption) (*NATSCluster, error) {
	layout, err := NATSClusterLayout(dir, nodes, include, opts...)
	if err != nil {
		return nil, err
	}
	c := &NATSCluster{Nodes: layout, MonitorEndpoint: strings.TrimPrefix(layout[0].MonitorURL, "http://")}
	var urls []string
	for _, n := range layout {
		n.logs = logs(n.Name)
		urls = append(urls, n.ClientURL)
	}
	c.URL = strings.Join(urls, ",")
	// A cluster node is ready only once its peers run: start them all, then wait.
	for _, n := range layout {
		if err := n.start(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	for _, n := range layout {
		if err := n.AwaitReady(time.Minute); err != nil {
			c.Stop()
			return nil, err
		}
	}
	// JetStream requests sent before the meta leader is elected get no answer at all, and an
	// R3 stream created before the leader counts every peer current fails ("no suitable peers
	// for placement, peer offline"): wait until every node's full health check passes and the
	// meta leader sees its peers current.
	for _, n := range layout {
		err := Poll(time.Minute, 100*time.Millisecond, "nats-server "+n.Name+" to be healthy", func() (bool, string, error) {
			err := httpOK(n.MonitorURL + "/healthz")
			return err == nil, fmt.Sprint(err), nil
		})
		if err != nil {
			c.Stop()
			return nil, err
		}
	}
	if nodes > 1 {
		if err := Poll(time.Minute, 100*time.Millisecond, "the meta leader to see every peer current", c.metaPeersCurrent); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// metaPeersCurrent says whether the meta leader reports every other node as a current, online
// peer.
func (c *NATSCluster) metaPeersCurrent() (bool, string, error) {
	var jsz struct {
		Meta *struct {
			Leader   string `json:"leader"`
			Replicas []struct {
				Name    string `json:"name"`
				Current bool   `json:"current"`
				Offline bool   `json:"offline"`
			} `json:"replicas"`
		} `json:"meta_cluster"`
	}
	for _, n := range c.Nodes {
		resp, err := http.Get(n.MonitorURL + "/jsz")
		if err != nil {
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(&jsz)
		resp.Body.Close()
		if err != nil || jsz.Meta == nil || jsz.Meta.Leader != n.Name {
			continue
		}
		current := 0
		for _, r := range jsz.Meta.Replicas {
			if r.Current && !r.Offline {
				current++
			}
		}
		return current == len(c.Nodes)-1, fmt.Sprintf("meta leader %s: %d of %d peers current", n.Name, current, len(c.Nodes)-1), nil
	}
	return false, "no node is the meta leader", nil
}

// Node returns the node named name, or nil.
func (c *NATSCluster) Node(name string) *NATSNode {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Stop stops every node.
func (c *NATSCluster) Stop() {
	for _, n := range c.Nodes {
		n.Stop()
	}
}

func (n *NATSNode) start() error {
	cmd := exec.Command(n.Args[0], n.Args[1:]...)
	cmd.Stdout, cmd.Stderr = n.logs, n.logs
	p, err := StartProcess(cmd)
	if err != nil {
		return err
	}
	n.proc = p
	return nil
}

// Start starts the node again after Kill or Stop and waits until it is ready.
func (n *NATSNode) Start() error {
	if n.proc != nil && !n.proc.Exited() {
		return nil
	}
	if err := n.start(); err != nil {
		return err
	}
	return n.AwaitReady(time.Minute)
}

// AwaitReady waits until the node serves JetStream (a cluster node: once it has a meta leader).
func (n *NATSNode) AwaitReady(limit time.Duration) error {
	return Poll(limit, 100*time.Millisecond, "nats-server "+n.Name+" to serve JetStream", func() (bool, string, error) {
		if n.proc != nil && n.proc.Exited() {
			return false, "", fmt.Errorf("nats-server %s exited (see its log)", n.Name)
		}
		err := n.Ready()
		return err == nil, fmt.Sprint(err), nil
	})
}

// Ready returns nil once the node serves with JetStream enabled (a cluster node may still be
// without a meta leader: a node restarted alone while quorum is lost is ready).
func (n *NATSNode) Ready() error { return httpOK(n.MonitorURL + "/healthz?js-enabled-only=true") }

func httpOK(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// Kill ends the node with SIGKILL, as a crash does, and waits until it is gone.
func (n *NATSNode) Kill() {
	if n.proc == nil || n.proc.Exited() {
		return
	}
	_ = n.proc.Signal(syscall.SIGKILL)
	<-n.proc.Done()
}

// Stop shuts the node down gracefully.
func (n *NATSNode) Stop() {
	if n.proc != nil {
		n.proc.Stop()
	}
}

// Pid is the node's process id, 0 while it is not running.
func (n *NATSNode) Pid() int {
	if n.proc == nil || n.proc.Exited() {
		return 0
	}
	return n.proc.Pid()
}
