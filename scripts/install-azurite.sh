#!/usr/bin/env bash
# Installs Azurite, pinned by scripts/azurite/package-lock.json, into a cache outside the
# repository (keyed by the lockfile's hash), once. Prints the install directory on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${HOUSEKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/housekeeper}
lock="$here/azurite/package-lock.json"
key=$(sha256sum "$lock" | cut -c1-16)
dir="$cache/azurite/$key"
bin="$dir/node_modules/.bin/azurite-blob"
if [[ -x "$bin" ]]; then
  echo "[azurite] cached at $dir" >&2
else
  command -v npm >/dev/null || { echo "[azurite] npm is required (Debian: apt-get install nodejs npm)" >&2; exit 1; }
  echo "[azurite] installing $(sed -n 's/.*"azurite": "\(.*\)".*/\1/p' "$here/azurite/package.json" | head -1) from npm into $dir" >&2
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  cp "$here/azurite/package.json" "$lock" "$dir.tmp/"
  # The lockfile names every tarball (resolved) and its hash, so npm fetches the tarballs and
  # no package metadata. A registry that stalls fails one attempt, not the install.
  for attempt in 1 2 3; do
    if (cd "$dir.tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
          --fetch-retries=4 --fetch-timeout=120000 >&2); then
      break
    fi
    (( attempt < 3 )) || { echo "[azurite] npm ci failed 3 times" >&2; exit 1; }
    echo "[azurite] npm ci failed (attempt $attempt of 3); trying again" >&2
    rm -rf "$dir.tmp/node_modules"
  done
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  # node_modules/.bin links are relative, so the move keeps them working.
fi
echo "[azurite] $("$bin" --version)" >&2
echo "$dir"
