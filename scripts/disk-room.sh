#!/usr/bin/env bash
# Makes room on the disk before the tests: Go's build cache grows with every tree compiled with
# -race and trims itself only of entries unused for five days, so on a machine that runs the
# tests many times a day it filled a 92 GB disk (54 GB of cache), and the suites that write —
# the test node's images, Swift, etcd — failed in ways that named no disk. When less than
# DISK_ROOM_GB (default 15) is free on the cache's filesystem, this deletes the cache's entries
# unused for DISK_ROOM_AGE_MIN minutes (default 360): go marks an entry used by touching it when
# its mtime is over an hour old, and a missing entry is only compiled again. It says what it
# freed, and warns when room is still short.
#
#   GO=go scripts/disk-room.sh
set -euo pipefail
GO=${GO:-go}
want_gb=${DISK_ROOM_GB:-15}
age_min=${DISK_ROOM_AGE_MIN:-360}

log() { printf 'disk-room: %s\n' "$*" >&2; }

cache=$("$GO" env GOCACHE)
[[ -d "$cache" ]] || exit 0
free_gb() { df -P -B1G "$cache" | awk 'NR == 2 {print $4}'; }

before=$(free_gb)
if (( before >= want_gb )); then
  exit 0
fi
log "${before} GB free on the filesystem of Go's build cache ($cache), less than ${want_gb}: deleting its entries unused for ${age_min} minutes"
find "$cache" -type f -mmin "+${age_min}" ! -name README ! -name trim.txt ! -name testexpire.txt -delete
after=$(free_gb)
log "${after} GB free now (the cache is $(du -sh "$cache" | cut -f1))"
if (( after < want_gb )); then
  log "warning: still less than ${want_gb} GB free: the test node, Swift and etcd write to this disk"
fi
