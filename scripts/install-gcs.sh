#!/usr/bin/env bash
# Builds the GCS server the tests and `make run` use — fake-gcs-server (BSD-2-Clause), an
# emulator of Google Cloud Storage's JSON API (buckets, objects, resumable uploads, the batch
# endpoint) with a filesystem backend — from the Go module proxy into a versioned cache outside
# the repository, once.
#
#   scripts/install-gcs.sh        # prints the binary's path on its last line
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${HOUSEKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/housekeeper}
dir="$cache/gcs/fake-gcs-server-$FAKE_GCS_SERVER_VERSION"
bin="$dir/fake-gcs-server"

log() { printf '[gcs] %s\n' "$*" >&2; }

# shellcheck source=progress.sh
source "$here/progress.sh"

if [[ -x "$bin" ]]; then
  log "fake-gcs-server $FAKE_GCS_SERVER_VERSION cached at $bin"
else
  mkdir -p "$dir"
  log "fake-gcs-server $FAKE_GCS_SERVER_VERSION: fetching and compiling github.com/fsouza/fake-gcs-server (the first time only)"
  rm -rf "$dir/bin.tmp"
  (GOBIN="$dir/bin.tmp" CGO_ENABLED=0 GOFLAGS=-mod=mod go install -v -trimpath -ldflags "-s -w" \
      "github.com/fsouza/fake-gcs-server@$FAKE_GCS_SERVER_VERSION" 2>&1) | progress fake-gcs-server
  [[ -x "$dir/bin.tmp/fake-gcs-server" ]] || { log "fake-gcs-server: the build produced no binary"; exit 1; }
  mv "$dir/bin.tmp/fake-gcs-server" "$bin" && rm -rf "$dir/bin.tmp"
  log "fake-gcs-server $FAKE_GCS_SERVER_VERSION installed at $bin"
fi
echo "$bin"
