#!/usr/bin/env bash
# Installs the OpenStack Swift the tests run against — Debian's Swift proxy, account, container
# and object servers, memcached, and Keystone (its library, keystone-manage and WSGI app, run
# under uwsgi) for v3 password and application-credential auth — from the Debian archive, once;
# then prepares a Keystone database (schema, fernet keys, the bootstrap admin) in the cache,
# which every start copies instead of migrating a new one (about 10 s saved a start).
# Needs root and apt (Debian 12 packages Swift 2.30 and Keystone 22).
#
#   scripts/install-swift.sh        # prints the prepared Keystone directory on its last line
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

cache=${HOUSEKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/housekeeper}
log() { printf '[swift] %s\n' "$*" >&2; }

packages=(swift swift-proxy swift-object swift-container swift-account python3-swift memcached
  python3-keystone python3-keystonemiddleware uwsgi-core uwsgi-plugin-python3)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if (( ${#missing[@]} )); then
  command -v apt-get >/dev/null || { log "apt-get not found: Swift comes from the Debian archive (packages: ${packages[*]})"; exit 1; }
  (( EUID == 0 )) || { log "installing ${missing[*]} needs root"; exit 1; }
  # Packages must not start their services: the stack runs the servers itself.
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  fi
  log "installing ${missing[*]} from the Debian archive (about a minute, once)"
  export DEBIAN_FRONTEND=noninteractive
  mkdir -p "$cache/swift"
  apt_log="$cache/swift/apt.log"
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${packages[@]}"; } >"$apt_log" 2>&1; then
    tail -20 "$apt_log" >&2
    log "apt-get failed; its whole output is in $apt_log"
    exit 1
  fi
  log "installed (apt's output in $apt_log)"
fi
version=$(dpkg-query -W -f='${Version}' python3-keystone | tr ':~+' '---')
dir="$cache/swift/keystone-$version"
if [[ -f "$dir/keystone.db" ]]; then
  log "Keystone $version prepared at $dir"
else
  log "Keystone $version: preparing its database (schema, keys, bootstrap admin; once)"
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"/{fernet-keys,fernet-receipts,credential-keys}
  cat > "$dir.tmp/keystone.conf" <<CONF
[DEFAULT]
use_stderr = true
[database]
connection = sqlite:///$dir.tmp/keystone.db
[token]
provider = fernet
[fernet_tokens]
key_repository = $dir.tmp/fernet-keys
[fernet_receipts]
key_repository = $dir.tmp/fernet-receipts
[credential]
key_repository = $dir.tmp/credential-keys
[cache]
enabled = false
CONF
  km=(keystone-manage --config-file "$dir.tmp/keystone.conf")
  "${km[@]}" db_sync 2>>"$dir.tmp/manage.log"
  # WAL: without it an endpoint create fails with "database is locked" (a read transaction of
  # the same request is still open when it commits).
  /usr/bin/python3 -c 'import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute("PRAGMA journal_mode=WAL")' "$dir.tmp/keystone.db"
  "${km[@]}" fernet_setup --keystone-user root --keystone-group root 2>>"$dir.tmp/manage.log"
  "${km[@]}" credential_setup --keystone-user root --keystone-group root 2>>"$dir.tmp/manage.log"
  # The admin of the stack's Keystone (a development value; scripts/stack/swift.go).
  "${km[@]}" bootstrap --bootstrap-password housekeeper-local-keystone --bootstrap-username admin \
    --bootstrap-project-name admin --bootstrap-role-name admin --bootstrap-service-name keystone \
    --bootstrap-region-id RegionOne --bootstrap-public-url http://127.0.0.1:5000/v3 2>>"$dir.tmp/manage.log"
  rm -f "$dir.tmp/keystone.conf"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  log "Keystone $version prepared at $dir"
fi
log "$(dpkg-query -W -f='swift ${Version}' swift), $(dpkg-query -W -f='keystone ${Version}' python3-keystone)"
echo "$dir"
