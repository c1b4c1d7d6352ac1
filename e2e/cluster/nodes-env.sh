# Versions, paths and settings of the real nodes (kubelet + containerd + runc + CNI)
# and the cluster DNS. Sourced after versions.sh by build-nodes.sh, nodes-up.sh and
# nodes-down.sh; every value can be overridden from the environment.

CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.2.9}"
CNI_PLUGINS_VERSION="${CNI_PLUGINS_VERSION:-v1.9.0}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.14.7}"

PHASED_BIN_KUBELET="$PHASED_CACHE/bin/kubelet-$KUBERNETES_VERSION"
PHASED_BIN_CONTAINERD="$PHASED_CACHE/bin/containerd-$CONTAINERD_VERSION"
PHASED_BIN_CNI="$PHASED_CACHE/bin/cni-plugins-$CNI_PLUGINS_VERSION"
PHASED_BIN_COREDNS="$PHASED_CACHE/bin/coredns-$COREDNS_VERSION"
# Locally built images (OCI archives), one folder per version of their recipe.
PHASED_IMAGES_VERSION="${PHASED_IMAGES_VERSION:-1}"
PHASED_IMAGES="$PHASED_CACHE/images-$PHASED_IMAGES_VERSION"
PHASED_PAUSE_IMAGE="phased.local/pause:3.10"
PHASED_WORKER_IMAGE="phased.local/worker:py3.11"
# The JAX image of examples/jax-data-parallel (the worker's rootfs plus JAX on CPU), tagged
# with the hash of the lock it is built from: a new lock builds and imports a new image.
PHASED_JAX_REQUIREMENTS="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../requirements" && pwd)/trainer.txt"
PHASED_JAX_TAG="$(sha256sum "$PHASED_JAX_REQUIREMENTS" | cut -c1-12)"
PHASED_JAX_IMAGE="phased.local/jax:$PHASED_JAX_TAG"
PHASED_JAX_ARCHIVE="$PHASED_IMAGES/jax-$PHASED_JAX_TAG.oci.tar"

# How many real nodes `make cluster` starts (0: none, the cluster is kwok only).
PHASED_REAL_NODES="${PHASED_REAL_NODES:-3}"
# The GPU type the real nodes pretend to be (a kind of e2e/cluster/nodes.py).
PHASED_REAL_NODE_KIND="${PHASED_REAL_NODE_KIND:-h100}"
# All real nodes of a cluster share one Linux bridge; each node hands out pod
# addresses from its own /24 of the bridge's /16. Node i (1-based) has the host
# address .0.(10+i) on the bridge and the pods of .i.0/24; CoreDNS listens on .0.2.
PHASED_NODES_NET="${PHASED_NODES_NET:-10.$(( 200 + PHASED_APISERVER_PORT / 1000 % 50 ))}"
PHASED_NODES_BRIDGE="${PHASED_NODES_BRIDGE:-phb$(( PHASED_APISERVER_PORT % 100000 ))}"
PHASED_NODES_DNS_IP="$PHASED_NODES_NET.0.2"
# Each node's kubelet listens on BASE+10*i (API) and BASE+10*i+1 (healthz), its relay to the
# API server on BASE+10*i+2. The base is 2000 below the API server's port: for the default
# ports (32761-32766) that keeps them below the kernel's ephemeral range (32768-60999), where
# a client's outgoing connection (the API server's own to etcd) can already hold one.
PHASED_NODES_PORT_BASE="${PHASED_NODES_PORT_BASE:-$(( PHASED_APISERVER_PORT - 2000 ))}"
# Real-node state: kubelet root dirs, containerd state, logs, pids, saved host settings.
PHASED_NODES_DIR="${PHASED_NODES_DIR:-$PHASED_CLUSTER_DIR/nodes}"
