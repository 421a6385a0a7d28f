#!/usr/bin/env bash
# Builds test/keda — KEDA's own nats-jetstream scaler from the KEDA module, in a Go module of its
# own so that KEDA's dependencies never enter housekeeper's — into a cache outside the
# repository, keyed by the hash of its sources, once. test/autoscaling runs it.
#
#   scripts/install-keda.sh        # prints the binary's path on its last line
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src="$here/../test/keda"

key=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-16)
cache=${HOUSEKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/housekeeper}
dir="$cache/keda/kedascaler-$key"
bin="$dir/kedascaler"

log() { printf '[keda] %s\n' "$*" >&2; }

# shellcheck source=progress.sh
source "$here/progress.sh"

if [[ -x "$bin" ]]; then
  log "kedascaler $key cached at $bin"
else
  mkdir -p "$dir"
  log "kedascaler: fetching and compiling KEDA's scalers (the first time only; its module holds every scaler's cloud SDK, about 5 minutes on 2 cores)"
  (cd "$src" && CGO_ENABLED=0 ${GO:-go} build -v -mod=readonly -trimpath -o "$bin.tmp" . 2>&1) | progress kedascaler
  [[ -x "$bin.tmp" ]] || { log "kedascaler: the build produced no binary"; exit 1; }
  mv "$bin.tmp" "$bin"
  log "kedascaler installed at $bin"
fi
echo "$bin"
