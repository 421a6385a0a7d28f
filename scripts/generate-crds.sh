#!/usr/bin/env bash
# Copies the BackupBucket and BackupEntry CRDs that upstream Gardener generates (controller-gen
# over pkg/apis/extensions/v1alpha1) into infra/crds. The Gardener version is the one go.mod pins
# for github.com/gardener/gardener/pkg/apis, so types and schema always match.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
version=$(go list -m -f '{{.Version}}' github.com/gardener/gardener/pkg/apis)
dir=$(go mod download -json "github.com/gardener/gardener@$version" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
assets="$dir/pkg/component/extensions/crds/assets"
for kind in backupbuckets backupentries; do
  install -m 0644 "$assets/crd-extensions.gardener.cloud_$kind.yaml" "infra/crds/extensions.gardener.cloud_$kind.yaml"
done
echo "infra/crds: BackupBucket and BackupEntry CRDs from gardener $version"
