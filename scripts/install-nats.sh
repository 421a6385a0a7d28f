#!/usr/bin/env bash
# Builds nats-server as a program, at the version go.mod pins (the tests also embed it), into a
# versioned cache outside the repository, once: a NATS cluster in the stack is three processes,
# so that one can be killed.
#
#   scripts/install-nats.sh        # prints the binary's path on its last line
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."

version=$(${GO:-go} list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)
cache=${HOUSEKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/housekeeper}
dir="$cache/nats/nats-server-$version"
bin="$dir/nats-server"

log() { printf '[nats] %s\n' "$*" >&2; }

if [[ -x "$bin" ]]; then
  log "nats-server $version cached at $bin"
else
  mkdir -p "$dir"
  log "nats-server $version: compiling github.com/nats-io/nats-server/v2 (the first time only)"
  CGO_ENABLED=0 ${GO:-go} build -trimpath -o "$bin.tmp" github.com/nats-io/nats-server/v2
  mv "$bin.tmp" "$bin"
  log "nats-server $version installed at $bin"
fi
echo "$bin"
