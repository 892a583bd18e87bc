#!/usr/bin/env bash
# The trainer's quickstart: installs what is missing, builds, and trains a tiny
# Llama in one CPU process from real text (Debian's license texts) to falling
# loss. The README's main job is the whole system: tools/local-e2e.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
bazel build //runtime/cmd:hypertrain 2>&1 | grep -E "^(ERROR|FAIL)" && exit 1
bin="$(bazel info bazel-bin 2>/dev/null)/runtime/cmd/hypertrain"
work="${HYPERTRAIN_DEMO_DIR:-/tmp/hypertrain-quickstart}"
rm -rf "$work"
mkdir -p "$work/data"
"$bin" prepare --out "$work/data" /usr/share/common-licenses/*
"$bin" train --config examples/tiny-cpu.yaml \
  --set model.data.train_dir="$work/data" --set exp_manager.exp_dir="$work/exp" \
  --set exp_manager.start_fresh=true "$@"
echo "quickstart: logs and metrics in $work/exp"
