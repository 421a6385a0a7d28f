#!/usr/bin/env bash
# Installs what bringing docker-compose.yaml up needs (test/compose), once:
#  - from the Debian archive: Docker Engine (docker.io, 20.10: dockerd, the docker CLI,
#    docker-proxy; containerd and runc come with it) and busybox-static (the shell and wget the
#    test's stand-ins for the public alpine images carry, as those images do);
#  - built from the Go module proxy: Docker Compose v2 at DOCKER_COMPOSE_VERSION (the
#    `docker compose` CLI plugin; Debian's docker-compose 1.29 rejects the file's top-level
#    `name:`), kubectl at KUBERNETES_VERSION (in the scratch module install-controlplane.sh
#    builds kube-apiserver in) and etcdctl at ETCD_VERSION: the programs the compose file's k3s,
#    kube-init and etcd services run besides the server itself.
# The CLI plugin is linked into /usr/local/lib/docker/cli-plugins when nothing else is there, so
# that `docker compose` works in a shell too. Needs root and apt. Measured on 2 cores shared
# with other builds, the module cache warm: Compose 5 min (1,018 packages, 3 min of CPU), etcdctl
# 20 s, kubectl 1 min (after kube-apiserver, whose packages it shares), the Debian packages 14 s;
# installed, it takes 0.3 s.
#
#   scripts/install-docker.sh        # prints the cache directory of the built programs on its last line
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# Docker Compose's pin lives here until scripts/versions.env carries it.
DOCKER_COMPOSE_VERSION=${DOCKER_COMPOSE_VERSION:-v2.40.3}

cache=${HOUSEKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/housekeeper}
dir="$cache/docker"
log() { printf '[docker] %s\n' "$*" >&2; }

# shellcheck source=progress.sh
source "$here/progress.sh"
# shellcheck source=apt.sh
source "$here/apt.sh"

build_compose() {
  local out="$dir/compose-$DOCKER_COMPOSE_VERSION"
  local bin="$out/docker-compose"
  if [[ -x "$bin" ]]; then log "docker compose $DOCKER_COMPOSE_VERSION cached at $bin"; return; fi
  # Built as the main module, from its source in the module cache: its go.mod has exclude
  # directives, which `go install module@version` refuses.
  local work="$cache/build/compose-$DOCKER_COMPOSE_VERSION" src
  src=$(cd "$cache/build" && go mod download -json "github.com/docker/compose/v2@$DOCKER_COMPOSE_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  [[ -f "$src/go.mod" ]] || { log "github.com/docker/compose/v2@$DOCKER_COMPOSE_VERSION: not downloaded"; exit 1; }
  rm -rf "$work" "$out.tmp" && mkdir -p "$out.tmp"
  cp -r "$src" "$work" && chmod -R u+w "$work"
  log "docker compose $DOCKER_COMPOSE_VERSION: compiling (once)"
  (cd "$work" && CGO_ENABLED=0 go build -v -trimpath \
      -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$DOCKER_COMPOSE_VERSION" \
      -o "$out.tmp/docker-compose" ./cmd 2>&1) | progress "docker compose"
  rm -rf "$out" "$work" && mv "$out.tmp" "$out"
  log "$("$bin" version)"
}

build_kubectl() {
  local bin="$dir/kubectl-$KUBERNETES_VERSION/kubectl"
  if [[ -x "$bin" ]]; then log "kubectl $KUBERNETES_VERSION cached at $bin"; return; fi
  # The scratch module whose replace directives point k8s.io/kubernetes's staging modules at
  # their tags; install-controlplane.sh makes it (and holds the lock below while it builds).
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
  log "kubectl $KUBERNETES_VERSION: resolving k8s.io/kubernetes/cmd/kubectl in $work"
  (cd "$work" && GOFLAGS=-mod=mod go get "k8s.io/kubernetes/cmd/kubectl@$KUBERNETES_VERSION" >/dev/null 2>&1 || true)
  log "kubectl $KUBERNETES_VERSION: compiling (once; what it shares with kube-apiserver comes from Go's build cache)"
  mkdir -p "$(dirname "$bin")"
  (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -v -trimpath -ldflags "$ldflags" \
      -o "$bin.tmp" k8s.io/kubernetes/cmd/kubectl 2>&1) | progress kubectl
  mv "$bin.tmp" "$bin"
  exec 9>&-
  log "kubectl: $("$bin" version --client 2>/dev/null | head -1)"
}

build_etcdctl() {
  local bin="$dir/etcdctl-$ETCD_VERSION/etcdctl"
  if [[ -x "$bin" ]]; then log "etcdctl $ETCD_VERSION cached at $bin"; return; fi
  # etcdctl's go.mod replaces etcd's other modules with ../ paths, so `go install @version`
  # refuses it: a scratch module whose main is etcdctl's own (ctlv3.MustStart).
  local work="$cache/build/etcdctl-$ETCD_VERSION"
  rm -rf "$work" && mkdir -p "$work" "$(dirname "$bin")"
  cat >"$work/main.go" <<'GO'
// The etcdctl binary is ctlv3.MustStart, as in etcd's own etcdctl/main.go.
package main

import "go.etcd.io/etcd/etcdctl/v3/ctlv3"

func main() { ctlv3.MustStart() }
GO
  printf 'module housekeeper.local/build/etcdctl\n\ngo 1.24\n\nrequire go.etcd.io/etcd/etcdctl/v3 %s\n' "$ETCD_VERSION" >"$work/go.mod"
  log "etcdctl $ETCD_VERSION: resolving go.etcd.io/etcd/etcdctl/v3"
  (cd "$work" && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1)
  log "etcdctl $ETCD_VERSION: compiling (once)"
  (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -v -trimpath -ldflags "-s -w" -o "$bin.tmp" . 2>&1) | progress etcdctl
  mv "$bin.tmp" "$bin"
  log "etcdctl: $("$bin" version | head -1)"
}

install_packages() {
  apt_install "$dir" "Docker" docker.io busybox-static || exit 1
  log "$(dpkg-query -W -f='docker.io ${Version}' docker.io), $(dpkg-query -W -f='busybox-static ${Version}' busybox-static) installed"
}

# `docker compose` in a shell: the plugin where the docker CLI looks for it, unless another
# Compose is there already.
link_plugin() {
  local plugins=/usr/local/lib/docker/cli-plugins target="$dir/compose-$DOCKER_COMPOSE_VERSION/docker-compose"
  (( EUID == 0 )) || return 0
  if [[ -e "$plugins/docker-compose" && ! -L "$plugins/docker-compose" ]]; then
    log "$plugins/docker-compose is not ours: left alone (the test uses $target)"
    return
  fi
  if [[ -L "$plugins/docker-compose" && "$(readlink "$plugins/docker-compose")" == "$dir/compose-"* || ! -e "$plugins/docker-compose" ]]; then
    mkdir -p "$plugins" && ln -sfn "$target" "$plugins/docker-compose"
  fi
}

mkdir -p "$dir" "$cache/build"
# The builds first: on a fresh machine the other installers' apt (Swift's, the node's) is done by then.
build_compose
build_etcdctl
build_kubectl
install_packages
link_plugin
log "$(dockerd --version)"
echo "$dir"
