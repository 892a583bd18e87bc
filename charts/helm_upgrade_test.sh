#!/usr/bin/env bash
# `helm install`, `helm upgrade` and `helm uninstall` of charts/hypertrain-operator
# against a real kube-apiserver (1.26.5, ../shared/kube) on etcd: the upgrade
# applies a CRD change (a new printer column), the TrainingJob created in
# between survives it, and uninstall keeps the CRD and the job (crds.keep).
#
# kubectl and helm from PATH or ~/.cache/hypertrain/bin (tools/setup.sh).
# Binaries: kube-apiserver from $HYPERTRAIN_KUBE_BINARIES, else
# ~/.cache/hypertrain/kube-v1.26.5, else unpacked from
# ${HYPERTRAIN_KUBE_SOURCE:-<repo>/../shared/kube} (or /work/shared/kube);
# etcd from $HYPERTRAIN_ETCD or PATH (Debian etcd-server). Without them the test
# skips (a JUnit skip, which tools/test.sh counts) and says what to provide.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() {
  echo "SKIP: $*"
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    cat > "$XML_OUTPUT_FILE" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="helm_upgrade_test" tests="1" failures="0" errors="0" skipped="1">
<testcase name="helm_upgrade_test" classname="charts"><skipped message="$*"/></testcase>
</testsuite></testsuites>
XML
  fi
  exit 0
}

HELM="$(command -v helm || true)"
[ -z "$HELM" ] && [ -x "${HOME:-/root}/.cache/hypertrain/bin/helm" ] && HELM="${HOME:-/root}/.cache/hypertrain/bin/helm"
[ -n "$HELM" ] || fail "helm not found on PATH or at \$HOME/.cache/hypertrain/bin/helm; run tools/setup.sh"
KUBECTL="$(command -v kubectl || true)"
[ -z "$KUBECTL" ] && [ -x "${HOME:-/root}/.cache/hypertrain/bin/kubectl" ] && KUBECTL="${HOME:-/root}/.cache/hypertrain/bin/kubectl"
[ -n "$KUBECTL" ] || fail "kubectl not found on PATH or at \$HOME/.cache/hypertrain/bin/kubectl; run tools/setup.sh"
command -v openssl >/dev/null || fail "openssl is needed for the control plane's certificates"

tmp="$(mktemp -d "${TEST_TMPDIR:-/tmp}/helm_upgrade.XXXXXX")"
repo="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"
apiserver=""
for d in "${HYPERTRAIN_KUBE_BINARIES:-}" "${HOME:-/root}/.cache/hypertrain/kube-v1.26.5"; do
  [ -n "$d" ] && [ -x "$d/kube-apiserver" ] && { apiserver="$d/kube-apiserver"; break; }
done
if [ -z "$apiserver" ]; then
  for src in "${HYPERTRAIN_KUBE_SOURCE:-}" "$repo/../shared/kube" /work/shared/kube; do
    if [ -n "$src" ] && [ -f "$src/kube-apiserver.xz" ] && command -v xz >/dev/null; then
      xz -dc "$src/kube-apiserver.xz" > "$tmp/kube-apiserver" && chmod 0755 "$tmp/kube-apiserver"
      apiserver="$tmp/kube-apiserver"
      break
    fi
  done
fi
[ -n "$apiserver" ] || skip "no kube-apiserver: set HYPERTRAIN_KUBE_BINARIES to a directory holding kube-apiserver 1.26, or put ../shared/kube beside the clone"
etcd="${HYPERTRAIN_ETCD:-$(command -v etcd || true)}"
[ -n "$etcd" ] || skip "no etcd: apt-get install etcd-server, or set HYPERTRAIN_ETCD"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Certificates: a CA, the serving certificate for 127.0.0.1, the ServiceAccount key pair.
pki="$tmp/pki"
mkdir -p "$pki"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=test-ca -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$pki/san.ext"
openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 1 \
  -extfile "$pki/san.ext" -out "$pki/apiserver.crt" 2>/dev/null
openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
token="$(openssl rand -hex 16)"
echo "$token,admin,admin-uid,system:masters" > "$pki/tokens.csv"

etcd_port="$(free_port)"; peer_port="$(free_port)"; api_port="$(free_port)"
"$etcd" --name default --data-dir "$tmp/etcd" --listen-client-urls "http://127.0.0.1:$etcd_port" \
  --advertise-client-urls "http://127.0.0.1:$etcd_port" --listen-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" --initial-cluster "default=http://127.0.0.1:$peer_port" \
  > "$tmp/etcd.log" 2>&1 &
pids+=($!)
"$apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
  --secure-port "$api_port" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" --token-auth-file "$pki/tokens.csv" --authorization-mode RBAC \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-account-issuer https://kubernetes.default.svc --api-audiences https://kubernetes.default.svc \
  --service-cluster-ip-range 10.96.0.0/16 --allow-privileged=true --endpoint-reconciler-type none \
  --profiling=false > "$tmp/apiserver.log" 2>&1 &
