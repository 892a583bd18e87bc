#!/usr/bin/env bash
# End to end on real processes (kube-local + node agent + operator), pods that
# only sleep (the trainer's side of a resize is runtime/launch:elastic_train_test):
# an elastic TrainingJob of 2 nodes (minNodes 1) on a cluster of exactly 2
# one-GPU nodes, no spare.
#  1. a node turns unschedulable (HyperPod health label) -> gang restart; the
#     new gang cannot be placed whole -> after schedulingTimeoutSeconds the job
#     runs on 1 node (currentNodes 1, Restarting/Resized, a Resized event, the
#     pod's NNODES=1 with HYPERTRAIN_DESIRED_NNODES=2, kubectl get tj's Current);
#  2. the node comes back -> after minResizeIntervalSeconds the job grows back
#     to 2 nodes; status.elastic.history holds 2 -> 1 -> 2.
# With the argument --real, the same on the real control plane (etcd,
# kube-apiserver, controller manager and kube-scheduler 1.26.5,
# //localcluster/envtest): kube-scheduler places the pods (the node agent only
# runs them), so the shrink and the growth follow from the real scheduler's
# view of the node's health label. Skipped, naming HYPERTRAIN_KUBE_BINARIES,
# without the binaries.
set -euo pipefail
R="$PWD"
REAL=0
if [ "${1:-}" = --real ]; then
  . "$R/localcluster/envtest/envtest.sh"
  envtest_require "$R/localcluster/envtest/kube-envtest"
  REAL=1
