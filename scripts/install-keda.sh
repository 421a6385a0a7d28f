#!/usr/bin/env bash
# Builds test/keda — KEDA built from the KEDA module, in a Go module of its own so that KEDA's
# dependencies never enter housekeeper's — into a cache outside the repository, once:
#
#   kedascaler-<key>/kedascaler        KEDA's nats-jetstream scaler as a command (test/keda)
#   keda-operator-<key>/keda-operator  KEDA's operator (test/keda/operator)
#   keda-operator-<key>/crds/          KEDA's CRDs (keda.sh) from the same module version
#
# each keyed by the hash of its sources (stack.KEDAScalerBinary and stack.KEDAOperatorBinary
# compute the same keys). Both are compiled by one `go build`, which shares the packages they
# both link (every scaler). test/autoscaling runs them.
#
#   scripts/install-keda.sh        # prints the scaler's path, then the operator's, on the last two lines
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src="$here/../test/keda"

key() { (cd "$src" && cat "$@") | sha256sum | cut -c1-16; }
cache=${HOUSEKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/housekeeper}
scaler_dir="$cache/keda/kedascaler-$(key go.mod go.sum main.go)"
scaler="$scaler_dir/kedascaler"
operator_dir="$cache/keda/keda-operator-$(key go.mod go.sum operator/main.go)"
operator="$operator_dir/keda-operator"

log() { printf '[keda] %s\n' "$*" >&2; }

# shellcheck source=progress.sh
source "$here/progress.sh"

if [[ -x "$scaler" && -x "$operator" && -d "$operator_dir/crds" ]]; then
  log "kedascaler cached at $scaler"
  log "keda-operator cached at $operator"
else
  mkdir -p "$cache/keda"
  tmp=$(mktemp -d "$cache/keda/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  log "kedascaler and keda-operator: fetching and compiling KEDA (the first time only; its module holds every scaler's cloud SDK, about 5 minutes on 2 cores, the operator's own packages and a second link about 25 s more)"
  start=$SECONDS
  # -o a directory: each main package's binary under its last path element (keda, operator).
  (cd "$src" && CGO_ENABLED=0 ${GO:-go} build -v -mod=readonly -trimpath -o "$tmp/" . ./operator 2>&1) | progress keda
  [[ -x "$tmp/keda" && -x "$tmp/operator" ]] || { log "the build produced no binaries"; exit 1; }
  log "compiled in $((SECONDS - start)) s"

  module=$(cd "$src" && ${GO:-go} list -mod=readonly -m -f '{{.Dir}}' github.com/kedacore/keda/v2)
  mkdir -p "$tmp/crds"
  cp "$module"/config/crd/bases/keda.sh_*.yaml "$tmp/crds/"
  chmod 0644 "$tmp"/crds/*.yaml

  if [[ ! -x "$scaler" ]]; then
    mkdir -p "$scaler_dir"
    mv "$tmp/keda" "$scaler"
  fi
  rm -rf "$operator_dir"
  mkdir -p "$operator_dir"
  mv "$tmp/crds" "$operator_dir/crds"
  mv "$tmp/operator" "$operator" # last: its presence says the directory is complete
  log "kedascaler installed at $scaler"
  log "keda-operator installed at $operator, KEDA's CRDs in $operator_dir/crds"
fi
echo "$scaler"
echo "$operator"
