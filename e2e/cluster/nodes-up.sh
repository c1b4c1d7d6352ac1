#!/usr/bin/env bash
# Start the real nodes of the local cluster beside the kwok ones (called by up.sh once the
# control plane runs; idempotent: starts only what is not running).
#
# Each node is a kubelet with its own containerd (runc, CNI bridge), root folder, ports,
# cgroup root and pod range, joined to the API server with a node identity (a client
# certificate from the cluster CA: CN system:node:NAME, O system:nodes). All nodes share
# one Linux bridge, so pods on different nodes reach each other; CoreDNS answers for
# cluster.local on the bridge and is every pod's cluster DNS. The nodes carry the labels of
# a GPU type and advertise its extended resource (a node status patch), plus the label
# type=real and the taint e2e.phased.dev/real-node=true:NoSchedule, so only tests that ask
# for real nodes use them.
#
# Environment: PHASED_REAL_NODES (how many, 3; 0 for none), PHASED_REAL_NODE_KIND (h100),
# and the paths and addresses in nodes-env.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.sh
source "$here/versions.sh"
# shellcheck source=nodes-env.sh
source "$here/nodes-env.sh"

started=$SECONDS
step() { printf '[nodes %3ds] %s\n' "$((SECONDS - started))" "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=nodes-host.sh
source "$here/nodes-host.sh"

N="$PHASED_REAL_NODES"
[[ "$N" =~ ^[0-9]+$ ]] && (( N <= 9 )) || die "PHASED_REAL_NODES=$N: want a number from 0 to 9"
if (( N == 0 )); then step "PHASED_REAL_NODES=0: no real nodes"; exit 0; fi
[[ "$(id -u)" == 0 ]] || die "real nodes need root (kubelet, containerd and runc manage cgroups, mounts and network namespaces): run as root, or set PHASED_REAL_NODES=0 for a kwok-only cluster"
PYTHON="${PYTHON:-python3}"
KUBECTL="$PHASED_BIN_K8S/kubectl"
k() { "$KUBECTL" --kubeconfig "$PHASED_KUBECONFIG" --request-timeout=20s "$@"; }
RUNC="$(command -v runc || true)"
[[ -n "$RUNC" ]] || die "runc is not installed (apt-get install runc; build.sh does it)"
for b in "$PHASED_BIN_KUBELET/kubelet" "$PHASED_BIN_CONTAINERD/containerd" "$PHASED_BIN_CONTAINERD/ctr" \
         "$PHASED_BIN_CONTAINERD/containerd-shim-runc-v2" "$PHASED_BIN_CNI/bridge" "$PHASED_BIN_CNI/host-local" \
         "$PHASED_BIN_CNI/loopback" "$PHASED_BIN_COREDNS/coredns" "$PHASED_IMAGES/pause.oci.tar" \
         "$PHASED_IMAGES/worker.oci.tar" "$PHASED_JAX_ARCHIVE"; do
  [[ -e "$b" ]] || die "missing $b: run 'bash e2e/cluster/build.sh nodes'"
done
cluster_state="$PHASED_KWOK_WORKDIR/clusters/$PHASED_CLUSTER_NAME"
pki="$cluster_state/pki"
[[ -f "$pki/ca.crt" && -f "$pki/ca.key" ]] || die "no cluster CA in $pki (is the control plane up?)"
ND="$PHASED_NODES_DIR"
mkdir -p "$ND/logs" "$ND/pids"
BR="$PHASED_NODES_BRIDGE"

pid_alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1" 2>/dev/null)" 2>/dev/null; }
node_name() { echo "real-$PHASED_REAL_NODE_KIND-$1"; }
node_ip() { echo "$PHASED_NODES_NET.0.$((10 + $1))"; }
kubelet_port() { echo $((PHASED_NODES_PORT_BASE + 10 * $1)); }  # healthz: +1
proxy_port() { echo $((PHASED_NODES_PORT_BASE + 10 * $1 + 2)); }  # the node's relay to the API server
cgroup_root() { echo "/phased.$PHASED_CLUSTER_NAME.$(node_name "$1")"; }
# The v1 hierarchies (the kubelet wants its cgroup root in each, the named "systemd" one too).
cgroup_controllers() {
  local d
  for d in /sys/fs/cgroup/*; do
    case "${d##*/}" in unified) continue ;; esac
    [[ -d "$d" && ! -L "$d" && -f "$d/cgroup.procs" ]] && echo "$d"
  done
}

