# Sourced by the install scripts. `go build -v` prints each package as it is compiled: progress
# turns that into a line every 100 packages, through the sourcing script's log function, and
# passes errors through.
#
#   ... go build -v ... 2>&1 | progress WHAT
progress() {
  local what=$1 n=0
  while IFS= read -r line; do
    case "$line" in
      go:\ downloading*) ;;
      go:*|'#'*|*.go:[0-9]*) printf '%s\n' "$line" >&2 ;;
      *) n=$((n + 1)); if (( n % 100 == 0 )); then log "$what: $n packages compiled"; fi ;;
    esac
  done
  log "$what: $n packages compiled (the others came from Go's build cache)"
}
