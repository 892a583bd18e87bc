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

"$HELM" template ht "$tmp/chart" --namespace hypertrain-system > "$tmp/default.yaml"
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

# Every value beyond the defaults: lint, render and check what each one does.
ALL=(--set nameOverride=ht-op --set fullnameOverride=hto --set crds.keep=false
     --set logFormat=json --set workers=4 --set kubeApi.qps=20 --set kubeApi.burst=40
     --set 'extraArgs={--lease-duration-ms=20000}' --set 'extraEnv[0].name=HTTPS_PROXY'
     --set 'extraEnv[0].value=http://proxy:3128' --set metrics.serviceMonitor.enabled=true
     --set metrics.serviceMonitor.labels.release=prom --set metrics.serviceMonitor.interval=15s
     --set trainerMetrics.podMonitor.enabled=true --set trainerMetrics.podMonitor.interval=20s
     --set livenessProbe.periodSeconds=20 --set readinessProbe.timeoutSeconds=3
     --set podDisruptionBudget.minAvailable=2 --set replicaCount=3 --set terminationGracePeriodSeconds=60
     --set tests.image=registry.example/busybox:1.36 --set 'watchNamespaces={team-a,team-b}'
     --set metrics.service.type=ClusterIP --set image.pullPolicy=Always)
"$HELM" lint --strict "$tmp/chart" "${ALL[@]}"
"$HELM" template ht "$tmp/chart" --namespace ops "${ALL[@]}" > "$tmp/all.yaml"
"$check" "$tmp/all.yaml" --release-namespace=ops --watch=team-a,team-b --replicas=3 --crd="$crd" --crd-keep=false
"$check" --json "$tmp/all.yaml" > "$tmp/all.json"
python3 - "$tmp/all.json" <<'PY'
import json, sys
objs = json.load(open(sys.argv[1]))
by = {}
for o in objs:
    by.setdefault(o["kind"], []).append(o)
def fail(msg):
    sys.exit("FAIL: " + msg)
dep = by["Deployment"][0]
if dep["metadata"]["name"] != "hto": fail("fullnameOverride: " + dep["metadata"]["name"])
c = dep["spec"]["template"]["spec"]["containers"][0]
for a in ["--log-format=json", "--workers=4", "--kube-api-qps=20", "--kube-api-burst=40", "--lease-duration-ms=20000"]:
    if a not in c["args"]: fail("args lack " + a + ": " + str(c["args"]))