host_save

# --- the shared bridge ------------------------------------------------------
if ! ip link show "$BR" >/dev/null 2>&1; then
  step "bridge $BR ($PHASED_NODES_NET.0.0/16)"
  ip link add "$BR" type bridge
fi
ip addr show dev "$BR" | grep -q " $PHASED_NODES_DNS_IP/" || ip addr add "$PHASED_NODES_DNS_IP/16" dev "$BR"
for i in $(seq "$N"); do
  ip addr show dev "$BR" | grep -q " $(node_ip "$i")/" || ip addr add "$(node_ip "$i")/16" dev "$BR"
done
ip link set "$BR" up

# --- CoreDNS ------------------------------------------------------------------
if ! pid_alive "$ND/pids/coredns.pid"; then
  step "CoreDNS on $PHASED_NODES_DNS_IP:53 (cluster.local)"
  cat >"$ND/Corefile" <<EOF
cluster.local:53 in-addr.arpa:53 {
    bind $PHASED_NODES_DNS_IP
    errors
    kubernetes cluster.local in-addr.arpa {
        kubeconfig $PHASED_KUBECONFIG
        pods insecure
        ttl 5
    }
}
.:53 {
    bind $PHASED_NODES_DNS_IP
    template ANY ANY {
        rcode NXDOMAIN
    }
}
EOF
  cat >"$ND/start-coredns.sh" <<EOF
#!/usr/bin/env bash
echo \$\$ >"$ND/pids/coredns.pid"
exec "$PHASED_BIN_COREDNS/coredns" -conf "$ND/Corefile" -pidfile "" >>"$ND/logs/coredns.log" 2>&1
EOF
  setsid bash "$ND/start-coredns.sh" </dev/null >/dev/null 2>&1 &
fi

# --- per node: certificate, containerd, CNI, kubelet --------------------------
node_files() {
  local i="$1" name d ip
  name="$(node_name "$i")"; d="$ND/$name"; ip="$(node_ip "$i")"
  mkdir -p "$d/pki" "$d/manifests" "$d/cni/net.d" "$d/cni/ipam" "$d/containerd" "$d/kubelet" "$d/pod-logs"
  if [[ ! -f "$d/pki/node.crt" ]]; then
    openssl req -new -newkey rsa:2048 -nodes -keyout "$d/pki/node.key" -out "$d/pki/node.csr" \
      -subj "/O=system:nodes/CN=system:node:$name" >/dev/null 2>&1
    openssl x509 -req -in "$d/pki/node.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
      -days 30 -out "$d/pki/node.crt" -extfile <(printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n') >/dev/null 2>&1 \
      || die "could not sign the certificate of $name with $pki/ca.key"
  fi
  cat >"$d/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    certificate-authority: $pki/ca.crt
    server: https://127.0.0.1:$(proxy_port "$i")
users:
- name: $name
  user:
    client-certificate: $d/pki/node.crt
    client-key: $d/pki/node.key
contexts:
- name: $name
  context: {cluster: local, user: $name}
current-context: $name
EOF
  cat >"$d/cni/net.d/10-phased.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "phased",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BR",
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$d/cni/ipam",
        "ranges": [[{"subnet": "$PHASED_NODES_NET.0.0/16", "rangeStart": "$PHASED_NODES_NET.$i.2", "rangeEnd": "$PHASED_NODES_NET.$i.254"}]]
      }
    }
  ]
}
EOF
  cat >"$d/containerd.toml" <<EOF
version = 3
root = "$d/containerd/root"
state = "$d/containerd/state"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$d/containerd.sock"

[plugins.'io.containerd.internal.v1.opt']
  path = "$d/containerd/opt"

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins.'io.containerd.cri.v1.images']
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$PHASED_PAUSE_IMAGE"