fi
T="$(mktemp -d "${TEST_TMPDIR:-/tmp}/elastic.XXXXXX")"
export KUBECONFIG="$T/kubeconfig"
PIDS=()
cleanup() {
  local rc=$?
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill -TERM "${PIDS[i]}" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true
  done
  if [ "$rc" -ne 0 ]; then for f in "$T"/*.log; do echo "== $f"; tail -n 40 "$f"; done; fi
  exit "$rc"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; kubectl get tj,pods -o wide >&2 || true; kubectl get tj el -o yaml >&2 || true; exit 1; }

AGENT_FLAGS=()
if [ "$REAL" = 1 ]; then
  envtest_start "$R/localcluster/envtest/kube-envtest" "$T/cp" || exit 1
  PIDS+=("$ENVTEST_PID")
  AGENT_FLAGS=(--bind-pods false)  # kube-scheduler binds
else
  "$R/localcluster/apiserver/kube-local" --data-dir "$T/kl" --kubeconfig-out "$KUBECONFIG" --port-file "$T/port" > "$T/kube-local.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do [ -s "$KUBECONFIG" ] && break; sleep 0.1; done
  for _ in $(seq 50); do kubectl get --raw /healthz >/dev/null 2>&1 && break; sleep 0.1; done
fi
kubectl apply -f "$R/crds/trainingjobs.hypertrain.dev.yaml" > /dev/null
for _ in $(seq 100); do kubectl get tj > /dev/null 2>&1 && break; sleep 0.1; done
"$R/localcluster/nodeagent/node-agent" --kubeconfig "$KUBECONFIG" --nodes 2 --work-dir "$T/pods" "${AGENT_FLAGS[@]}" \
  --capacity nvidia.com/gpu=1 --image-map sleep:local=/bin/sleep --max-grace-s 1 --poll-ms 100 > "$T/node-agent.log" 2>&1 &
PIDS+=($!)
if [ "$REAL" = 1 ]; then
  # The node lifecycle controller lifts a Ready node's not-ready taint; kube-scheduler waits for that.
  for _ in $(seq 600); do [ "$(kubectl get nodes --no-headers 2>/dev/null | grep -c ' Ready ')" = 2 ] &&
    [ -z "$(kubectl get nodes -o jsonpath='{.items[*].spec.taints}')" ] && break; sleep 0.1; done
  [ -z "$(kubectl get nodes -o jsonpath='{.items[*].spec.taints}')" ] || fail "nodes not Ready and untainted in 60 s"
fi
"$R/operator/cmd/hypertrain-operator" --kubeconfig="$KUBECONFIG" --leader-elect=false --metrics-addr=127.0.0.1:0 \
  > "$T/operator.log" 2>&1 &
PIDS+=($!)

jp() { kubectl get "$1" "$2" -o jsonpath="$3" 2>/dev/null || true; }
pods_of() { kubectl get pods -l hypertrain.dev/job-name="$1" -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.phase}{" "}{.spec.nodeName}{" "}{.metadata.labels.hypertrain\.dev/restart-attempt}{"\n"}{end}' 2>/dev/null || true; }
wait_pods() {  # NAME "<expected pods_of output>" SECONDS: exactly these pods, Running
  for _ in $(seq $((${3} * 10))); do [ "$(pods_of "$1" | awk '$2 == "Running" {print $1}' | sort | tr '\n' ' ')" = "$2" ] &&
    [ "$(pods_of "$1" | wc -l)" = "$(echo $2 | wc -w)" ] && return 0; sleep 0.1; done
  fail "$1: pods '$(pods_of "$1" | tr '\n' ';')', want Running '$2'"
}
current() { jp tj el '{.status.currentNodes}'; }
health() { kubectl label node local-node-1 sagemaker.amazonaws.com/node-health-status="$1" --overwrite > /dev/null; }

cat > "$T/el.yaml" <<'EOF'
apiVersion: hypertrain.dev/v1alpha1
kind: TrainingJob
metadata: {name: el, namespace: default}
spec:
  image: sleep:local
  command: [sleep]
  args: ["600"]
  nodes: 2
  gpusPerNode: 1
  faultPolicy: {deepHealthCheck: Ignored}
  runPolicy: {schedulingTimeoutSeconds: 3}
  elastic: {minNodes: 1, checkIntervalSeconds: 1, minResizeIntervalSeconds: 4}
  trainerConfig:
    inline: |
      trainer: {max_steps: 1}
      model: {grad_accumulation_steps: 1}
EOF
kubectl apply -f "$T/el.yaml" > /dev/null
wait_pods el "el-node-0 el-node-1 " 30
[ "$(current)" = 2 ] || fail "currentNodes '$(current)', want 2"
kubectl get tj el | tee "$T/get0.txt"
head -1 "$T/get0.txt" | grep -q CURRENT || fail "no Current column"
echo "ok: running on 2 of 2 nodes"

echo "--- 1. local-node-1 turns unschedulable, no spare node"
start=$(date +%s)
health UnschedulablePendingReplacement
for _ in $(seq 300); do [ "$(current)" = 1 ] && break; sleep 0.1; done
[ "$(current)" = 1 ] || fail "not resized to 1 node"
took=$(($(date +%s) - start))
# Restarting/Resized lasts until the smaller gang runs (plan_elastic_test has
# it); what stays is the event and the history.
events() { kubectl get events --field-selector involvedObject.name=el -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}'; }
msg="$(events | grep "^Resized: " | tail -n 1)"
echo "$msg" | grep -q "resized from 2 to 1 nodes: 1 node of 2: the gang of 2 was not all Running within schedulingTimeoutSeconds=3; 1 of 2 pods were placed" ||
  fail "no Resized event with the reason: $(events)"
[ "$(jp tj el '{.status.elastic.history[1].reason}')" = "${msg#*resized from 2 to 1 nodes: }" ] || fail "history reason"
wait_pods el "el-node-0 " 30
[ "$(pods_of el | awk '{print $3}')" = local-node-0 ] || fail "el-node-0 not on local-node-0"
env0="$(jp pod el-node-0 '{range .spec.containers[0].env[*]}{.name}={.value}{"\n"}{end}')"
for want in NNODES=1 WORLD_SIZE=1 HYPERTRAIN_DESIRED_NNODES=2; do
  echo "$env0" | grep -qx "$want" || fail "el-node-0 env lacks $want: $env0"
done
echo "$env0" | grep -q "^HYPERTRAIN_RESIZE_REASON=1 node of 2: " || fail "no resize reason in the env"
kubectl get tj el | tee "$T/get1.txt"
awk 'NR == 2 {exit !($3 == 2 && $4 == 1)}' "$T/get1.txt" || fail "kubectl get tj: Nodes 2, Current 1 expected"
[ "$(jp tj el '{.status.restartCount}')" = 1 ] || fail "restartCount (the node fault only)"
echo "ok: on 1 node ${took}s after the node turned unschedulable: $msg"

echo "--- 2. the node comes back"
health Schedulable
wait_pods el "el-node-0 el-node-1 " 30
[ "$(current)" = 2 ] || fail "currentNodes '$(current)' after growing"
[ "$(jp tj el '{.status.elastic.history[*].nodes}')" = "2 1 2" ] || fail "history: $(jp tj el '{.status.elastic.history[*].nodes}')"
last="$(jp tj el '{.status.elastic.lastResizeTime}')"
prev="$(jp tj el '{.status.elastic.history[1].since}')"
[ -n "$last" ] && [ "$last" != "$prev" ] || fail "lastResizeTime '$last'"
gap=$(( $(date -d "$last" +%s) - $(date -d "$prev" +%s) ))
[ "$gap" -ge 4 ] || fail "grew ${gap}s after the shrink, minResizeIntervalSeconds is 4"
[ "$(jp pod el-node-1 '{.spec.containers[0].env[?(@.name=="NNODES")].value}')" = 2 ] || fail "NNODES after growing"
[ -z "$(jp pod el-node-1 '{.spec.containers[0].env[?(@.name=="HYPERTRAIN_RESIZE_REASON")].value}')" ] ||
  fail "a resize reason at the desired size"
kubectl get tj el
# Read once, then searched: `events | grep -q` under pipefail fails when grep's
# early exit ends kubectl with SIGPIPE.
ev="$(events)"
[ "$(grep -c "^Resized: " <<< "$ev")" = 2 ] || fail "two Resized events expected: $ev"
grep -q "^Resized: resized from 1 to 2 nodes: 2 nodes of 2: 2 nodes can host a pod again" <<< "$ev" || fail "grow event: $ev"
echo "ok: back on 2 nodes ${gap}s after the shrink; history $(jp tj el '{.status.elastic.history[*].nodes}')"
if [ "$REAL" = 1 ]; then
  # kube-scheduler's own word: it refused el-node-1 while the node was unhealthy and placed it after.
  sched="$(kubectl get events --field-selector involvedObject.name=el-node-1 \
    -o jsonpath='{range .items[*]}{.reason} {.source.component}{.reportingComponent}: {.message}{"\n"}{end}')"
  grep -q "^FailedScheduling default-scheduler: 0/2 nodes are available" <<< "$sched" || fail "no FailedScheduling by kube-scheduler: $sched"
  # After the grow the two pods are interchangeable: kube-scheduler may bind
  # el-node-1 to either node, but the gang must cover both, local-node-1 too.
  grep -qE "^Scheduled default-scheduler: Successfully assigned default/el-node-1 to local-node-[01]" <<< "$sched" ||
    fail "el-node-1 not bound by kube-scheduler: $sched"
  placed="$(for p in el-node-0 el-node-1; do jp pod "$p" '{.spec.nodeName}'; echo; done | sort | tr '\n' ' ')"
  [ "$placed" = "local-node-0 local-node-1 " ] || fail "the pods are on '$placed', want one on each node"
  echo "ok: kube-scheduler refused el-node-1 while local-node-1 was unhealthy and bound the gang on both nodes when it came back"
fi
echo PASS
