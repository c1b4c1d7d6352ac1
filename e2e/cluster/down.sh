#!/usr/bin/env bash
# Stop the local test cluster (`make cluster-down`) and check that nothing is
# left: no process of the cluster, no listener on its ports. Idempotent; fine
# when nothing runs. Exits non-zero if something is left behind.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.sh
source "$here/versions.sh"

started=$SECONDS
step() { printf '[cluster-down %3ds] %s\n' "$((SECONDS - started))" "$*"; }

export KWOK_WORKDIR="$PHASED_KWOK_WORKDIR"
KWOKCTL="$PHASED_BIN_KWOK/kwokctl"
cluster_state="$KWOK_WORKDIR/clusters/$PHASED_CLUSTER_NAME"
ports=("$PHASED_APISERVER_PORT" "$PHASED_ETCD_PORT" "$PHASED_ETCD_PEER_PORT"
       "$PHASED_KCM_PORT" "$PHASED_SCHEDULER_PORT" "$PHASED_KWOK_PORT")

# Processes of this cluster: the pids kwokctl recorded, and any process whose
# command line names this cluster's folder and whose program is one of the
# cluster's binaries (so a `less` on a log file is left alone).
cluster_pids() {
  {
    if [[ -d "$cluster_state/pids" ]]; then
      for f in "$cluster_state"/pids/*.pid; do
        [[ -f "$f" ]] || continue
        p="$(cat "$f" 2>/dev/null || true)"
        [[ "$p" =~ ^[0-9]+$ ]] && kill -0 "$p" 2>/dev/null && echo "$p"
      done
    fi
    for p in $(pgrep -f -- "$cluster_state/" 2>/dev/null || true); do
      exe="$(readlink "/proc/$p/exe" 2>/dev/null || true)"
      [[ "$exe" == "$cluster_state/"* || "$exe" == "$PHASED_CACHE/bin/"* ]] && echo "$p"
    done
  } | sort -u | grep -vx "$$" || true
}

# The real nodes first (they talk to the API server), and the host settings they changed.
nodes_status=0
bash "$here/nodes-down.sh" || nodes_status=$?

if [[ ! -d "$cluster_state" ]] && [[ -z "$(cluster_pids)" ]]; then
  step "no cluster '$PHASED_CLUSTER_NAME' here; nothing to stop"
else
  if [[ -x "$KWOKCTL" && -d "$cluster_state" ]]; then
    step "stopping cluster '$PHASED_CLUSTER_NAME' (kwokctl delete cluster)"
    "$KWOKCTL" --name "$PHASED_CLUSTER_NAME" delete cluster --kubeconfig "$PHASED_KUBECONFIG" \
      >"$PHASED_CLUSTER_DIR/kwokctl-delete.log" 2>&1 \
      || step "kwokctl delete cluster failed (see $PHASED_CLUSTER_DIR/kwokctl-delete.log); stopping the processes directly"
  fi
  # Whatever kwokctl missed (a half-started cluster, a lost pid file).
  left="$(cluster_pids)"
  if [[ -n "$left" ]]; then
    step "stopping leftover processes: $(echo $left)"
    # shellcheck disable=SC2086
    kill $left 2>/dev/null || true
    for _ in $(seq 50); do
      [[ -z "$(cluster_pids)" ]] && break
      sleep 0.2
    done
    left="$(cluster_pids)"
    # shellcheck disable=SC2086
    [[ -z "$left" ]] || kill -9 $left 2>/dev/null || true
    sleep 0.5
  fi
  rm -rf "$cluster_state"
fi
rm -f "$PHASED_KUBECONFIG"

# Verify: nothing of ours runs, nothing listens on our ports.
problems=()
left="$(cluster_pids)"
[[ -z "$left" ]] || problems+=("processes still running: $(echo $left)")
for p in "${ports[@]}"; do
  for _ in $(seq 20); do  # a listener can take a moment to close
    [[ -z "$(ss -Hltn "sport = :$p" 2>/dev/null)" ]] && break
    sleep 0.25
  done
  holder="$(ss -Hltnp "sport = :$p" 2>/dev/null | head -1)"
  if [[ -n "$holder" ]]; then
    proc="$(grep -o 'users:(([^)]*))' <<<"$holder" | sed -E 's/users:\(\("([^"]*)",pid=([0-9]+).*/\1 (pid \2)/')"
    problems+=("port $p is still in use by ${proc:-a process}")
  fi
done
(( nodes_status == 0 )) || problems+=("the real nodes did not stop cleanly (nodes-down.sh output above)")
if (( ${#problems[@]} > 0 )); then
  printf 'error: %s\n' "${problems[@]}" >&2
  exit 1
fi
step "down: no cluster process left, ports ${ports[*]} free"
