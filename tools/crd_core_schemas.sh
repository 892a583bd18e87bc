#!/usr/bin/env bash
# Regenerates the core/v1 blocks of crds/trainingjobs.hypertrain.dev.yaml (volumes,
# volumeMounts, env valueFrom, podTemplate.spec) from the OpenAPI v3 that the real
# kube-apiserver 1.26 serves (/openapi/v3/api/v1), then copies the CRD into the
# chart. Needs the control plane of tools/setup.sh (bazel builds kube-envtest).
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //localcluster/envtest:kube-envtest >/dev/null
. localcluster/envtest/envtest.sh
work="$(mktemp -d)"
cleanup() { [ -n "${ENVTEST_PID:-}" ] && kill "$ENVTEST_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
envtest_start bazel-bin/localcluster/envtest/kube-envtest "$work/cp" --no-controller-manager --no-scheduler
kubectl get --raw /openapi/v3/api/v1 > "$work/core-v1.json"
python3 tools/crd_core_schemas.py "$work/core-v1.json" crds/trainingjobs.hypertrain.dev.yaml
charts/sync_crds.sh
echo "regenerated the core/v1 blocks of crds/trainingjobs.hypertrain.dev.yaml (and the chart's copy)"