[plugins.'io.containerd.cri.v1.runtime']
  # No CAP_SYS_RESOURCE here: without this every sandbox fails to start.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = false
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$RUNC"
        Root = "$d/runc"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$PHASED_BIN_CNI"]
    conf_dir = "$d/cni/net.d"
    max_conf_num = 1
EOF
  local port; port="$(kubelet_port "$i")"
  cat >"$d/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host has cgroup v1 and no CAP_SYS_RESOURCE.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: $(cgroup_root "$i")
failSwapOn: false
address: $ip
port: $port
healthzBindAddress: 127.0.0.1
healthzPort: $((port + 1))
readOnlyPort: 0
# Reachable only on this host's bridge; the API server's requests (logs, exec) are trusted.
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$d/containerd.sock
clusterDomain: cluster.local
clusterDNS: [$PHASED_NODES_DNS_IP]
resolvConf: $ND/resolv.conf
podLogsDir: $d/pod-logs
staticPodPath: $d/manifests
registerNode: true
maxPods: 32
nodeStatusUpdateFrequency: 10s
nodeLeaseDurationSeconds: 40
serializeImagePulls: false
# The images are built here and cannot be pulled again: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
EOF
  cat >"$d/start-containerd.sh" <<EOF
#!/usr/bin/env bash
echo \$\$ >"$ND/pids/containerd-$name.pid"
export PATH="$PHASED_BIN_CONTAINERD:\$PATH"
exec "$PHASED_BIN_CONTAINERD/containerd" --config "$d/containerd.toml" >>"$ND/logs/containerd-$name.log" 2>&1
EOF
  cat >"$d/start-apiproxy.sh" <<EOF
#!/usr/bin/env bash
echo \$\$ >"$ND/pids/apiproxy-$name.pid"
exec "$(command -v "$PYTHON")" "$here/apiproxy.py" --listen 127.0.0.1:$(proxy_port "$i") \\
  --to 127.0.0.1:$PHASED_APISERVER_PORT >>"$ND/logs/apiproxy-$name.log" 2>&1
EOF
  cat >"$d/start-kubelet.sh" <<EOF
#!/usr/bin/env bash
echo \$\$ >"$ND/pids/kubelet-$name.pid"
exec "$PHASED_BIN_KUBELET/kubelet" --config "$d/kubelet.yaml" --kubeconfig "$d/kubeconfig" \\
  --root-dir "$d/kubelet" --cert-dir "$d/pki" --hostname-override "$name" --node-ip "$ip" --v=1 \\
  >>"$ND/logs/kubelet-$name.log" 2>&1
EOF
  local c cg
  cg="$(cgroup_root "$i")"
  for c in $(cgroup_controllers); do
    mkdir -p "$c$cg"
    if [[ "${c##*/}" == cpuset ]]; then
      [[ -n "$(cat "$c$cg/cpuset.cpus")" ]] || cat "$c/cpuset.cpus" >"$c$cg/cpuset.cpus"
      [[ -n "$(cat "$c$cg/cpuset.mems")" ]] || cat "$c/cpuset.mems" >"$c$cg/cpuset.mems"
    fi
  done
}

: >"$ND/resolv.conf"  # pods get only the cluster DNS and its search path
ctr_() { "$PHASED_BIN_CONTAINERD/ctr" --address "$ND/$(node_name "$1")/containerd.sock" -n k8s.io "${@:2}"; }

for i in $(seq "$N"); do
  name="$(node_name "$i")"
  node_files "$i"
  if ! pid_alive "$ND/pids/containerd-$name.pid"; then
    step "$name: containerd"
    setsid bash "$ND/$name/start-containerd.sh" </dev/null >/dev/null 2>&1 &
  fi
