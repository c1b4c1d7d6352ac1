#!/usr/bin/env bash
# Show whether the local test cluster runs (`make cluster-status`): its
# processes, its nodes by kind and readiness, and the kubeconfig to use.
# Exits 0 when it is up, 1 when it is not.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.sh
source "$here/versions.sh"

cluster_state="$PHASED_KWOK_WORKDIR/clusters/$PHASED_CLUSTER_NAME"
KUBECTL="$PHASED_BIN_K8S/kubectl"

if [[ ! -d "$cluster_state" ]]; then
  echo "cluster '$PHASED_CLUSTER_NAME': not running (start it with 'make cluster')"
  exit 1
fi
echo "cluster '$PHASED_CLUSTER_NAME' ($cluster_state)"
up=1
for c in etcd kube-apiserver kube-controller-manager kube-scheduler kwok-controller; do
  pid="$(cat "$cluster_state/pids/$c.pid" 2>/dev/null || true)"
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    printf '  %-24s running (pid %s)\n' "$c" "$pid"
  else
    printf '  %-24s NOT RUNNING (log: %s)\n' "$c" "$cluster_state/logs/$c.log"
    up=0
  fi
done
# The real nodes' processes (nodes-up.sh), if any.
source "$here/nodes-env.sh"
for f in "$PHASED_NODES_DIR"/pids/*.pid; do
  [[ -f "$f" ]] || continue
  c="$(basename "$f" .pid)"; pid="$(cat "$f" 2>/dev/null || true)"
  if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
    printf '  %-24s running (pid %s)\n' "$c" "$pid"
  else
    printf '  %-24s NOT RUNNING (log: %s)\n' "$c" "$PHASED_NODES_DIR/logs/$c.log"
  fi
done
if (( up )) && [[ -x "$KUBECTL" && -f "$PHASED_KUBECONFIG" ]]; then
  k() { "$KUBECTL" --kubeconfig "$PHASED_KUBECONFIG" --request-timeout=5s "$@"; }
  if k get --raw /readyz >/dev/null 2>&1; then
    echo "  kube-apiserver           ready at https://127.0.0.1:$PHASED_APISERVER_PORT"
    k get nodes -L phased.dev/sim-node-kind --no-headers 2>/dev/null | awk '
      { kind = ($NF == "" ? "?" : $NF); total[kind]++; if ($2 == "Ready") ready[kind]++ }
      END { for (k in total) printf "  nodes %-18s %d (%d Ready)\n", k, total[k], ready[k] }'
    k -n kube-system get configmap phased-test-cluster >/dev/null 2>&1 \
      && echo "  marker                   kube-system/phased-test-cluster present" \
      || { echo "  marker                   MISSING (not a complete test cluster)"; up=0; }
  else
    echo "  kube-apiserver           not answering /readyz"
    up=0
  fi
fi
echo "export KUBECONFIG=$PHASED_KUBECONFIG"
if (( up )); then exit 0; fi
echo "the cluster is half up: 'make cluster' tears it down and starts afresh"
exit 1
