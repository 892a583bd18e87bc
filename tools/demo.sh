#!/usr/bin/env bash
# The README's main job. Installs what is missing, builds, and runs the
# trainer's quickstart: a tiny Llama trained on CPU from real text
# (Debian's license texts) to falling loss. Switches to the operator's
# local end-to-end demo once that exists.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
bazel build //runtime/cmd:hypertrain 2>&1 | grep -E "^(ERROR|FAIL)" && exit 1
bin="$(bazel info bazel-bin 2>/dev/null)/runtime/cmd/hypertrain"
work="${HYPERTRAIN_DEMO_DIR:-/tmp/hypertrain-quickstart}"
rm -rf "$work"
mkdir -p "$work/data"
"$bin" prepare --output "$work/data" /usr/share/common-licenses/*
"$bin" train --config examples/tiny-cpu.yaml \
  --set data.train_dir="$work/data" --set exp_manager.exp_dir="$work/exp" "$@"
echo "quickstart: logs and metrics in $work/exp"
