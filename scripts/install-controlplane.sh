#!/usr/bin/env bash
# Builds kube-apiserver and etcd from the Go module proxy into a versioned cache outside the
# repository, once. k8s.io/kubernetes cannot be built as a plain dependency: its go.mod points
# the staging modules at ./staging, so we build from a scratch module whose replace directives
# point them at their tagged versions instead.
#
#   scripts/install-controlplane.sh        # prints the asset directory on its last line
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${HOUSEKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/housekeeper}
assets="$cache/controlplane/kube-${KUBERNETES_VERSION}-etcd-${ETCD_VERSION}"
mkdir -p "$assets" "$cache/build"
# One build in the scratch modules at a time: install-node.sh builds the node's binaries in the
# same module (after running this script), and make tools runs both side by side.
exec 9>"$cache/build/kube-$KUBERNETES_VERSION.lock"
flock 9

log() { printf '[controlplane] %s\n' "$*" >&2; }

# shellcheck source=progress.sh
source "$here/progress.sh"

build_kube_apiserver() {
  local bin="$assets/kube-apiserver"
  local work="$cache/build/kube-apiserver-$KUBERNETES_VERSION"
  # The scratch module stays: install-node.sh builds the node's binaries in it (and without it
  # kube-apiserver is built again, from Go's build cache when that is warm).
  if [[ -x "$bin" && -f "$work/go.mod" ]]; then log "kube-apiserver $KUBERNETES_VERSION cached at $bin"; return; fi
  local staging="v0.${KUBERNETES_VERSION#v1.}"   # v1.36.3 -> v0.36.3
  rm -rf "$work" && mkdir -p "$work"
  log "kube-apiserver $KUBERNETES_VERSION: fetching k8s.io/kubernetes from the module proxy"
  local gomod
  gomod=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  {
    echo "module housekeeper.local/build/kube-apiserver"
    echo
    grep -E '^(go|godebug) ' "$gomod"
    echo
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    echo
    echo "replace ("
    sed -n 's#^\t\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$staging"'#p' "$gomod"
    echo ")"
  } >"$work/go.mod"
  log "kube-apiserver $KUBERNETES_VERSION: resolving $(grep -c ' => ' "$work/go.mod") staging modules at $staging"
  (cd "$work" && GOFLAGS=-mod=mod go mod download k8s.io/kubernetes && GOFLAGS=-mod=mod go get "k8s.io/kubernetes/cmd/kube-apiserver@$KUBERNETES_VERSION" >/dev/null 2>&1 || true)
  local minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
  local ldflags="-s -w"
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  log "kube-apiserver $KUBERNETES_VERSION: compiling (the longest tool: about 11 minutes the first time on 2 cores, beside the others)"
  (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -v -trimpath -ldflags "$ldflags" \
      -o "$bin.tmp" k8s.io/kubernetes/cmd/kube-apiserver 2>&1) | progress kube-apiserver
  mv "$bin.tmp" "$bin"
  log "kube-apiserver: $("$bin" --version)"
}

build_etcd() {
  local bin="$assets/etcd"
  if [[ -x "$bin" ]]; then log "etcd $ETCD_VERSION cached at $bin"; return; fi
  local work="$cache/build/etcd-$ETCD_VERSION"
  rm -rf "$work" && mkdir -p "$work"
  cat >"$work/main.go" <<'GO'
// The etcd binary is etcdmain.Main, as in etcd's own server/main.go.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  printf 'module housekeeper.local/build/etcd\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >"$work/go.mod"
  log "etcd $ETCD_VERSION: resolving go.etcd.io/etcd/server/v3"
  (cd "$work" && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1)
  log "etcd $ETCD_VERSION: compiling (the first time only; all tools together about 18 minutes on 2 cores)"
  (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -v -trimpath -ldflags "-s -w" -o "$bin.tmp" . 2>&1) | progress etcd
  mv "$bin.tmp" "$bin"
  log "etcd: $("$bin" --version | head -1)"
}

build_etcd
build_kube_apiserver
echo "$assets"
