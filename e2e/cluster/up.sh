#!/usr/bin/env bash
# Start the local test cluster (`make cluster`): etcd, kube-apiserver,
# kube-controller-manager (node lifecycle controller on), kube-scheduler and the
# kwok controller as local processes, all from the binaries build.sh cached;
# nothing is downloaded. Then the marker ConfigMap and the simulated nodes.
#
# Environment:
#   PHASED_KCM_FLAGS      extra kube-controller-manager flags, e.g.
#                         "--node-monitor-grace-period=20s --node-monitor-period=2s"
#   PHASED_NODES_H100, PHASED_NODES_H200, PHASED_NODES_ASCEND, PHASED_NODES_CPU
#                         how many simulated nodes of each kind (16, 4, 4, 4)
#   PHASED_NODE_LEASE_SECONDS   the simulated nodes' Lease duration (40, a kubelet's
#                         default; renewed every quarter of it). Benchmarks at thousands
#                         of nodes raise it (with --node-monitor-grace-period to match):
#                         at 40 s, 2,000 nodes' renewals alone are ~190 writes/s.
#   PHASED_CLUSTER_RECREATE=1   tear down a running cluster and start afresh
#   PHASED_SKIP_BUILD=1   do not run build.sh (the binaries must already be cached)
#   PHASED_DRY_RUN=1      print what kwokctl would run, start nothing
#   PYTHON                the Python with the `kubernetes` package (python3)
#   and the versions, paths and ports in versions.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.sh
source "$here/versions.sh"

started=$SECONDS
step() { printf '[cluster %3ds] %s\n' "$((SECONDS - started))" "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

PYTHON="${PYTHON:-python3}"
export KWOK_WORKDIR="$PHASED_KWOK_WORKDIR"
KWOKCTL="$PHASED_BIN_KWOK/kwokctl"
KUBECTL="$PHASED_BIN_K8S/kubectl"
cluster_state="$KWOK_WORKDIR/clusters/$PHASED_CLUSTER_NAME"
logs="$PHASED_CLUSTER_DIR/logs"

# Default kube-controller-manager timings: the upstream defaults (kwokctl would
# otherwise stretch them by its heartbeat factor). PHASED_KCM_FLAGS come after
# and win.
# A single controller-manager and scheduler need no leader election; with it, a machine
# starved for a few seconds makes them lose their lease and exit, with nothing to restart them.
KCM_DEFAULT_FLAGS="--node-monitor-period=5s --node-monitor-grace-period=50s --leader-elect=false"

# --- 1. binaries ------------------------------------------------------------
command -v "$PYTHON" >/dev/null 2>&1 || die "no '$PYTHON' on PATH (set PYTHON to a Python 3.11+ with the 'kubernetes' package)"
"$PYTHON" -c 'import kubernetes, yaml' 2>/dev/null \
  || die "'$PYTHON' cannot import the 'kubernetes' and 'yaml' packages: pip install -e '.[dev]' (or pip install kubernetes pyyaml)"
command -v ss >/dev/null 2>&1 || die "'ss' (iproute2) is needed to check ports"

if [[ "${PHASED_SKIP_BUILD:-0}" == 1 ]]; then
  step "binaries: PHASED_SKIP_BUILD=1, using what is in $PHASED_CACHE/bin"
else
  step "binaries (build.sh; cached after the first run)"
  # One build at a time, even if two `make cluster` run at once.
  mkdir -p "$PHASED_CACHE"
  flock "$PHASED_CACHE/build.lock" bash "$here/build.sh" 2>&1 | sed -u 's/^/  /'  # fails (pipefail) with build.sh's message
fi
for b in "$PHASED_BIN_ETCD/etcd" "$PHASED_BIN_K8S/kube-apiserver" "$PHASED_BIN_K8S/kube-controller-manager" \
         "$PHASED_BIN_K8S/kube-scheduler" "$KUBECTL" "$PHASED_BIN_KWOK/kwok" "$KWOKCTL"; do
  [[ -x "$b" ]] || die "missing binary $b after build.sh (see its output above)"
done

# --- 2. an earlier cluster --------------------------------------------------
pid_alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1" 2>/dev/null)" 2>/dev/null; }
cluster_healthy() {
  local c
  for c in etcd kube-apiserver kube-controller-manager kube-scheduler kwok-controller; do
    pid_alive "$cluster_state/pids/$c.pid" || return 1
  done
  [[ -f "$PHASED_KUBECONFIG" ]] || return 1
  "$KUBECTL" --kubeconfig "$PHASED_KUBECONFIG" --request-timeout=5s \
    -n kube-system get configmap phased-test-cluster >/dev/null 2>&1
}
if [[ -d "$cluster_state" ]]; then
  if [[ "${PHASED_CLUSTER_RECREATE:-0}" != 1 ]] && cluster_healthy; then
    step "cluster '$PHASED_CLUSTER_NAME' is already running; making sure its nodes exist"
    "$PYTHON" "$here/nodes.py" --kubeconfig "$PHASED_KUBECONFIG" | sed 's/^/  /'
    PYTHON="$PYTHON" bash "$here/nodes-up.sh" 2>&1 | sed -u 's/^/  /'
    step "ready (PHASED_CLUSTER_RECREATE=1 make cluster starts afresh)"
    echo "export KUBECONFIG=$PHASED_KUBECONFIG"
    exit 0
  fi
  if [[ "${PHASED_CLUSTER_RECREATE:-0}" == 1 ]]; then
    step "PHASED_CLUSTER_RECREATE=1: tearing down the running cluster"
  else
    step "found a half-started cluster from an earlier run in $cluster_state: tearing it down first"
  fi
  bash "$here/down.sh" 2>&1 | sed 's/^/  /' \
    || die "could not tear down the earlier cluster; run 'make cluster-down' and look at its output"
