# Build (or reuse from the cache) what the real nodes need: kubelet, containerd
# (with ctr and the runc shim), the CNI plugins, CoreDNS, and the local images
# (pause, worker, jax). runc comes from the distribution (apt-get install runc).
# Sourced by build.sh (it uses its step/die/need_go/with_heartbeat/wrapper_module);
# `bash e2e/cluster/build.sh nodes` builds only these.
# shellcheck shell=bash

# shellcheck source=nodes-env.sh
source "$here/nodes-env.sh"

# Debian packages the real nodes need from the host: runc (the OCI runtime), and what
# images.py builds the images from.
ensure_host_packages() {
  local missing=() pkg
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  # images.py: gcc and libc6-dev compile the pause binary; the worker rootfs is made of these.
  for pkg in gcc libc6-dev python3.11-minimal libpython3.11-minimal libpython3.11-stdlib dash coreutils libc-bin netbase; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if (( ${#missing[@]} == 0 )); then step "host packages: runc $(runc --version | head -1 | awk '{print $3}') and the image packages present"; return; fi
  command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get to install it: install runc (>= 1.1) and try again"
  [[ "$(id -u)" == 0 ]] || die "missing ${missing[*]}: run 'sudo apt-get install ${missing[*]}' (real nodes need root anyway)"
  step "host packages: apt-get install ${missing[*]}"
  with_heartbeat "apt-get install ${missing[*]}" env DEBIAN_FRONTEND=noninteractive \
    bash -c "apt-get install -y --no-install-recommends ${missing[*]} || { apt-get update && apt-get install -y --no-install-recommends ${missing[*]}; }"
}

build_kubelet() {
  local out="$PHASED_BIN_KUBELET"
  if [[ -x "$out/kubelet" ]]; then step "kubelet $KUBERNETES_VERSION: cached in $out"; return; fi
  need_go
  step "kubelet $KUBERNETES_VERSION: preparing a wrapper module"
  local work="$PHASED_CACHE/build/kubelet-$KUBERNETES_VERSION"
  wrapper_module "$work" k8s.io/kubernetes "$KUBERNETES_VERSION"
  local staging="v0.${KUBERNETES_VERSION#v1.}" mod
  mod="$(cd "$work" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  [[ -f "$mod" ]] || die "could not fetch the go.mod of k8s.io/kubernetes@$KUBERNETES_VERSION from the module proxy"
  local edits=() name
  while read -r name; do edits+=("-replace=$name=$name@$staging"); done \
    < <(sed -nE 's#^[[:space:]]*(k8s\.io/[a-z0-9-]+) => \./staging/.*#\1#p' "$mod")
  (( ${#edits[@]} > 10 )) || die "found no staging replacements in $mod"
  (cd "$work" && go mod edit "${edits[@]}")
  cat >"$work/tools.go" <<'GO'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kubelet/app"
GO
  step "kubelet $KUBERNETES_VERSION: resolving modules (downloads on the first run)"
  with_heartbeat "kubelet modules" bash -c "cd '$work' && go mod tidy -e"
  local ldflags="-s -w" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1"
    ldflags+=" -X $pkg.gitMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  step "kubelet $KUBERNETES_VERSION: building"
  mkdir -p "$out.tmp"
  with_heartbeat "kubelet" bash -c "cd '$work' && go build -trimpath -ldflags '$ldflags' -o '$out.tmp/kubelet' k8s.io/kubernetes/cmd/kubelet"
  rm -rf "$out"; mv "$out.tmp" "$out"
  step "kubelet $KUBERNETES_VERSION: done"
}

build_containerd() {
  local out="$PHASED_BIN_CONTAINERD" b missing=0
  for b in containerd ctr containerd-shim-runc-v2; do [[ -x "$out/$b" ]] || missing=1; done
  if (( missing == 0 )); then step "containerd $CONTAINERD_VERSION: cached in $out"; return; fi
  need_go
  step "containerd $CONTAINERD_VERSION: building containerd, ctr, containerd-shim-runc-v2"
  local m=github.com/containerd/containerd/v2
  mkdir -p "$out.tmp"
  with_heartbeat "containerd" env GOBIN="$out.tmp" go install -trimpath -tags "no_btrfs no_devmapper no_zfs" \
    -ldflags "-s -w -X $m/version.Version=$CONTAINERD_VERSION" \
    "$m/cmd/containerd@$CONTAINERD_VERSION" "$m/cmd/ctr@$CONTAINERD_VERSION" \
    "$m/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
  rm -rf "$out"; mv "$out.tmp" "$out"
  step "containerd $CONTAINERD_VERSION: done"
}

build_cni() {
  local out="$PHASED_BIN_CNI" b missing=0
  for b in bridge host-local loopback portmap; do [[ -x "$out/$b" ]] || missing=1; done
  if (( missing == 0 )); then step "CNI plugins $CNI_PLUGINS_VERSION: cached in $out"; return; fi
  need_go
  step "CNI plugins $CNI_PLUGINS_VERSION: building bridge, host-local, loopback, portmap"
  local m=github.com/containernetworking/plugins/plugins
  mkdir -p "$out.tmp"
  with_heartbeat "CNI plugins" env GOBIN="$out.tmp" go install -trimpath -ldflags "-s -w" \
    "$m/main/bridge@$CNI_PLUGINS_VERSION" "$m/ipam/host-local@$CNI_PLUGINS_VERSION" \
    "$m/main/loopback@$CNI_PLUGINS_VERSION" "$m/meta/portmap@$CNI_PLUGINS_VERSION"
  rm -rf "$out"; mv "$out.tmp" "$out"
  step "CNI plugins $CNI_PLUGINS_VERSION: done"
}

build_coredns() {
  local out="$PHASED_BIN_COREDNS"
  if [[ -x "$out/coredns" ]]; then step "CoreDNS $COREDNS_VERSION: cached in $out"; return; fi
  need_go
  step "CoreDNS $COREDNS_VERSION: building"
  local work="$PHASED_CACHE/build/coredns-$COREDNS_VERSION"
  wrapper_module "$work" github.com/coredns/coredns "$COREDNS_VERSION"
  # CoreDNS with the plugins the cluster DNS uses (as CoreDNS documents custom builds):
  # the kubernetes plugin and a few basics, not the cloud back-ends.
  cat >"$work/main.go" <<'GO'
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
)

func main() { coremain.Run() }
GO
  with_heartbeat "CoreDNS modules" bash -c "cd '$work' && go mod tidy -e"
  mkdir -p "$out.tmp"
  with_heartbeat "CoreDNS" bash -c "cd '$work' && go build -trimpath -ldflags '-s -w' -o '$out.tmp/coredns' ."
  rm -rf "$out"; mv "$out.tmp" "$out"
  step "CoreDNS $COREDNS_VERSION: done"
}

build_images() {
  if [[ -f "$PHASED_IMAGES/pause.oci.tar" && -f "$PHASED_IMAGES/worker.oci.tar" && -f "$PHASED_JAX_ARCHIVE" ]]; then
    step "images: cached in $PHASED_IMAGES"; return
  fi
  step "images: building pause, worker and jax (OCI archives, from local packages and locked wheels)"
  with_heartbeat "images" bash -c "set -o pipefail; '${PYTHON:-python3}' '$here/images.py' --out '$PHASED_IMAGES' \
    --pause '$PHASED_PAUSE_IMAGE' --worker '$PHASED_WORKER_IMAGE' \
    --jax '$PHASED_JAX_REQUIREMENTS' --jax-image '$PHASED_JAX_IMAGE' --jax-out '$PHASED_JAX_ARCHIVE' 2>&1 | sed -u 's/^/  /'"
  step "images: built in $PHASED_IMAGES ($(du -sh "$PHASED_IMAGES" | cut -f1))"
}

build_nodes() {
  if [[ "${PHASED_REAL_NODES:-3}" == 0 ]]; then step "real nodes: PHASED_REAL_NODES=0, nothing to build"; return; fi
  ensure_host_packages
  build_containerd
  build_cni
  build_kubelet
  build_coredns
  build_images
}
