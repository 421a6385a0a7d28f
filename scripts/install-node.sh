#!/usr/bin/env bash
# Installs what a Kubernetes node of the tests needs (scripts/stack/node.go), once:
#  - from the Debian archive: containerd (its CRI plugin is the kubelet's container runtime), runc,
#    the CNI plugins (bridge, host-local, loopback, portmap), iptables and conntrack for kube-proxy;
#  - built from the Go module proxy at KUBERNETES_VERSION: kubelet, kube-controller-manager,
#    kube-scheduler and kube-proxy, from the scratch module scripts/install-controlplane.sh builds
#    kube-apiserver in, with the same flags: one `go build` for the four, which reuses every package
#    they share with kube-apiserver from Go's build cache;
#  - CoreDNS (the cluster DNS of the node) at COREDNS_VERSION, with only the plugins the node uses;
#  - the node's NetworkPolicy enforcer (NodeOptions.NetworkPolicies): sigs.k8s.io/kube-network-policies
#    at KUBE_NETWORK_POLICIES_VERSION, patched to queue packets the way this kernel can (see
#    build_network_policies), and nft (Debian's nftables) with which the node checks its rules.
# Needs root and apt. Measured on 2 cores with the Go module cache warm and Go's build cache
# holding kube-apiserver's packages: the four Kubernetes binaries 81 s, CoreDNS 78 s, the Debian
# packages 9 s; kube-network-policies 227 s with Go's build cache empty (912 packages; 511 s with
# the module cache empty too, on a machine loaded 11 deep); installed, it takes 0.1 s.
#
#   scripts/install-node.sh        # prints the asset directory on its last line
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${HOUSEKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/housekeeper}
assets="$cache/node/kube-${KUBERNETES_VERSION}-coredns-${COREDNS_VERSION}"
log() { printf '[node] %s\n' "$*" >&2; }

# shellcheck source=progress.sh
source "$here/progress.sh"
# shellcheck source=apt.sh
source "$here/apt.sh"

install_packages() {
  # iproute2 and util-linux (nsenter) are in every Debian; listed because the node runs them.
  # nftables: nft, with which StartNode sees the NetworkPolicy enforcer's table in place.
  apt_install "$cache/node" "the node's runtime" containerd runc containernetworking-plugins iptables conntrack iproute2 util-linux nftables || exit 1
  log "$(dpkg-query -W -f='containerd ${Version}' containerd), $(dpkg-query -W -f='runc ${Version}' runc), $(dpkg-query -W -f='CNI plugins ${Version}' containernetworking-plugins), $(dpkg-query -W -f='iptables ${Version}' iptables), $(dpkg-query -W -f='nftables ${Version}' nftables) installed"
}

kube_bins=(kubelet kube-controller-manager kube-scheduler kube-proxy)

