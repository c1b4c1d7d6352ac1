# Versions of every binary the local cluster uses, and where they are cached.
# Sourced by the other scripts in this folder; change a version here and the
# next `make cluster` builds it into a new cache folder beside the old one.

KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
HELM_VERSION="${HELM_VERSION:-v4.3.1}"
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v3.16.0}"
# Kueue is a peer system of the recovery benchmark only (build.sh kueue; not part of all).
KUEUE_VERSION="${KUEUE_VERSION:-v0.17.0}"

# Binaries are cached outside the repository, one folder per version.
PHASED_CACHE="${PHASED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/phased}"
PHASED_BIN_K8S="$PHASED_CACHE/bin/kubernetes-$KUBERNETES_VERSION"
PHASED_BIN_ETCD="$PHASED_CACHE/bin/etcd-$ETCD_VERSION"
PHASED_BIN_KWOK="$PHASED_CACHE/bin/kwok-$KWOK_VERSION"
PHASED_BIN_HELM="$PHASED_CACHE/bin/helm-$HELM_VERSION"
PHASED_BIN_PROMETHEUS="$PHASED_CACHE/bin/prometheus-$PROMETHEUS_VERSION"
PHASED_BIN_KUEUE="$PHASED_CACHE/bin/kueue-$KUEUE_VERSION"

# Where the running cluster keeps its state and kubeconfig.
PHASED_CLUSTER_NAME="${PHASED_CLUSTER_NAME:-phased-e2e}"
PHASED_CLUSTER_DIR="${PHASED_CLUSTER_DIR:-$PHASED_CACHE/cluster}"
PHASED_KUBECONFIG="${PHASED_KUBECONFIG:-$PHASED_CLUSTER_DIR/kubeconfig}"
PHASED_APISERVER_PORT="${PHASED_APISERVER_PORT:-32766}"

# kwokctl keeps each cluster's pids, logs, certificates and etcd data here
# (instead of ~/.kwok), so all state stays under the cache folder.
PHASED_KWOK_WORKDIR="${PHASED_KWOK_WORKDIR:-$PHASED_CLUSTER_DIR/kwok}"

# Every port the cluster listens on (all on 127.0.0.1), checked before start.
PHASED_ETCD_PORT="${PHASED_ETCD_PORT:-32765}"
PHASED_ETCD_PEER_PORT="${PHASED_ETCD_PEER_PORT:-32764}"
PHASED_KCM_PORT="${PHASED_KCM_PORT:-32763}"
PHASED_SCHEDULER_PORT="${PHASED_SCHEDULER_PORT:-32762}"
PHASED_KWOK_PORT="${PHASED_KWOK_PORT:-32761}"
