#!/usr/bin/env bash
# Bazel's --workspace_status_command (.bazelrc): the version that
# `hypertrain --version` and `hypertrain-operator --version` print.
# STABLE_ keys go to stable-status.txt, so a new commit relinks the binaries.
# Never fails: without git or tags (a source tarball, a shallow clone) the
# version is HYPERTRAIN_VERSION if set, else the commit, else "unknown".
cd "$(dirname "$0")/.." || exit 0
v="${HYPERTRAIN_VERSION:-}"
if [ -z "$v" ]; then
  v=$(git describe --tags --always --dirty 2>/dev/null || true)
fi
echo "STABLE_HYPERTRAIN_VERSION ${v:-unknown}"
