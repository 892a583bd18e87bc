#!/usr/bin/env bash
# The chart's CRD is a byte-identical copy of crds/ (charts/sync_crds.sh copies it).
set -euo pipefail
if ! cmp crds/trainingjobs.hypertrain.dev.yaml charts/hypertrain-operator/files/trainingjobs.hypertrain.dev.yaml; then
  echo "FAIL: charts/hypertrain-operator/files/ differs from crds/; run charts/sync_crds.sh" >&2
  exit 1
fi
echo "CRD copies are identical"
