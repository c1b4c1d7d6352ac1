# Versions of every binary the local cluster uses, and where they are cached.
# Sourced by the other scripts in this folder; change a version here and the
# next `make cluster` builds it into a new cache folder beside the old one.

KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
HELM_VERSION="${HELM_VERSION:-v4.3.1}"

# Binaries are cached outside the repository, one folder per version.
PHASED_CACHE="${PHASED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/phased}"
PHASED_BIN_K8S="$PHASED_CACHE/bin/kubernetes-$KUBERNETES_VERSION"
PHASED_BIN_ETCD="$PHASED_CACHE/bin/etcd-$ETCD_VERSION"
PHASED_BIN_KWOK="$PHASED_CACHE/bin/kwok-$KWOK_VERSION"
PHASED_BIN_HELM="$PHASED_CACHE/bin/helm-$HELM_VERSION"

# Where the running cluster keeps its state and kubeconfig.
PHASED_CLUSTER_NAME="${PHASED_CLUSTER_NAME:-phased-e2e}"
PHASED_CLUSTER_DIR="${PHASED_CLUSTER_DIR:-$PHASED_CACHE/cluster}"
PHASED_KUBECONFIG="${PHASED_KUBECONFIG:-$PHASED_CLUSTER_DIR/kubeconfig}"
PHASED_APISERVER_PORT="${PHASED_APISERVER_PORT:-32766}"
