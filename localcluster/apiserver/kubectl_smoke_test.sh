#!/usr/bin/env bash
# kubectl smoke test: the real /usr/bin/kubectl against a real kube-local.
set -euo pipefail

BIN="$1"
TESTDATA="$(dirname "$2")"
KUBECTL="${KUBECTL:-/usr/bin/kubectl}"
[ -x "$KUBECTL" ] || { echo "FAIL: $KUBECTL not found (kubectl is required on every machine)"; exit 1; }

WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/kubectl_smoke.XXXXXX")"
export HOME="$WORK/home"   # kubectl's discovery cache stays inside the test
mkdir -p "$HOME"
"$BIN" --data-dir "$WORK/data" --kubeconfig-out "$WORK/kubeconfig" --port-file "$WORK/port" \
  >"$WORK/server.log" 2>&1 &
PID=$!
cleanup() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 1 200); do [ -s "$WORK/port" ] && break; sleep 0.05; done
[ -s "$WORK/port" ] || { cat "$WORK/server.log"; echo "FAIL: kube-local did not start"; exit 1; }

export KUBECONFIG="$WORK/kubeconfig"
k() { timeout 30 "$KUBECTL" --request-timeout=20s "$@"; }
fail() { echo "FAIL: $*"; echo "--- server log"; tail -50 "$WORK/server.log"; exit 1; }
expect() {  # expect <description> <needle> <haystack>
  grep -qE -- "$2" <<<"$3" || fail "$1: expected /$2/ in:\n$3"
}

out=$(k version 2>&1); expect "server version" "Server Version: v1.32" "$out"
out=$(k get namespaces); expect "default namespaces" "kube-system +Active" "$out"

# Typed `kubectl create <kind>` generators send protobuf bodies.
out=$(k create namespace smoke); expect "create namespace" "namespace/smoke created" "$out"
out=$(k create configmap cfg -n smoke --from-literal=a=b); expect "create configmap" "configmap/cfg created" "$out"
out=$(k get configmap cfg -n smoke -o jsonpath='{.data.a}'); [ "$out" = "b" ] || fail "configmap data: $out"
out=$(k delete namespace smoke); expect "delete namespace" "namespace \"smoke\" deleted" "$out"

# CRD + custom resources.
out=$(k apply -f "$TESTDATA/widget-crd.yaml"); expect "crd created" "widgets.example.com created" "$out"
out=$(k get crd); expect "crd listed" "widgets.example.com" "$out"
out=$(k apply -f "$TESTDATA/widget.yaml"); expect "cr created" "widget.example.com/w1 created" "$out"
out=$(k get wd); expect "printer columns" "NAME +SIZE +COLOR +STATE +AGE" "$out"
expect "printer row with default" "^w1 +3 +red +" "$out"
out=$(k get widgets.example.com w1 -o jsonpath='{.spec.color}/{.metadata.generation}')
[ "$out" = "red/1" ] || fail "defaulted color and generation: $out"
if out=$(k apply -f "$TESTDATA/widget-invalid.yaml" 2>&1); then fail "invalid widget accepted"; fi
expect "422 names fields" "spec.size: Invalid value: 30" "$out"
expect "422 enum" "spec.color: Unsupported value: \"green\"" "$out"

# get -w sees the changes made meanwhile.
timeout 8 "$KUBECTL" get wd -w --output-watch-events >"$WORK/watch.out" 2>&1 &
WPID=$!
sleep 1.5
k patch wd w1 --type=merge -p '{"spec":{"size":5}}' >/dev/null
k patch wd w1 --subresource=status --type=merge \
  -p '{"status":{"conditions":[{"type":"Running","status":"True"}]}}' >/dev/null
out=$(k get wd w1); expect "status column" "^w1 +5 +red +Running" "$out"
out=$(k get wd w1 -o jsonpath='{.metadata.generation}'); [ "$out" = "2" ] || fail "generation after spec patch: $out"
sed 's/size: 3/size: 7/' "$TESTDATA/widget.yaml" >"$WORK/widget2.yaml"
out=$(k apply -f "$WORK/widget2.yaml"); expect "cr configured" "widget.example.com/w1 configured" "$out"
out=$(k apply --server-side -f "$WORK/widget2.yaml" 2>&1); expect "server-side apply" "w1 serverside-applied" "$out"
out=$(k delete wd w1); expect "cr deleted" "widget.example.com \"w1\" deleted" "$out"
wait "$WPID" || true
w=$(cat "$WORK/watch.out")
expect "watch initial" "ADDED +w1 +3" "$w"
expect "watch modified" "MODIFIED +w1 +5" "$w"
expect "watch deleted" "DELETED +w1" "$w"

# Pods and services.
out=$(k create -f "$TESTDATA/pod.yaml"); expect "pod created" "pod/web created" "$out"
out=$(k apply -f "$TESTDATA/service.yaml"); expect "svc created" "service/web created" "$out"
out=$(k get pods,svc); expect "pod row" "pod/web +0/1 +Pending" "$out"
expect "svc row" "service/web +ClusterIP +10\.96\.[0-9]+\.[0-9]+ +<none> +80/TCP" "$out"
out=$(k patch pod web -p '{"metadata":{"labels":{"tier":"front"}}}'); expect "pod patched" "pod/web patched" "$out"
out=$(k get pods -l tier=front -o name); [ "$out" = "pod/web" ] || fail "label selector: $out"
sed 's/nginx:1.25/nginx:1.26/' "$TESTDATA/pod.yaml" >"$WORK/pod2.yaml"
out=$(k apply -f "$WORK/pod2.yaml" 2>&1); expect "pod apply" "pod/web configured" "$out"
out=$(k get pod web -o jsonpath='{.spec.containers[0].image} {.spec.containers[0].env[0].value}')
[ "$out" = "nginx:1.26 1" ] || fail "strategic apply kept env and changed image: $out"
out=$(k get svc web -o jsonpath='{.spec.ports[0].targetPort}'); [ "$out" = "8080" ] || fail "svc port: $out"
out=$(k delete -f "$TESTDATA/service.yaml"); expect "svc deleted" "service \"web\" deleted" "$out"
out=$(k delete pod web); expect "pod deleted" "pod \"web\" deleted" "$out"
out=$(k get pods 2>&1); expect "no pods" "No resources found" "$out"
out=$(k delete crd widgets.example.com); expect "crd deleted" "deleted" "$out"
echo "PASS"
