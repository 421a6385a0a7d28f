#!/usr/bin/env bash
# Installs every tool make run and make test need (kube-apiserver and etcd, Azurite, fake-gcs-server, Swift with Keystone,
# etcdbrctl with its etcd, versitygw, nats-server as a program, KEDA's scaler) and downloads
# the modules the tests build, all at once: on a fresh machine each spends part of its time
# waiting on the network, which the others' compiling fills. Each prints its own [prefixed]
# progress; what is installed already takes no time.
#
#   scripts/install-tools.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

declare -A jobs=()
for tool in controlplane azurite etcdbr s3 gcs swift nats keda node docker; do
  "$here/install-$tool.sh" >/dev/null &
  jobs[$tool]=$!
done
(cd "$here/.." && ${GO:-go} mod download) &
jobs[modules]=$!
# test/knative's modules (Knative's, about 500 MB) download beside the builds, not at test time.
(cd "$here/../test/knative" && ${GO:-go} mod download) &
jobs[knative-modules]=$!
# test/monitoring's (Prometheus's: about 55 MB beyond housekeeper's and test/knative's) likewise.
(cd "$here/../test/monitoring" && ${GO:-go} mod download) &
jobs[monitoring-modules]=$!

failed=()
for name in "${!jobs[@]}"; do
  wait "${jobs[$name]}" || failed+=("$name")
done
if (( ${#failed[@]} )); then
  printf '[tools] failed: %s (see its lines above)\n' "${failed[*]}" >&2
  exit 1
fi
