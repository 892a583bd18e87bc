#!/usr/bin/env bash
# Copies the CRD (source of truth: crds/) into the chart. //charts:crd_in_sync_test
# fails when they differ.
set -euo pipefail
cd "$(dirname "$0")/.."
cp crds/trainingjobs.hypertrain.dev.yaml charts/hypertrain-operator/files/trainingjobs.hypertrain.dev.yaml
