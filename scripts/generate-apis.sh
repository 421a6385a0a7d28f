#!/usr/bin/env bash
# Generates from housekeeper's own API types (functions/apis/...): their deepcopy functions and
# the CRDs in infra/chart/files/crds (backup.housekeeper.dev_*.yaml, installed by the chart),
# with controller-gen run from the Go module proxy at the version pinned here.
set -euo pipefail
CONTROLLER_TOOLS_VERSION=v0.20.1
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
gen=(go run "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION")
"${gen[@]}" object paths=./functions/apis/...
"${gen[@]}" crd paths=./functions/apis/... output:crd:artifacts:config=infra/chart/files/crds
echo "functions/apis: deepcopy; infra/chart/files/crds: backup.housekeeper.dev CRDs (controller-gen $CONTROLLER_TOOLS_VERSION)"