done
import_images() {  # into node $1's containerd, what it lacks (one node at a time per call)
  local i="$1" name have img
  name="$(node_name "$i")"
  have="$(ctr_ "$i" images ls -q 2>/dev/null)"
  for img in "$PHASED_IMAGES/pause.oci.tar=$PHASED_PAUSE_IMAGE" \
             "$PHASED_IMAGES/worker.oci.tar=$PHASED_WORKER_IMAGE" "$PHASED_JAX_ARCHIVE=$PHASED_JAX_IMAGE"; do
    grep -qx "${img#*=}" <<<"$have" && continue
    ctr_ "$i" images import "${img%%=*}" >>"$ND/logs/import-$name.log" 2>&1 \
      || { cat "$ND/logs/import-$name.log" >&2; return 1; }
  done
}
importing=()
for i in $(seq "$N"); do
  name="$(node_name "$i")"
  for _ in $(seq 120); do ctr_ "$i" version >/dev/null 2>&1 && break; sleep 0.5; done
  ctr_ "$i" version >/dev/null 2>&1 || { tail -n 20 "$ND/logs/containerd-$name.log" >&2; die "containerd of $name did not start (log above)"; }
  import_images "$i" &
  importing+=("$!:$name")
done
step "importing the images into each node's containerd"
for job in "${importing[@]}"; do
  wait "${job%%:*}" || die "could not import the images of $PHASED_IMAGES into the containerd of ${job#*:}"
done
for i in $(seq "$N"); do
  name="$(node_name "$i")"
  if ! pid_alive "$ND/pids/apiproxy-$name.pid"; then
    setsid bash "$ND/$name/start-apiproxy.sh" </dev/null >/dev/null 2>&1 &
  fi
  if ! pid_alive "$ND/pids/kubelet-$name.pid"; then
    step "$name: kubelet ($(node_ip "$i"):$(kubelet_port "$i"), API server through 127.0.0.1:$(proxy_port "$i"))"
    setsid bash "$ND/$name/start-kubelet.sh" </dev/null >/dev/null 2>&1 &
  fi
done

# --- registration, labels, GPUs -----------------------------------------------
step "waiting for the real nodes to register and be Ready"
waited=0
for i in $(seq "$N"); do
  name="$(node_name "$i")"
  until k get node "$name" >/dev/null 2>&1; do
    pid_alive "$ND/pids/kubelet-$name.pid" || { tail -n 20 "$ND/logs/kubelet-$name.log" >&2; die "the kubelet of $name stopped (log above: $ND/logs/kubelet-$name.log)"; }
    pid_alive "$ND/pids/apiproxy-$name.pid" || { tail -n 5 "$ND/logs/apiproxy-$name.log" >&2; die "the API relay of $name stopped (log above), e.g. its port $(proxy_port "$i") was taken: set PHASED_NODES_PORT_BASE"; }
    sleep 1; waited=$((waited + 1))
    (( waited % 30 == 0 )) && step "still waiting for $name to register..."
    (( waited < 300 )) || die "$name did not register in 5 minutes; see $ND/logs/kubelet-$name.log"
  done
  labels=(type=real)
  resources=()
  while read -r line; do
    if [[ "$line" == *=* ]]; then labels+=("$line"); else resources+=("$line"); fi
  done < <("$PYTHON" "$here/nodes.py" --print-labels "$PHASED_REAL_NODE_KIND:$((63 + i))")
  k label node "$name" --overwrite "${labels[@]}" >/dev/null
  k taint node "$name" --overwrite e2e.phased.dev/real-node=true:NoSchedule >/dev/null
  capacity=""
  for r in "${resources[@]}"; do capacity+="\"${r%%:*}\": \"${r##*:}\","; done
  if [[ -n "$capacity" ]]; then
    k patch node "$name" --subresource=status --type=merge \
      -p "{\"status\": {\"capacity\": {${capacity%,}}, \"allocatable\": {${capacity%,}}}}" >/dev/null
  fi
done
until k wait --for=condition=Ready node -l type=real --timeout=30s >/dev/null 2>&1; do
  waited=$((waited + 30))
  step "still waiting for the real nodes to be Ready..."
  (( waited < 300 )) || die "real nodes not Ready after 5 minutes; logs in $ND/logs"
done
step "$N real nodes Ready: $(k get nodes -l type=real --no-headers -o custom-columns=N:.metadata.name | tr '\n' ' ')(logs in $ND/logs)"