fi

# --- 3. ports ---------------------------------------------------------------
declare -A ports=(
  [kube-apiserver]="$PHASED_APISERVER_PORT" [etcd]="$PHASED_ETCD_PORT"
  [etcd-peer]="$PHASED_ETCD_PEER_PORT" [kube-controller-manager]="$PHASED_KCM_PORT"
  [kube-scheduler]="$PHASED_SCHEDULER_PORT" [kwok-controller]="$PHASED_KWOK_PORT"
)
busy=()
for what in "${!ports[@]}"; do
  p="${ports[$what]}"
  holder="$(ss -Hltnp "sport = :$p" 2>/dev/null | head -1)"
  if [[ -n "$holder" ]]; then
    proc="$(grep -o 'users:(([^)]*))' <<<"$holder" | sed -E 's/users:\(\("([^"]*)",pid=([0-9]+).*/\1 (pid \2)/')"
    busy+=("port $p (for $what) is in use by ${proc:-another process}")
  fi
done
if (( ${#busy[@]} > 0 )); then
  printf 'error: %s\n' "${busy[@]}" >&2
  die "stop that process, or choose other ports (PHASED_APISERVER_PORT, PHASED_ETCD_PORT, ... in e2e/cluster/versions.sh)"
fi

# --- 4. start ---------------------------------------------------------------
mkdir -p "$PHASED_CLUSTER_DIR" "$logs" "$(dirname "$PHASED_KUBECONFIG")"
rm -f "$PHASED_KUBECONFIG"
config="$PHASED_CLUSTER_DIR/kwokctl.yaml"
lease_seconds="${PHASED_NODE_LEASE_SECONDS:-40}"
[[ "$lease_seconds" =~ ^[1-9][0-9]*$ ]] || die "PHASED_NODE_LEASE_SECONDS: '$lease_seconds' is not a whole number of seconds"
cat >"$config" <<EOF
# Written by e2e/cluster/up.sh; every binary is a local absolute path.
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  runtime: binary
  bindAddress: 127.0.0.1
  kubeApiserverPort: $PHASED_APISERVER_PORT
  etcdPort: $PHASED_ETCD_PORT
  etcdPeerPort: $PHASED_ETCD_PEER_PORT
  kubeControllerManagerPort: $PHASED_KCM_PORT
  kubeSchedulerPort: $PHASED_SCHEDULER_PORT
  kwokControllerPort: $PHASED_KWOK_PORT
  etcdBinary: $PHASED_BIN_ETCD/etcd
  kubeApiserverBinary: $PHASED_BIN_K8S/kube-apiserver
  kubeControllerManagerBinary: $PHASED_BIN_K8S/kube-controller-manager
  kubeSchedulerBinary: $PHASED_BIN_K8S/kube-scheduler
  kubectlBinary: $KUBECTL
  kwokControllerBinary: $PHASED_BIN_KWOK/kwok
  cacheDir: $PHASED_CLUSTER_DIR/kwok-cache
  heartbeatFactor: 1
  nodeLeaseDurationSeconds: $lease_seconds
# kwok manages only the simulated nodes (annotated by nodes.py), not the real ones.
componentsPatches:
- name: kwok-controller
  extraArgs:
  - {key: manage-all-nodes, value: "false", override: true}
  - {key: manage-nodes-with-annotation-selector, value: kwok.x-k8s.io/node=fake}
EOF

create_args=(
  --name "$PHASED_CLUSTER_NAME" -c "$config"
  -c "$here/stages/nodes.yaml" -c "$here/stages/pods.yaml"
  create cluster --runtime binary
  --kubeconfig "$PHASED_KUBECONFIG"
  --components etcd,kube-apiserver,kube-controller-manager,kube-scheduler,kwok-controller
  --disable metrics-server,prometheus,jaeger,dashboard,kueueviz
  --timeout 120s --wait 60s
)
# kube-controller-manager flags, upstream defaults first, then the caller's.
# shellcheck disable=SC2206
kcm_flags=($KCM_DEFAULT_FLAGS ${PHASED_KCM_FLAGS:-})
for f in "${kcm_flags[@]}"; do
  [[ "$f" == --*=* ]] || die "PHASED_KCM_FLAGS: '$f' is not of the form --flag=value"
  create_args+=(--extra-args "kube-controller-manager=${f#--}")
done
create_args+=(--extra-args "kube-scheduler=leader-elect=false")
# The API server reaches a real node's kubelet (logs, exec) at its InternalIP: the node's
# Hostname address is its name, which no resolver knows.
create_args+=(--extra-args "kube-apiserver=kubelet-preferred-address-types=InternalIP,Hostname,InternalDNS,ExternalDNS,ExternalIP")
if [[ "${PHASED_DRY_RUN:-0}" == 1 ]]; then
  "$KWOKCTL" "${create_args[@]}" --dry-run
  exit 0
fi

step "starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok-controller"
if ! "$KWOKCTL" "${create_args[@]}" >"$logs/kwokctl-create.log" 2>&1; then
  tail -n 30 "$logs/kwokctl-create.log" >&2
  echo "component logs: $cluster_state/logs/" >&2
  bash "$here/down.sh" >/dev/null 2>&1 || true
  die "kwokctl could not start the cluster (log above: $logs/kwokctl-create.log); the partial cluster was removed"
fi
chmod 600 "$PHASED_KUBECONFIG"
k() { "$KUBECTL" --kubeconfig "$PHASED_KUBECONFIG" "$@"; }

step "waiting for kube-apiserver to be ready"
for _ in $(seq 120); do
  k get --raw /readyz >/dev/null 2>&1 && break
  sleep 0.5
done
k get --raw /readyz >/dev/null 2>&1 || die "kube-apiserver did not become ready; see $cluster_state/logs/kube-apiserver.log"

components_alive() {
  local c dead=()
  for c in etcd kube-apiserver kube-controller-manager kube-scheduler kwok-controller; do
    pid_alive "$cluster_state/pids/$c.pid" || dead+=("$c")
  done
  (( ${#dead[@]} == 0 )) && return 0
  for c in "${dead[@]}"; do
    echo "--- $c exited; the end of $cluster_state/logs/$c.log:" >&2
    tail -n 5 "$cluster_state/logs/$c.log" 2>/dev/null | cut -c1-600 >&2
  done
  die "${dead[*]} stopped right after starting (logs above); 'make cluster-down' cleans up"
}
components_alive

# --- 5. marker, nodes -------------------------------------------------------
step "marking the cluster as a test cluster (ConfigMap kube-system/phased-test-cluster)"
k -n kube-system create configmap phased-test-cluster \
  --from-literal=purpose="Phased end-to-end tests; safe to wipe" \
  --from-literal=cluster="$PHASED_CLUSTER_NAME" \
  --from-literal=createdBy=e2e/cluster/up.sh \
  --from-literal=runtime=kwok \
  --dry-run=client -o yaml | k apply -f - >/dev/null

step "waiting for the default service account (pods need it)"
for _ in $(seq 120); do
  k -n default get serviceaccount default >/dev/null 2>&1 && break
  sleep 0.5
done
k -n default get serviceaccount default >/dev/null 2>&1 \
  || die "kube-controller-manager did not create the default service account; see $cluster_state/logs/kube-controller-manager.log"

step "creating simulated nodes"
"$PYTHON" "$here/nodes.py" --kubeconfig "$PHASED_KUBECONFIG" 2>&1 | sed 's/^/  /' \
  || die "could not create the simulated nodes (message above)"

# kwok readies a few dozen nodes a second on a small machine: 90 s plus 0.1 s a node (2,000
# nodes: 290 s), or PHASED_NODES_READY_TIMEOUT seconds.
simulated="$(k get nodes -l type=kwok -o name | wc -l)"
ready_timeout="${PHASED_NODES_READY_TIMEOUT:-$(( 90 + simulated / 10 ))}"
step "waiting for the $simulated simulated nodes to be Ready (up to ${ready_timeout}s)"
components_alive
k wait --for=condition=Ready node -l type=kwok --timeout="${ready_timeout}s" >/dev/null \
  || die "nodes did not become Ready within ${ready_timeout}s; see $cluster_state/logs/kwok-controller.log"

step "starting the real nodes (kubelet, containerd, CNI, CoreDNS; PHASED_REAL_NODES=0 for none)"
PYTHON="$PYTHON" bash "$here/nodes-up.sh" 2>&1 | sed -u 's/^/  /' \
  || die "the real nodes did not start (message above); 'make cluster-down' cleans up"

step "cluster '$PHASED_CLUSTER_NAME' is up ($(k get nodes --no-headers | wc -l) nodes); logs in $cluster_state/logs"
echo "kubeconfig: $PHASED_KUBECONFIG"
echo "export KUBECONFIG=$PHASED_KUBECONFIG"