if {"name": "HTTPS_PROXY", "value": "http://proxy:3128"} not in c["env"]: fail("extraEnv: " + str(c["env"]))
if c["livenessProbe"]["periodSeconds"] != 20 or c["readinessProbe"]["timeoutSeconds"] != 3: fail("probe settings")
if c["imagePullPolicy"] != "Always": fail("pullPolicy")
if dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] != 60: fail("terminationGracePeriodSeconds")
if dep["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] != "ht-op": fail("nameOverride")
pdb = by["PodDisruptionBudget"][0]
if pdb["spec"]["minAvailable"] != 2 or pdb["spec"]["selector"]["matchLabels"] != dep["spec"]["selector"]["matchLabels"]: fail("PDB")
sm = by["ServiceMonitor"][0]
svc = [s for s in by["Service"] if s["spec"]["ports"][0]["name"] == "metrics"][0]
if sm["metadata"]["labels"].get("release") != "prom" or sm["spec"]["endpoints"][0]["interval"] != "15s": fail("ServiceMonitor")
if any(svc["metadata"]["labels"].get(k) != v for k, v in sm["spec"]["selector"]["matchLabels"].items()): fail("ServiceMonitor selects the metrics Service")
if sm["spec"]["endpoints"][0]["port"] != svc["spec"]["ports"][0]["name"]: fail("ServiceMonitor port")
pm = by["PodMonitor"][0]
if pm["spec"]["namespaceSelector"] != {"matchNames": ["team-a", "team-b"]}: fail("PodMonitor namespaces: " + str(pm["spec"]["namespaceSelector"]))
if pm["spec"]["podMetricsEndpoints"][0]["port"] != "metrics" or pm["spec"]["podMetricsEndpoints"][0]["interval"] != "20s": fail("PodMonitor endpoint")
if pm["spec"]["selector"]["matchExpressions"][0]["key"] != "hypertrain.dev/job-name": fail("PodMonitor selects trainer pods by the job label")
test = [p for p in by["Pod"] if p["metadata"]["annotations"].get("helm.sh/hook") == "test"]
if len(test) != 1 or test[0]["spec"]["containers"][0]["image"] != "registry.example/busybox:1.36": fail("helm test pod")
if "hto-metrics.ops.svc:8080" not in test[0]["spec"]["containers"][0]["args"][0]: fail("helm test asks the metrics Service")
print("all values: applied")
PY
# Defaults: no monitors; the CRD kept on uninstall; a PDB only with standbys.
"$check" --json "$tmp/default.yaml" | python3 -c '
import json, sys
kinds = [o["kind"] for o in json.load(sys.stdin)]
assert "ServiceMonitor" not in kinds and "PodMonitor" not in kinds, kinds
assert kinds.count("PodDisruptionBudget") == 1 and kinds.count("CustomResourceDefinition") == 1, kinds'
"$HELM" template ht "$tmp/chart" --set replicaCount=1 --set crds.install=false --set tests.enabled=false > "$tmp/one.yaml"
"$check" "$tmp/one.yaml" --release-namespace=default --replicas=1 --crd="$crd" --crd-install=false
grep -q 'kind: PodDisruptionBudget' "$tmp/one.yaml" && { echo "FAIL: a PDB for a single replica blocks drains" >&2; exit 1; }
grep -q 'helm.sh/hook' "$tmp/one.yaml" && { echo "FAIL: tests.enabled=false still renders the test pod" >&2; exit 1; }
if "$HELM" template ht "$tmp/chart" --set metrics.serviceMonitor.enabled=true --set metrics.service.enabled=false \
    > /dev/null 2>"$tmp/err"; then
  echo "FAIL: a ServiceMonitor without the metrics Service was accepted" >&2; exit 1
fi
grep -q "needs metrics.service.enabled" "$tmp/err" || { cat "$tmp/err" >&2; exit 1; }

# The values schema rejects bad values.
for bad in "bogus=1" "metrics.bogus=1" "logFormat=yaml" "workers=0" "extraArgs={workers}" "kubeApi.burst=0"; do
  if "$HELM" template ht "$tmp/chart" --set "$bad" > /dev/null 2>"$tmp/err"; then
    echo "FAIL: --set $bad was accepted" >&2
    exit 1
  fi
  key="${bad%%=*}"; key="${key##*.}"
  grep -q "$key" "$tmp/err" || { echo "FAIL: the error for $bad does not name $key" >&2; cat "$tmp/err" >&2; exit 1; }
done
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
# A verb the operator's code does not call is rejected (issue 19, defect 6: pods
# get was granted and unused).
sed 's/"create", "delete", "list", "watch", "patch"\]/"create", "delete", "get", "list", "watch", "patch"]/' \
  "$tmp/default.yaml" > "$tmp/broken3.yaml"
cmp -s "$tmp/default.yaml" "$tmp/broken3.yaml" && { echo "FAIL: the pods rule was not found to break" >&2; exit 1; }
if "$check" "$tmp/broken3.yaml" --release-namespace=hypertrain-system 2>/dev/null; then
  echo "FAIL: chart_check accepted pods get, which the operator never calls" >&2
  exit 1
fi
# createWatchNamespaces=false renders no Namespace (the user manages them).
"$HELM" template ht "$tmp/chart" --namespace ops --set 'watchNamespaces={team-a}' --set createWatchNamespaces=false \
  > "$tmp/nocreate.yaml"
grep -q '^kind: Namespace' "$tmp/nocreate.yaml" && { echo "FAIL: createWatchNamespaces=false rendered a Namespace" >&2; exit 1; }
echo "helm chart: lint, template and content checks passed"