api_pid=$!
pids+=($api_pid)

export KUBECONFIG="$tmp/kubeconfig"
cat > "$KUBECONFIG" <<KC
apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "https://127.0.0.1:$api_port", certificate-authority: "$pki/ca.crt"}}]
users: [{name: admin, user: {token: "$token"}}]
contexts: [{name: test, context: {cluster: test, user: admin}}]
current-context: test
KC
chmod 600 "$KUBECONFIG"
export HELM_CACHE_HOME="$tmp/helm-cache" HELM_CONFIG_HOME="$tmp/helm-config" HELM_DATA_HOME="$tmp/helm-data"
deadline=$((SECONDS + 90))
until "$KUBECTL" get --raw /readyz >/dev/null 2>&1; do
  kill -0 "$api_pid" 2>/dev/null || { tail -20 "$tmp/apiserver.log" >&2; fail "kube-apiserver exited"; }
  [ "$SECONDS" -lt "$deadline" ] || { tail -20 "$tmp/apiserver.log" >&2; fail "kube-apiserver not ready (/readyz) in 90 s"; }
  sleep 0.5
done
echo "control plane: $("$KUBECTL" version -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')"

rm -rf "$tmp/chart" && cp -rL charts/hypertrain-operator "$tmp/chart"
columns() { "$KUBECTL" get crd trainingjobs.hypertrain.dev -o jsonpath='{.spec.versions[0].additionalPrinterColumns[*].name}'; }

"$HELM" install ht "$tmp/chart" -n hypertrain-system --create-namespace --set image.repository=example.invalid/op \
  > "$tmp/install.log" || { cat "$tmp/install.log" >&2; fail "helm install"; }
"$KUBECTL" get crd trainingjobs.hypertrain.dev >/dev/null || fail "helm install did not create the CRD"
[ "$("$KUBECTL" get crd trainingjobs.hypertrain.dev -o jsonpath='{.metadata.annotations.meta\.helm\.sh/release-name}')" = ht ] \
  || fail "the CRD is not owned by the release"
columns | grep -qw Revision && fail "the CRD already has the column the upgrade adds"
"$KUBECTL" -n default apply -f examples/local-tiny.yaml > /dev/null || fail "a TrainingJob of the installed CRD"
job="$("$KUBECTL" -n default get tj -o jsonpath='{.items[0].metadata.name}')"

# The next chart version's CRD: one more printer column.
python3 - "$tmp/chart/files/trainingjobs.hypertrain.dev.yaml" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
anchor = "      additionalPrinterColumns:\n"
assert anchor in s, "no printer columns in the CRD"
s = s.replace(anchor, anchor + "        - name: Revision\n          type: string\n          jsonPath: .metadata.resourceVersion\n", 1)
open(p, "w").write(s)
PY
sed -i 's/^version: .*/version: 0.1.1-upgrade-test/' "$tmp/chart/Chart.yaml"
"$HELM" upgrade ht "$tmp/chart" -n hypertrain-system --reuse-values > "$tmp/upgrade.log" \
  || { cat "$tmp/upgrade.log" >&2; fail "helm upgrade"; }
columns | grep -qw Revision || fail "helm upgrade did not apply the CRD change (columns: $(columns))"
"$KUBECTL" -n default get tj "$job" -o name >/dev/null || fail "the TrainingJob did not survive the upgrade"
# The API server serves the new table once its CRD handler has reloaded, shortly after the spec changed.
# The header read whole first: `kubectl | head -1` under pipefail fails when head's early exit ends kubectl with SIGPIPE.
header() { local out; out="$("$KUBECTL" -n default get tj "$job" 2>/dev/null)" || true; printf '%s\n' "${out%%$'\n'*}"; }
for _ in $(seq 60); do [[ "$(header)" == *REVISION* ]] && break; sleep 0.5; done
[[ "$(header)" == *REVISION* ]] || fail "kubectl does not show the new column in 30 s: $(header); CRD columns: $(columns)"

"$HELM" uninstall ht -n hypertrain-system > "$tmp/uninstall.log"
grep -q "kept due to the resource policy" "$tmp/uninstall.log" || { cat "$tmp/uninstall.log" >&2; fail "helm uninstall did not say it kept the CRD"; }
"$KUBECTL" get crd trainingjobs.hypertrain.dev >/dev/null 2>&1 || fail "helm uninstall deleted the CRD (crds.keep is on)"
"$KUBECTL" -n default get tj "$job" -o name >/dev/null || fail "helm uninstall lost the TrainingJob"
"$KUBECTL" -n hypertrain-system get deployment -o name | grep -q . && fail "the operator Deployment outlived helm uninstall"
echo "helm upgrade: CRD change applied, the job kept; uninstall kept the CRD and the job"
