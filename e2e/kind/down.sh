#!/usr/bin/env bash
# Delete the kind cluster made by e2e/kind/up.sh (idempotent).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../cluster/versions.sh
source "$here/../cluster/versions.sh"
command -v kind >/dev/null 2>&1 || { echo "no kind on PATH; nothing to do"; exit 0; }
if kind get clusters 2>/dev/null | grep -qx "$PHASED_CLUSTER_NAME"; then
  kind delete cluster --name "$PHASED_CLUSTER_NAME" --kubeconfig "$PHASED_KUBECONFIG"
fi
rm -f "$PHASED_KUBECONFIG"
echo "kind cluster '$PHASED_CLUSTER_NAME' is gone"
