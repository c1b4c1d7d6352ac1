#!/usr/bin/env bash
# Build (or reuse from the cache) prometheus and promtool from their Go module.
# The unit suite runs `promtool check rules` / `promtool test rules` on the
# chart's alerts; the e2e suite runs a real Prometheus against the operator.
# Called by build.sh (`build.sh prometheus` builds only these two); a cold
# build takes several minutes on two cores, a warm one returns at once.
# These binaries are for the tests: built without the cloud service discoveries.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.sh
source "$here/versions.sh"

started=$SECONDS
step() { printf '[build %4ds] %s\n' "$((SECONDS - started))" "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

out="$PHASED_BIN_PROMETHEUS"
if [[ -x "$out/prometheus" && -x "$out/promtool" ]]; then
  step "prometheus $PROMETHEUS_VERSION: cached in $out"
  exit 0
fi
command -v go >/dev/null 2>&1 || die "no Go toolchain on PATH: install Go >= 1.26 (https://go.dev/dl) and try again"

# Prometheus 3.x is published as the Go module version v0.3MM.P (3.MM.P).
minor="${PROMETHEUS_VERSION#v3.}"; minor="${minor%%.*}"
patch="${PROMETHEUS_VERSION##*.}"
module_version="v0.$(printf '%d%02d' 3 "$minor").$patch"

export GOFLAGS="${GOFLAGS:--buildvcs=false}"
export CGO_ENABLED=0
ldflags="-s -w"
ldflags+=" -X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION#v}"
ldflags+=" -X github.com/prometheus/common/version.Revision=$module_version"
ldflags+=" -X github.com/prometheus/common/version.Branch=release"
ldflags+=" -X github.com/prometheus/common/version.BuildUser=phased"
ldflags+=" -X github.com/prometheus/common/version.BuildDate=19700101-00:00:00"

step "prometheus $PROMETHEUS_VERSION: building prometheus and promtool (module $module_version)"
rm -rf "$out.tmp"; mkdir -p "$out.tmp"
log="$(mktemp)"
# remove_all_sd: only static and file service discovery (the tests need nothing else), which
# leaves out the cloud SDKs and halves the build.
GOBIN="$out.tmp" go install -trimpath -tags netgo,remove_all_sd -ldflags "$ldflags" \
  "github.com/prometheus/prometheus/cmd/prometheus@$module_version" \
  "github.com/prometheus/prometheus/cmd/promtool@$module_version" >"$log" 2>&1 &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  sleep 30
  kill -0 "$pid" 2>/dev/null && step "prometheus: still building..."
done
if ! wait "$pid"; then
  cat "$log" >&2; rm -f "$log"
  die "prometheus $PROMETHEUS_VERSION failed to build (output above)"
fi
rm -f "$log"
"$out.tmp/promtool" --version >/dev/null || die "the built promtool does not run"
rm -rf "$out"; mv "$out.tmp" "$out"
step "prometheus $PROMETHEUS_VERSION: done"
