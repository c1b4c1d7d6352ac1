#!/usr/bin/env bash
# Build (or reuse from the cache) every binary the local cluster needs:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
# kwok, kwokctl, helm, prometheus and promtool (build-prometheus.sh); kueue only
# when asked (`build.sh kueue`, for bench/recovery.py).
# Everything is built from Go modules; nothing is downloaded from release
# pages. A cold build takes tens of minutes on two cores; a warm one returns
# in well under a second.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.sh
source "$here/versions.sh"

started=$SECONDS
step() { printf '[build %4ds] %s\n' "$((SECONDS - started))" "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Go is needed only to build what is not cached yet.
need_go() {
  command -v go >/dev/null 2>&1 || die "no Go toolchain on PATH: install Go >= 1.26 (https://go.dev/dl) and try again"
  local go_minor
  go_minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
  [[ "$go_minor" =~ ^[0-9]+$ ]] && (( go_minor >= 26 )) || die "Go $(go env GOVERSION) is too old: kwok $KWOK_VERSION needs Go >= 1.26"
}

export GOFLAGS="${GOFLAGS:--buildvcs=false}"
export CGO_ENABLED=0

# Print a heartbeat while a long build runs, so a person sees it is alive.
with_heartbeat() {
  local what="$1"; shift
  local log; log="$(mktemp)"
  "$@" >"$log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 30
    kill -0 "$pid" 2>/dev/null && step "$what: still building..."
  done
  if ! wait "$pid"; then
    cat "$log" >&2; rm -f "$log"
    die "$what failed (output above)"
  fi
  rm -f "$log"
}

# A throw-away module that requires $1@$2 and maps the staging modules.
wrapper_module() {
  local dir="$1" module="$2" version="$3"
  rm -rf "$dir"; mkdir -p "$dir"
  (cd "$dir" && go mod init phased.local/build >/dev/null 2>&1)
  (cd "$dir" && go mod edit -require="$module@$version")
}

build_kubernetes() {
  local out="$PHASED_BIN_K8S"
  local bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  local missing=0
  for b in "${bins[@]}"; do [[ -x "$out/$b" ]] || missing=1; done
  if (( missing == 0 )); then step "kubernetes $KUBERNETES_VERSION: cached in $out"; return; fi

  need_go
  step "kubernetes $KUBERNETES_VERSION: preparing a wrapper module"
  local work="$PHASED_CACHE/build/kubernetes-$KUBERNETES_VERSION"
  wrapper_module "$work" k8s.io/kubernetes "$KUBERNETES_VERSION"
  # k8s.io/kubernetes replaces its staging modules with local paths; point
  # each at the published module of the matching v0.x version instead.
  local staging="v0.${KUBERNETES_VERSION#v1.}"
  local mod
  mod="$(cd "$work" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  [[ -f "$mod" ]] || die "could not fetch the go.mod of k8s.io/kubernetes@$KUBERNETES_VERSION from the module proxy"
  local edits=()
  while read -r name; do
    edits+=("-replace=$name=$name@$staging")
  done < <(sed -nE 's#^[[:space:]]*(k8s\.io/[a-z0-9-]+) => \./staging/.*#\1#p' "$mod")
  (( ${#edits[@]} > 10 )) || die "found no staging replacements in $mod"
  (cd "$work" && go mod edit "${edits[@]}")
  # Use the same versions of every other dependency as Kubernetes itself.
  cat >"$work/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubectl/pkg/cmd"
)
EOF
  step "kubernetes $KUBERNETES_VERSION: resolving modules (downloads on the first run)"
  with_heartbeat "go mod tidy" bash -c "cd '$work' && go mod tidy -e"
  local ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1"
    ldflags+=" -X $pkg.gitMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  mkdir -p "$out.tmp"
  for b in "${bins[@]}"; do
    [[ -x "$out/$b" ]] && { cp "$out/$b" "$out.tmp/$b"; continue; }
    step "kubernetes $KUBERNETES_VERSION: building $b"
    with_heartbeat "$b" bash -c "cd '$work' && go build -trimpath -ldflags '$ldflags' -o '$out.tmp/$b' k8s.io/kubernetes/cmd/$b"
  done
  rm -rf "$out"; mv "$out.tmp" "$out"
  step "kubernetes $KUBERNETES_VERSION: done"
}

build_etcd() {
  local out="$PHASED_BIN_ETCD"
  if [[ -x "$out/etcd" ]]; then step "etcd $ETCD_VERSION: cached in $out"; return; fi
  need_go
  step "etcd $ETCD_VERSION: building"
  local work="$PHASED_CACHE/build/etcd-$ETCD_VERSION"
  wrapper_module "$work" go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
  cat >"$work/tools.go" <<'EOF'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3/etcdmain"
EOF
  with_heartbeat "etcd modules" bash -c "cd '$work' && go mod tidy -e"
  mkdir -p "$out.tmp"
  with_heartbeat "etcd" bash -c "cd '$work' && go build -trimpath -ldflags '-s -w' -o '$out.tmp/etcd' go.etcd.io/etcd/server/v3"
  rm -rf "$out"; mv "$out.tmp" "$out"
  step "etcd $ETCD_VERSION: done"
}

build_kwok() {
  local out="$PHASED_BIN_KWOK"
  if [[ -x "$out/kwok" && -x "$out/kwokctl" ]]; then step "kwok $KWOK_VERSION: cached in $out"; return; fi
  need_go
  step "kwok $KWOK_VERSION: building kwok and kwokctl"
  mkdir -p "$out.tmp"
  with_heartbeat "kwok" env GOBIN="$out.tmp" go install -trimpath -ldflags '-s -w' \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
  rm -rf "$out"; mv "$out.tmp" "$out"
  step "kwok $KWOK_VERSION: done"
}

build_helm() {
  local out="$PHASED_BIN_HELM"
  if [[ -x "$out/helm" ]]; then step "helm $HELM_VERSION: cached in $out"; return; fi
  need_go
  step "helm $HELM_VERSION: building"
  mkdir -p "$out.tmp"
  local major="${HELM_VERSION%%.*}"
  with_heartbeat "helm" env GOBIN="$out.tmp" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/$major/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/$major/cmd/helm@$HELM_VERSION"
  rm -rf "$out"; mv "$out.tmp" "$out"
  step "helm $HELM_VERSION: done"
}

# Kueue, the peer system of bench/recovery.py (not part of `all`: only that benchmark needs
# it, and it builds it when it is missing). Its module has no replace directives, so
# `go install` builds it as released; its CRDs and webhook manifests are read from the same
# downloaded module at run time (bench/kueue.py), and the module's folder is written beside
# the binary (module-dir) so that the benchmark finds exactly that version's manifests.
build_kueue() {
  local out="$PHASED_BIN_KUEUE"
  if [[ -x "$out/kueue" && -d "$(cat "$out/module-dir" 2>/dev/null)/config/components" ]]; then
    step "kueue $KUEUE_VERSION: cached in $out"; return
  fi
  need_go
  step "kueue $KUEUE_VERSION: downloading the module"
  local work="$PHASED_CACHE/build/kueue-$KUEUE_VERSION"
  rm -rf "$work"; mkdir -p "$work"
  (cd "$work" && go mod init phased.local/build >/dev/null 2>&1)
  local dir
  dir="$(cd "$work" && go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  [[ -d "$dir/config/components/crd" ]] || die "could not fetch sigs.k8s.io/kueue@$KUEUE_VERSION from the module proxy"
  step "kueue $KUEUE_VERSION: building"
  mkdir -p "$out.tmp"
  with_heartbeat "kueue" env GOBIN="$out.tmp" go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
    "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION"
  echo "$dir" >"$out.tmp/module-dir"
  rm -rf "$out"; mv "$out.tmp" "$out"
  step "kueue $KUEUE_VERSION: done"
}

source "$here/build-nodes.sh"  # build_nodes: kubelet, containerd, CNI, CoreDNS, images
mkdir -p "$PHASED_CACHE/bin"
what="${1:-all}"
case "$what" in
  all) build_etcd; build_kwok; build_kubernetes; build_helm; bash "$here/build-prometheus.sh"; build_nodes ;;
  nodes) build_nodes ;;
  kubernetes) build_kubernetes ;;
  etcd) build_etcd ;;
  kwok) build_kwok ;;
  helm) build_helm ;;
  prometheus) bash "$here/build-prometheus.sh" ;;  # prometheus and promtool (also part of all)
  kueue) build_kueue ;;  # bench/recovery.py's peer system only: not part of all
  *) die "unknown target '$what' (all, kubernetes, etcd, kwok, helm, prometheus, nodes, kueue)" ;;
esac
step "all binaries ready under $PHASED_CACHE/bin"
