package stack

import (
	"fmt"
	"net"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeConfigs writes the components' configuration into etc/.
func (n *Node) writeConfigs() error {
	nn := n.net
	apiPort := n.kube.env.ControlPlane.APIServer.SecureServing.Port
	cfg := n.kube.Config
	kubeconfig := func(server string) ([]byte, error) {
		c := clientcmdapi.NewConfig()
		c.Clusters["housekeeper"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData}
		c.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
		c.Contexts["housekeeper"] = &clientcmdapi.Context{Cluster: "housekeeper", AuthInfo: "admin"}
		c.CurrentContext = "housekeeper"
		return clientcmd.Write(*c)
	}
	// The components in the node's namespace reach the API server at the host's end of the link.
	nodeKubeconfig, err := kubeconfig("https://" + net.JoinHostPort(n.HostIP, apiPort))
	if err != nil {
		return err
	}
	hostKubeconfig, err := kubeconfig(cfg.Host)
	if err != nil {
		return err
	}

	containerd := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  # The VM has no CAP_SYS_RESOURCE: without this every sandbox fails to start (runc cannot set a
  # lower oom_score_adj than containerd's own: "can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
    max_conf_num = 1

  # Registries' hosts.toml, read at each pull (PullFromHostRegistry).
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[9]q
`, n.path("containerd/root"), n.path("containerd/state"), n.containerdSocket(), n.containerdSocket()+".ttrpc",
		n.path("containerd/opt"), pauseImage, cniBinDir, n.path("cni/net.d"), n.registryHostsDir())

	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "housekeeper",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, nn.podCIDR, n.path("cni/ipam"))

	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This VM's cgroups are v1 (the kubelet refuses v1 unless told).
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%[1]s
containerRuntimeEndpoint: unix://%[2]s
address: %[3]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
clusterDNS: [%[4]s]
clusterDomain: %[5]s
resolvConf: /etc/resolv.conf
registerNode: true
failSwapOn: false
serializeImagePulls: false
# Never collect the imported images (nothing could pull them again).
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# The node shares the host's disk, which may be large, thin and nearly full (a build cache):
# pressure is absolute bytes left, not a share of a size the disk may never have. A node under
# disk pressure takes no pod, and no test here is about that.
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "256Mi"
  nodefs.inodesFree: "1%%"
  imagefs.available: "256Mi"
  imagefs.inodesFree: "1%%"
evictionPressureTransitionPeriod: 5s
nodeStatusUpdateFrequency: 2s
syncFrequency: 10s
fileCheckFrequency: 5s
shutdownGracePeriod: 0s
rotateCertificates: false
serverTLSBootstrap: false
`, n.cgroup, n.containerdSocket(), n.NodeIP, n.DNS, clusterDomain)

	proxy := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[1]s
hostnameOverride: %[2]s
mode: iptables
clusterCIDR: %[3]s
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
iptables:
  localhostNodePorts: false
  syncPeriod: 30s
  minSyncPeriod: 0s
# Leave the conntrack table's size and timeouts alone (host-wide or not writable here).
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, n.path("etc/node.kubeconfig"), n.Name, nn.podCIDR)

	corefile := fmt.Sprintf(`.:53 {
    bind %[1]s
    ready %[1]s:8181
    health %[1]s:8180
    errors
    kubernetes %[2]s in-addr.arpa ip6.arpa {
        kubeconfig %[3]s housekeeper
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 5
    loadbalance
}
`, n.HostIP, clusterDomain, n.path("etc/host.kubeconfig"))

	files := map[string][]byte{
		"etc/node.kubeconfig":          nodeKubeconfig,
		"etc/host.kubeconfig":          hostKubeconfig,
		"etc/ca.crt":                   nn.caPEM,
		"etc/containerd.toml":          []byte(containerd),
		"cni/net.d/10-bridge.conflist": []byte(cni),
		"etc/kubelet.yaml":             []byte(kubelet),
		"etc/kube-proxy.yaml":          []byte(proxy),
		"etc/Corefile":                 []byte(corefile),
	}
	for name, data := range files {
		if err := os.WriteFile(n.path(name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
