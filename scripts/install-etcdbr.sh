#!/usr/bin/env bash
# Builds etcd-backup-restore's etcdbrctl and the etcd release it links (3.5.x, not the control
# plane's 3.6), and the etcd 3.4 a shoot runs by default, from the Go module proxy into a
# versioned cache outside the repository, once.
# `go install …@version` fails for etcd-backup-restore: its go.mod has a replace directive, and
# the proxy refuses its version list. So we download the module at its tag, copy it to a
# writable directory and build it there with the go.sum it ships (-mod=readonly).
#
#   scripts/install-etcdbr.sh        # prints the asset directory on its last line
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${HOUSEKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/housekeeper}
assets="$cache/etcdbr/etcdbrctl-${ETCDBR_VERSION}-etcd-${ETCDBR_ETCD_VERSION}"
mkdir -p "$assets"

log() { printf '[etcdbr] %s\n' "$*" >&2; }

# shellcheck source=progress.sh
source "$here/progress.sh"

# Both binaries are built in one writable copy of the etcd-backup-restore module, so etcd is
# compiled from exactly the go.etcd.io/etcd/server/v3 its go.mod requires.
work="$cache/build/etcdbrctl-$ETCDBR_VERSION"
module=github.com/gardener/etcd-backup-restore

prepare() {
  [[ -f "$work/go.mod" ]] && return
  log "etcdbrctl $ETCDBR_VERSION: fetching $module from the module proxy"
  local src scratch
  # Outside any module (the cache may lie inside one), so nothing's go.mod is touched.
  scratch=$(mktemp -d)
  src=$(cd "$scratch" && GOFLAGS=-mod=mod go mod download -json "$module@$ETCDBR_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  rmdir "$scratch"
  [[ -d "$src" ]] || { log "go mod download gave no module directory for $module@$ETCDBR_VERSION"; exit 1; }
  local linked
  linked=$(sed -n 's#^\tgo.etcd.io/etcd/server/v3 \(v[0-9.]*\).*#\1#p' "$src/go.mod")
  if [[ "$linked" != "$ETCDBR_ETCD_VERSION" ]]; then
    log "etcd-backup-restore $ETCDBR_VERSION links etcd $linked, but ETCDBR_ETCD_VERSION is $ETCDBR_ETCD_VERSION: fix scripts/versions.env"
    exit 1
  fi
  # The module cache is read-only: build in a writable copy, with a main package for etcd.
  rm -rf "$work.tmp" && mkdir -p "$work.tmp" && cp -R "$src/." "$work.tmp/" && chmod -R u+w "$work.tmp"
  mkdir -p "$work.tmp/housekeeper-etcd"
  cat >"$work.tmp/housekeeper-etcd/main.go" <<'GO'
// The etcd binary is etcdmain.Main, as in etcd's own server/main.go.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  log "etcdbrctl $ETCDBR_VERSION: downloading its dependencies"
  (cd "$work.tmp" && go mod download)
  rm -rf "$work" && mv "$work.tmp" "$work"
}

build_etcdbrctl() {
  local bin="$assets/etcdbrctl"
  if [[ -x "$bin" ]]; then log "etcdbrctl $ETCDBR_VERSION cached at $bin"; return; fi
  prepare
  local ldflags="-s -w -X $module/pkg/version.Version=$ETCDBR_VERSION -X $module/pkg/version.GitSHA=$ETCDBR_VERSION"
  log "etcdbrctl $ETCDBR_VERSION: compiling (the first time only; all tools together about 18 minutes on 2 cores)"
  # -mod=readonly: exactly the dependencies and checksums etcd-backup-restore ships.
  (cd "$work" && CGO_ENABLED=0 go build -mod=readonly -v -trimpath -ldflags "$ldflags" -o "$bin.tmp" . 2>&1) | progress etcdbrctl
  mv "$bin.tmp" "$bin"
  log "etcdbrctl: $("$bin" --version 2>&1 | sed -n 's/.*msg="\(etcd-backup-restore Version: [^"]*\)".*/\1/p')"
}

build_etcd() {
  local bin="$assets/etcd"
  if [[ -x "$bin" ]]; then log "etcd $ETCDBR_ETCD_VERSION cached at $bin"; return; fi
  prepare
  log "etcd $ETCDBR_ETCD_VERSION: compiling (most packages are shared with etcdbrctl)"
  # -mod=mod: etcd's own main imports a few packages (the gRPC proxy's) whose checksums
  # etcd-backup-restore's go.sum lacks; their versions are fixed by its go.mod all the same.
  (cd "$work" && CGO_ENABLED=0 go build -mod=mod -v -trimpath -ldflags "-s -w" -o "$bin.tmp" ./housekeeper-etcd 2>&1) | progress etcd
  mv "$bin.tmp" "$bin"
  log "etcd: $("$bin" --version | head -1)"
}

# etcd v3.4 has no replace directive: go install builds its main package (the module's root).
build_etcd34() {
  local dir="$cache/etcdbr/etcd-$ETCD34_VERSION"
  local bin="$dir/etcd"
  if [[ -x "$bin" ]]; then log "etcd $ETCD34_VERSION cached at $bin"; return; fi
  mkdir -p "$dir"
  log "etcd $ETCD34_VERSION: fetching and compiling go.etcd.io/etcd@$ETCD34_MODULE_VERSION (the first time only)"
  rm -rf "$dir/bin.tmp"
  (GOBIN="$dir/bin.tmp" CGO_ENABLED=0 GOFLAGS=-mod=mod go install -v -trimpath -ldflags "-s -w" \
      "go.etcd.io/etcd@$ETCD34_MODULE_VERSION" 2>&1) | progress etcd34
  [[ -x "$dir/bin.tmp/etcd" ]] || { log "etcd $ETCD34_VERSION: the build produced no binary"; exit 1; }
  mv "$dir/bin.tmp/etcd" "$bin" && rm -rf "$dir/bin.tmp"
  log "etcd: $("$bin" --version | head -1)"
}

build_etcdbrctl
build_etcd
build_etcd34
rm -rf "$work"
echo "$assets"
