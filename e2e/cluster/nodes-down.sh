#!/usr/bin/env bash
# Stop the real nodes of the local cluster (called by down.sh) and put the host back as it
# was: the kubelets, containers, shims, containerds and CoreDNS this cluster started (found
# by their pid files, their cgroups and their command lines naming this cluster's node
# folder), the mounts under that folder, the cgroups, the bridge, and, when no other cluster
# on this host runs real nodes, the kernel settings, iptables chains and folders the nodes
# changed (see nodes-host.sh). Idempotent. Exits non-zero if something is left.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.sh
source "$here/versions.sh"
# shellcheck source=nodes-env.sh
source "$here/nodes-env.sh"

started=$SECONDS
step() { printf '[nodes-down %3ds] %s\n' "$((SECONDS - started))" "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=nodes-host.sh
source "$here/nodes-host.sh"

ND="$PHASED_NODES_DIR"
BR="$PHASED_NODES_BRIDGE"
if [[ ! -d "$ND" ]] && ! ip link show "$BR" >/dev/null 2>&1; then
  host_restore
  exit 0
fi
[[ "$(id -u)" == 0 ]] || die "stopping real nodes needs root"

# Programs of ours (kubelet, containerd, shims, CoreDNS) whose command line names $ND.
our_programs() {
  local p exe
  for p in /proc/[0-9]*; do
    exe="$(readlink "$p/exe" 2>/dev/null || true)"
    [[ "$exe" == "$PHASED_CACHE/bin/"* ]] || continue
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "$ND/" && echo "${p#/proc/}"
  done
  return 0
}
# Cgroup folders of this cluster's nodes (one per v1 controller and node).
our_cgroups() {
  local c
  for c in /sys/fs/cgroup/*; do
    [[ -d "$c" && ! -L "$c" ]] || continue
    for g in "$c/phased.$PHASED_CLUSTER_NAME".*; do [[ -d "$g" ]] && echo "$g"; done
  done
  return 0
}
# Processes in those cgroups: the containers.
container_pids() {
  local g
  for g in $(our_cgroups); do find "$g" -name cgroup.procs -exec cat {} + 2>/dev/null; done | sort -u
}
stop_pids() {  # stop_pids SIGNAL-FIRST PIDS...: signal, wait up to 10 s, then SIGKILL
  local sig="$1"; shift
  (( $# > 0 )) || return 0
  kill -CONT "$@" 2>/dev/null || true  # a frozen process cannot act on SIGTERM
  kill "-$sig" "$@" 2>/dev/null || true
  for _ in $(seq 50); do
    local alive=0 p
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    (( alive == 0 )) && return 0
    sleep 0.2
  done
  kill -KILL "$@" 2>/dev/null || true
  sleep 0.3
}
pids_of() {  # the pids in $ND/pids/<pattern>.pid that are alive
  local f p
  for f in "$ND"/pids/$1.pid; do
    [[ -f "$f" ]] || continue
    p="$(cat "$f" 2>/dev/null || true)"
    [[ "$p" =~ ^[0-9]+$ ]] && kill -0 "$p" 2>/dev/null && echo "$p"
  done
  return 0
}

# shellcheck disable=SC2046
{
  pids=$(pids_of 'kubelet-*'); [[ -z "$pids" ]] || { step "stopping kubelets: $(echo $pids)"; stop_pids TERM $pids; }
  pids=$(container_pids); [[ -z "$pids" ]] || { step "stopping containers: $(echo $pids | wc -w) processes"; stop_pids KILL $pids; }
  pids=$(for p in $(our_programs); do [[ "$(readlink "/proc/$p/exe")" != *containerd-shim* ]] || echo "$p"; done)
  [[ -z "$pids" ]] || { step "stopping containerd shims: $(echo $pids)"; stop_pids TERM $pids; }
  pids=$(pids_of 'containerd-*'); [[ -z "$pids" ]] || { step "stopping containerds: $(echo $pids)"; stop_pids TERM $pids; }
  pids=$(pids_of 'apiproxy-*'); [[ -z "$pids" ]] || { step "stopping API relays: $(echo $pids)"; stop_pids TERM $pids; }
  pids=$(pids_of coredns); [[ -z "$pids" ]] || { step "stopping CoreDNS: $pids"; stop_pids TERM $pids; }
  pids=$(our_programs); [[ -z "$pids" ]] || { step "stopping leftover processes: $(echo $pids)"; stop_pids TERM $pids; }
}

# Mounts under the node folder (pod volumes, rootfs overlays, network namespaces), deepest first.
mounts() { awk -v d="$ND/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r; }
m="$(mounts)"
if [[ -n "$m" ]]; then
  step "unmounting $(wc -l <<<"$m") mounts under $ND"
  while read -r p; do umount "$p" 2>/dev/null || umount -l "$p" 2>/dev/null || true; done <<<"$m"
fi
for g in $(our_cgroups); do find "$g" -depth -type d -exec rmdir {} \; 2>/dev/null || true; done
if ip link show "$BR" >/dev/null 2>&1; then
  step "removing bridge $BR"
  ip link del "$BR" 2>/dev/null || true
fi
rm -rf "$ND"
host_restore

problems=()
left="$(our_programs; container_pids)"
[[ -z "$left" ]] || problems+=("processes still running: $(echo $left)")
[[ -z "$(mounts)" ]] || problems+=("mounts left under $ND: $(mounts | head -3 | tr '\n' ' ')")
[[ -z "$(our_cgroups)" ]] || problems+=("cgroups left: $(our_cgroups | head -3 | tr '\n' ' ')")
! ip link show "$BR" >/dev/null 2>&1 || problems+=("bridge $BR is still there")
[[ ! -d "$ND" ]] || problems+=("$ND is still there")
if (( ${#problems[@]} > 0 )); then
  printf 'error: %s\n' "${problems[@]}" >&2
  exit 1
fi
step "real nodes down; nothing of theirs left"
