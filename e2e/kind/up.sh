#!/usr/bin/env bash
# Create a kind cluster the e2e suite can run on (needs Docker and kind):
# labels the workers like GPU nodes (the labels NVIDIA GPU feature discovery
# sets, Ascend labels, topology labels), advertises GPU capacity with a node
# status patch, creates the marker ConfigMap kube-system/phased-test-cluster and
# writes the kubeconfig to the same path as the local cluster ($PHASED_KUBECONFIG).
#
#   KIND_NODE_IMAGE   node image (default: kind's own default)
#   PHASED_CLUSTER_NAME, PHASED_KUBECONFIG   from e2e/cluster/versions.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../cluster/versions.sh
source "$here/../cluster/versions.sh"

started=$SECONDS
step() { printf '[kind %3ds] %s\n' "$((SECONDS - started))" "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

PYTHON="${PYTHON:-python3}"
command -v docker >/dev/null 2>&1 || die "no docker on PATH: the kind path needs Docker (or use 'make cluster' for the local one)"
docker info >/dev/null 2>&1 || die "docker is installed but not answering (is the daemon running, may you use it?)"
command -v kind >/dev/null 2>&1 || die "no kind on PATH: go install sigs.k8s.io/kind@latest (https://kind.sigs.k8s.io)"
KUBECTL="$PHASED_BIN_K8S/kubectl"
[[ -x "$KUBECTL" ]] || KUBECTL="$(command -v kubectl || true)"
[[ -n "$KUBECTL" ]] || die "no kubectl: run e2e/cluster/build.sh kubernetes, or install kubectl"
command -v "$PYTHON" >/dev/null 2>&1 || die "no '$PYTHON' on PATH"

if kind get clusters 2>/dev/null | grep -qx "$PHASED_CLUSTER_NAME"; then
  step "kind cluster '$PHASED_CLUSTER_NAME' exists: deleting it first"
  kind delete cluster --name "$PHASED_CLUSTER_NAME"
fi
mkdir -p "$(dirname "$PHASED_KUBECONFIG")"
rm -f "$PHASED_KUBECONFIG"

step "creating kind cluster '$PHASED_CLUSTER_NAME' (1 control plane, 4 workers)"
image_args=()
[[ -n "${KIND_NODE_IMAGE:-}" ]] && image_args=(--image "$KIND_NODE_IMAGE")
kind create cluster --name "$PHASED_CLUSTER_NAME" --config "$here/cluster.yaml" \
  --kubeconfig "$PHASED_KUBECONFIG" --wait 180s "${image_args[@]}"
chmod 600 "$PHASED_KUBECONFIG"
k() { "$KUBECTL" --kubeconfig "$PHASED_KUBECONFIG" "$@"; }

step "labelling the workers and advertising their accelerators"
# worker -> kind:index of e2e/cluster/nodes.py
assign=(h100:0 h100:1 h200:0 ascend:0)
mapfile -t workers < <(k get nodes -l '!node-role.kubernetes.io/control-plane' \
  -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort)
(( ${#workers[@]} >= ${#assign[@]} )) || die "expected ${#assign[@]} workers, found ${#workers[@]}"
for i in "${!assign[@]}"; do
  node="${workers[$i]}"
  labels=(); resources=()
  while IFS= read -r line; do
    if [[ "$line" == *=* ]]; then labels+=("$line"); else resources+=("$line"); fi
  done < <("$PYTHON" "$here/../cluster/nodes.py" --print-labels "${assign[$i]}")
  k label node "$node" --overwrite "${labels[@]}" >/dev/null
  for r in "${resources[@]}"; do
    name="${r%%:*}"; count="${r##*:}"
    esc="${name//\//~1}"   # JSON-pointer escape of the '/' in the resource name
    k patch node "$node" --subresource=status --type=json -p "[
      {\"op\":\"add\",\"path\":\"/status/capacity/$esc\",\"value\":\"$count\"},
      {\"op\":\"add\",\"path\":\"/status/allocatable/$esc\",\"value\":\"$count\"}]" >/dev/null
  done
  echo "  $node: ${assign[$i]} (${resources[*]:-no accelerators})"
done

step "marking the cluster as a test cluster (ConfigMap kube-system/phased-test-cluster)"
k -n kube-system create configmap phased-test-cluster \
  --from-literal=purpose="Phased end-to-end tests; safe to wipe" \
  --from-literal=cluster="$PHASED_CLUSTER_NAME" \
  --from-literal=createdBy=e2e/kind/up.sh \
  --from-literal=runtime=kind \
  --dry-run=client -o yaml | k apply -f - >/dev/null

step "kind cluster '$PHASED_CLUSTER_NAME' is up"
echo "export KUBECONFIG=$PHASED_KUBECONFIG"