build_kube() {
  local missing=() b
  for b in "${kube_bins[@]}"; do [[ -x "$assets/$b" ]] || missing+=("$b"); done
  if (( ${#missing[@]} == 0 )); then log "${kube_bins[*]} $KUBERNETES_VERSION cached in $assets"; return; fi
  # The scratch module (and kube-apiserver, built first) come from install-controlplane.sh; it
  # holds the lock below while it builds, so a run of it beside this one (make tools) is waited
  # for, not raced.
  "$here/install-controlplane.sh" >/dev/null
  local work="$cache/build/kube-apiserver-$KUBERNETES_VERSION"
  [[ -f "$work/go.mod" ]] || { log "no scratch module at $work (install-controlplane.sh)"; exit 1; }
  exec 9>"$cache/build/kube-$KUBERNETES_VERSION.lock"
  flock 9
  local minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
  local ldflags="-s -w" pkg
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  local pkgs=()
  for b in "${kube_bins[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  log "${kube_bins[*]} $KUBERNETES_VERSION: resolving their packages in $work"
  (cd "$work" && GOFLAGS=-mod=mod go get "${pkgs[@]/%/@$KUBERNETES_VERSION}" >/dev/null 2>&1 || true)
  log "${kube_bins[*]} $KUBERNETES_VERSION: compiling (once; what they share with kube-apiserver comes from Go's build cache)"
  rm -rf "$assets.tmp" && mkdir -p "$assets.tmp" "$assets"
  (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -v -trimpath -ldflags "$ldflags" \
      -o "$assets.tmp/" "${pkgs[@]}" 2>&1) | progress "${kube_bins[*]}"
  for b in "${kube_bins[@]}"; do mv "$assets.tmp/$b" "$assets/$b"; done
  rm -rf "$assets.tmp"
  exec 9>&-
  log "kubelet: $("$assets/kubelet" --version)"
}

build_coredns() {
  local bin="$assets/coredns"
  local work="$cache/build/coredns-$COREDNS_VERSION"
  # CoreDNS's own main (coremain.Run) with only the plugins the node's Corefile uses, in the order
  # of CoreDNS's plugin.cfg (the order they see a query), instead of its every plugin (the cloud
  # DNS providers' SDKs among them): a fraction of the compile.
  local main
  main=$(cat <<'GO'
// CoreDNS with the plugins of the housekeeper test node's Corefile (scripts/stack/node.go).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	dnsserver.Directives = []string{"bind", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes", "forward"}
}

func main() { coremain.Run() }
GO
)
  local key
  key=$(printf '%s' "$main" | sha256sum | cut -c1-16)
  if [[ -x "$bin" && "$(cat "$bin.key" 2>/dev/null)" == "$key" ]]; then log "coredns $COREDNS_VERSION cached at $bin"; return; fi
  rm -rf "$work" && mkdir -p "$work" "$assets"
  printf '%s\n' "$main" >"$work/main.go"
  printf 'module housekeeper.local/build/coredns\n\ngo 1.25.0\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" >"$work/go.mod"
  log "coredns $COREDNS_VERSION: resolving github.com/coredns/coredns"
  (cd "$work" && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1)
  log "coredns $COREDNS_VERSION: compiling (once)"
  (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -v -trimpath -ldflags "-s -w" -o "$bin.tmp" . 2>&1) | progress coredns
  mv "$bin.tmp" "$bin"
  echo "$key" >"$bin.key"
  log "coredns: $("$bin" -version | head -1)"
}

# The NetworkPolicy enforcer: sigs.k8s.io/kube-network-policies (the SIG Network's own), its cmd
# built in a copy of its module (its own go.mod and go.sum) into a directory of its version. It
# hands the first packet of each connection of a pod that policies select to itself through an
# nfqueue, with nftables' `queue` expression — which needs the kernel's nft_queue
# (CONFIG_NFT_QUEUE); this VM's kernel has none and loads no modules: the rule is refused with
# ENOENT and nothing would be enforced. The one patch: the same verdict through the xtables NFQUEUE
# target (revision 3) run by nft_compat, as iptables-nft's `-j NFQUEUE` does; the same queue, the
# same bypass flag (off: with the enforcer gone, queued packets are dropped). The binary's .key is
# the patch's hash, so a changed patch is rebuilt.
build_network_policies() {
  local version=$KUBE_NETWORK_POLICIES_VERSION
  local dir="$cache/node/kube-network-policies-$version"
  local bin="$dir/kube-network-policies"
  local work="$cache/build/kube-network-policies-$version"
  local patch
  patch=$(cat <<'GO'
package networkpolicy

// Added by housekeeper's scripts/install-node.sh.

import (
	"encoding/binary"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// xtQueue is the verdict "queue to queue id" as the xtables NFQUEUE target (revision 3) run by
// nft_compat, instead of nftables' own queue expression, which a kernel without nft_queue
// (CONFIG_NFT_QUEUE) refuses with ENOENT. With failOpen, the bypass flag: accept the packet
// while no program listens on the queue.
func xtQueue(id int, failOpen bool) *expr.Target {
	var flags uint16
	if failOpen {
		flags = 1 // NFQ_FLAG_BYPASS
	}
	// struct xt_NFQ_info_v3 { __u16 queuenum; __u16 queues_total; __u16 flags; }, in host order.
	info := binary.NativeEndian.AppendUint16(nil, uint16(id))
	info = binary.NativeEndian.AppendUint16(info, 1)
	info = binary.NativeEndian.AppendUint16(info, flags)
	u := xt.Unknown(info)
	return &expr.Target{Name: "NFQUEUE", Rev: 3, Info: &u}
}
GO
)
  local key
  key=$(printf '%s' "$patch" | sha256sum | cut -c1-16)
  if [[ -x "$bin" && "$(cat "$bin.key" 2>/dev/null)" == "$key" ]]; then log "kube-network-policies $version cached at $bin"; return; fi
  log "kube-network-policies $version: downloading sigs.k8s.io/kube-network-policies"
  local src
  mkdir -p "$cache"
  src=$(cd "$cache" && GOFLAGS= go mod download -json "sigs.k8s.io/kube-network-policies@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -d "$src" ]] || { log "go mod download sigs.k8s.io/kube-network-policies@$version gave no source directory"; exit 1; }
  rm -rf "$work" && mkdir -p "$(dirname "$work")" "$dir"
  cp -r "$src" "$work" && chmod -R u+w "$work"
  local go_file="$work/pkg/networkpolicy/controller.go"
  # Both places that build the verdict (the postrouting and the DNS prerouting chains); the bypass
  # flag is set in xtQueue. (dnsagent.go's queue is for AdminNetworkPolicy's domains, not run.)
  sed -i -e 's|queue := &expr.Queue{Num: uint16(c.config.QueueID)}|queue := xtQueue(c.config.QueueID, c.config.FailOpen)|' \
         -e 's|queue.Flag = expr.QueueFlagBypass|// the bypass flag: set by xtQueue|' "$go_file"
  if [[ $(grep -c 'queue := xtQueue(' "$go_file") != 2 || $(grep -c 'expr.Queue{' "$go_file") != 0 ]]; then
    log "kube-network-policies $version: the patch no longer fits $go_file (its queue rules changed): update build_network_policies"
    exit 1
  fi
  printf '%s\n' "$patch" >"$work/pkg/networkpolicy/zz_housekeeper_xtqueue.go"
  log "kube-network-policies $version: compiling (once)"
  (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -v -trimpath -ldflags "-s -w" -o "$bin.tmp" ./cmd 2>&1) | progress kube-network-policies
  mv "$bin.tmp" "$bin"
  echo "$key" >"$bin.key"
  rm -rf "$work"
  log "kube-network-policies $version built at $bin"
}

# The builds first: on a fresh machine the other installers' apt (Swift's) is done by then.
build_kube
build_coredns
build_network_policies
install_packages
echo "$assets"
