#!/usr/bin/env bash
# Builds the S3 server the tests and `make run` use — versitygw (Apache-2.0), a gateway whose
# posix backend keeps buckets as directories, with versioning and object lock — from the Go
# module proxy into a versioned cache outside the repository, once.
#
#   scripts/install-s3.sh        # prints the binary's path on its last line
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${HOUSEKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/housekeeper}
dir="$cache/s3/versitygw-$VERSITYGW_VERSION"
bin="$dir/versitygw"

log() { printf '[s3] %s\n' "$*" >&2; }

# shellcheck source=progress.sh
source "$here/progress.sh"

if [[ -x "$bin" ]]; then
  log "versitygw $VERSITYGW_VERSION cached at $bin"
else
  mkdir -p "$dir"
  log "versitygw $VERSITYGW_VERSION: fetching and compiling github.com/versity/versitygw (the first time only; all tools together about 18 minutes on 2 cores)"
  rm -rf "$dir/bin.tmp"
  (GOBIN="$dir/bin.tmp" CGO_ENABLED=0 GOFLAGS=-mod=mod go install -v -trimpath \
      -ldflags "-s -w -X main.Version=$VERSITYGW_VERSION -X main.Build=$VERSITYGW_VERSION" \
      "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION" 2>&1) | progress versitygw
  [[ -x "$dir/bin.tmp/versitygw" ]] || { log "versitygw: the build produced no binary"; exit 1; }
  mv "$dir/bin.tmp/versitygw" "$bin" && rm -rf "$dir/bin.tmp"
  log "versitygw $VERSITYGW_VERSION installed at $bin"
fi
log "versitygw: $("$bin" --version | head -1 | tr -s ' ')"
echo "$bin"
