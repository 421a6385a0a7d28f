# shellcheck shell=bash
# apt_install, for the install-*.sh scripts (sourced; they define log): installs the Debian
# packages of a list that are missing, without starting their services (the tests start their
# own), beside the other installers' apt (make tools runs them side by side). Returns 0 when all
# are installed; apt's output goes to DIR/apt.log.
#
#   apt_install DIR "what needs them" PACKAGE...
apt_install() {
  local dir=$1 what=$2
  shift 2
  local packages=("$@") missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  (( ${#missing[@]} == 0 )) && return 0
  command -v apt-get >/dev/null || { log "apt-get not found: $what comes from the Debian archive (packages: ${packages[*]})"; return 1; }
  (( EUID == 0 )) || { log "installing ${missing[*]} needs root"; return 1; }
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  fi
  # `apt-get update` fails at once when another apt holds its lock (DPkg::Lock::Timeout does not
  # cover it): let install-swift.sh's apt go first, and retry ours while another apt holds one.
  if pgrep -f 'install-swift\.sh' >/dev/null; then
    log "waiting for install-swift.sh (its apt-get) to finish"
    while pgrep -f 'install-swift\.sh' >/dev/null; do sleep 2; done
  fi
  log "installing ${missing[*]} from the Debian archive (once)"
  export DEBIAN_FRONTEND=noninteractive
  mkdir -p "$dir"
  apt_log="$dir/apt.log"
  : >"$apt_log"
  local start=$SECONDS
  if ! { apt_get update -qq && apt_get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends "${packages[@]}"; }; then
    tail -20 "$apt_log" >&2
    log "apt-get failed; its whole output is in $apt_log"
    return 1
  fi
  log "installed in $((SECONDS - start)) s (apt's output in $apt_log)"
}

# apt_get runs apt-get into $apt_log, again (for 5 minutes at most) while another apt holds a lock.
apt_get() {
  local try
  for try in $(seq 60); do
    if apt-get "$@" >>"$apt_log" 2>&1; then return 0; fi
    tail -3 "$apt_log" | grep -q -e 'Could not get lock' -e 'Unable to lock' || return 1
    sleep 5
  done
  return 1
}
