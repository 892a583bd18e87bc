#!/usr/bin/env bash
# helm lint + helm template of charts/hypertrain-operator with the real Helm 3
# binary, default and non-default values; chart_check verifies the content.
set -euo pipefail

HELM="$(command -v helm || true)"
if [ -z "$HELM" ] && [ -x "${HOME:-/root}/.cache/hypertrain/bin/helm" ]; then
  HELM="${HOME:-/root}/.cache/hypertrain/bin/helm"
fi
if [ -z "$HELM" ]; then
  echo "FAIL: helm not found on PATH or at \$HOME/.cache/hypertrain/bin/helm; run tools/setup.sh" >&2
  exit 1
fi
"$HELM" version --short | grep -q '^v3\.' || { echo "FAIL: $HELM is not Helm 3" >&2; exit 1; }

check="$(pwd)/charts/chart_check"
crd="$(pwd)/crds/trainingjobs.hypertrain.dev.yaml"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
export HELM_CACHE_HOME="$tmp/helm-cache" HELM_CONFIG_HOME="$tmp/helm-config" HELM_DATA_HOME="$tmp/helm-data"
# Runfiles are symlinks; give Helm a plain copy of the chart.
rm -rf "$tmp/chart"
cp -rL charts/hypertrain-operator "$tmp/chart"

"$HELM" lint --strict "$tmp/chart"
"$HELM" lint --strict "$tmp/chart" --set 'watchNamespaces={team-a,team-b}' --set replicaCount=3 --set logLevel=debug

"$HELM" template ht "$tmp/chart" --namespace hypertrain-system --include-crds > "$tmp/default.yaml"
"$check" "$tmp/default.yaml" --release-namespace=hypertrain-system --crd="$crd"

"$HELM" template ht "$tmp/chart" --namespace ops \
  --set 'watchNamespaces={team-a,team-b}' --set replicaCount=3 --set logLevel=debug \
  --set image.tag=1.2.3 > "$tmp/namespaced.yaml"
"$check" "$tmp/namespaced.yaml" --release-namespace=ops --watch=team-a,team-b --replicas=3 --log-level=debug
grep -q 'image: "hypertrain/operator:1.2.3"' "$tmp/namespaced.yaml" || { echo "FAIL: image tag not applied" >&2; exit 1; }

# Gang providers grant create on their PodGroups, in every scope the operator watches.
"$HELM" template ht "$tmp/chart" --namespace hypertrain-system --set gangScheduling.coscheduling=true \
  --set gangScheduling.volcano=true > "$tmp/gang.yaml"
"$check" "$tmp/gang.yaml" --release-namespace=hypertrain-system --gang=coscheduling,volcano
"$HELM" template ht "$tmp/chart" --namespace ops --set 'watchNamespaces={team-a,team-b}' \
  --set gangScheduling.volcano=true > "$tmp/gang-ns.yaml"
"$check" "$tmp/gang-ns.yaml" --release-namespace=ops --watch=team-a,team-b --gang=volcano
grep -q 'podgroups' "$tmp/default.yaml" && { echo "FAIL: PodGroup rules without a gang provider" >&2; exit 1; }
"$HELM" lint --strict "$tmp/chart" --set gangScheduling.coscheduling=true

# The values schema rejects bad values.
if "$HELM" template ht "$tmp/chart" --set logLevel=loud > /dev/null 2>"$tmp/err"; then
  echo "FAIL: logLevel=loud was accepted" >&2
  exit 1
fi
grep -q logLevel "$tmp/err" || { echo "FAIL: the error does not name logLevel" >&2; cat "$tmp/err" >&2; exit 1; }

# The checker itself catches a broken chart (guards against a check that cannot fail).
sed 's/readOnlyRootFilesystem: true/readOnlyRootFilesystem: false/' "$tmp/default.yaml" > "$tmp/broken.yaml"
if "$check" "$tmp/broken.yaml" --release-namespace=hypertrain-system 2>/dev/null; then
  echo "FAIL: chart_check accepted a writable root filesystem" >&2
  exit 1
fi
sed 's/"watch"\]/"watch", "*"]/' "$tmp/default.yaml" > "$tmp/broken2.yaml"
if "$check" "$tmp/broken2.yaml" --release-namespace=hypertrain-system 2>/dev/null; then
  echo "FAIL: chart_check accepted a wildcard verb" >&2
  exit 1
fi
echo "helm chart: lint, template and content checks passed"
