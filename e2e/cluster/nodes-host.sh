# Host settings that real nodes change, saved before the first real node of any cluster on
# this host starts and put back when the last one stops. Sourced by nodes-up.sh and
# nodes-down.sh (which define step and die).
#
# A kubelet sets vm.overcommit_memory, vm.panic_on_oom, kernel.panic, kernel.panic_on_oops
# and the root keys limits at start; it may add iptables chains (KUBE-*), and it, containerd
# and its shims create folders under /var/log, /var/lib and /run. Several clusters on one
# host share these, so the first one records them (/run/phased-real-nodes/saved) and the
# last one restores them; each cluster registers under /run/phased-real-nodes/holders.
# shellcheck shell=bash

HOST_STATE="${PHASED_HOST_STATE:-/run/phased-real-nodes}"
HOST_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
              kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)
# Folders a node may create outside its own state folder.
HOST_PATHS=(/var/log/containers /var/log/pods /var/lib/kubelet /run/containerd /run/kubernetes
            /var/run/netns /etc/cni /opt/cni /opt/containerd /var/lib/cni)
IPTABLES_TABLES=(filter nat mangle)

_holder_file() { echo "$HOST_STATE/holders/$(echo -n "$PHASED_NODES_DIR" | sha256sum | cut -c1-16)"; }

# Record the host's settings (if no other cluster did) and register this cluster.
host_save() {
  mkdir -p "$HOST_STATE/holders"
  (
    flock 9
    _prune_holders
    if [[ ! -f "$HOST_STATE/saved" ]]; then
      local tmp="$HOST_STATE/saved.tmp" k t
      : >"$tmp"
      for k in "${HOST_SYSCTLS[@]}"; do
        [[ -e "/proc/sys/${k//.//}" ]] && echo "sysctl $k $(cat "/proc/sys/${k//.//}")" >>"$tmp"
      done
      for k in "${HOST_PATHS[@]}"; do
        [[ -e "$k" || -L "$k" ]] && echo "path-existed $k" >>"$tmp"
      done
      if command -v iptables-save >/dev/null 2>&1; then
        for t in "${IPTABLES_TABLES[@]}"; do
          iptables-save -t "$t" 2>/dev/null | sed -nE "s/^:([^ ]+) .*/iptables-chain $t \1/p" >>"$tmp"
        done
        echo "iptables present" >>"$tmp"
      fi
      mv "$tmp" "$HOST_STATE/saved"
      step "host settings saved in $HOST_STATE/saved (restored when the last real node stops)"
    fi
    echo "$PHASED_NODES_DIR" >"$(_holder_file)"
  ) 9>"$HOST_STATE/lock"
}

# Forget holders whose cluster is gone (its nodes folder deleted without nodes-down.sh).
_prune_holders() {
  local h
  for h in "$HOST_STATE"/holders/*; do
    [[ -f "$h" ]] || continue
    [[ -d "$(cat "$h")" ]] || rm -f "$h"
  done
}

# Unregister this cluster; if it was the last, restore everything host_save recorded.
host_restore() {
  [[ -d "$HOST_STATE" ]] || return 0
  (
    flock 9
    rm -f "$(_holder_file)"
    _prune_holders
    if compgen -G "$HOST_STATE/holders/*" >/dev/null; then
      step "host settings: other clusters on this host still run real nodes; they restore them"
      return 0
    fi
    [[ -f "$HOST_STATE/saved" ]] || return 0
    local kind a b changed=()
    while read -r kind a b; do
      case "$kind" in
        sysctl)
          if [[ "$(cat "/proc/sys/${a//.//}" 2>/dev/null)" != "$b" ]]; then
            echo "$b" >"/proc/sys/${a//.//}" && changed+=("$a=$b")
          fi ;;
      esac
    done <"$HOST_STATE/saved"
    (( ${#changed[@]} == 0 )) || step "host settings: restored ${changed[*]}"
    _restore_iptables
    _restore_paths
    rm -f "$HOST_STATE/saved"
  ) 9>"$HOST_STATE/lock"
  # Nothing recorded any more: leave no trace in /run.
  if [[ ! -f "$HOST_STATE/saved" ]] && rmdir "$HOST_STATE/holders" 2>/dev/null; then
    rm -f "$HOST_STATE/lock"; rmdir "$HOST_STATE" 2>/dev/null || true
  fi
}

# Remove the iptables chains that appeared while real nodes ran (kubelet's KUBE-*, CNI-*),
# with the rules that jump to them.
_restore_iptables() {
  command -v iptables-save >/dev/null 2>&1 || return 0
  local t c removed=()
  for t in "${IPTABLES_TABLES[@]}"; do
    for c in $(iptables-save -t "$t" 2>/dev/null | sed -nE 's/^:((KUBE|CNI)-[^ ]+) .*/\1/p'); do
      grep -qx "iptables-chain $t $c" "$HOST_STATE/saved" && continue
      iptables-save -t "$t" | grep -E -- "-j $c( |$)" | sed 's/^-A /-D /' | while read -r rule; do
        # shellcheck disable=SC2086
        iptables -t "$t" $rule 2>/dev/null || true
      done
      iptables -t "$t" -F "$c" 2>/dev/null || true
      removed+=("$t/$c")
    done
    for c in "${removed[@]}"; do [[ "$c" == "$t/"* ]] && iptables -t "$t" -X "${c#*/}" 2>/dev/null || true; done
  done
  (( ${#removed[@]} == 0 )) || step "host settings: removed iptables chains ${removed[*]}"
}

# Folders that did not exist before: remove what real nodes left in them (sockets, links to
# their logs, empty folders; e.g. every kubelet binds /var/lib/kubelet/device-plugins/kubelet.sock
# whatever its root folder), then the folder. Anything else in it is kept and named.
_restore_paths() {
  local p
  for p in "${HOST_PATHS[@]}"; do
    grep -qx "path-existed $p" "$HOST_STATE/saved" && continue
    [[ -d "$p" ]] || continue
    find "$p" -depth -mindepth 1 \( -type s -o -xtype l -o -type d -empty \) -delete 2>/dev/null || true
    if rmdir "$p" 2>/dev/null; then
      step "host settings: removed $p (real nodes created it)"
    else
      step "warning: $p was created while real nodes ran and is not empty; left as is"
    fi
  done
}
