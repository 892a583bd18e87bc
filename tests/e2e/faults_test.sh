#!/usr/bin/env bash
# End to end on real processes (kube-local + node agent + operator + trainer):
#  1. non-retryable exit (a trainer config error, exit 2) -> Failed at once with
#     the pod's message, no restart;
#  2. node health label turned Unschedulable mid-run -> gang restart, the new
#     pods avoid that node, the job still Succeeds;
#  3. restart budget exhausted (backoffLimit 0, trainer killed) -> Failed/BackoffLimitExceeded;
#  4. hang: one rank stopped with SIGSTOP -> the step stops advancing in the
#     launcher's progress annotation -> Restarting/Hang -> gang restart;
#  5. operator killed (SIGKILL) right after a pod failure, restarted: one gang
#     restart, exactly one pod per rank, Succeeded;
#  6. repeat offender (maxRepeatOffenders: 1): the node of the failed pod is
#     excluded, the restarted gang runs on the other node.
set -euo pipefail
R="$PWD"
T="$(mktemp -d "${TEST_TMPDIR:-/tmp}/faults.XXXXXX")"
BIN="$R"
export KUBECONFIG="$T/kubeconfig" OPENBLAS_NUM_THREADS=1
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
fail() { echo "FAIL: $*" >&2; kubectl get tj -o yaml >&2 || true; exit 1; }

"$BIN/runtime/cmd/hypertrain" prepare --out "$T/data" --tokens-per-shard 100000 /usr/share/common-licenses/* > "$T/prepare.log" 2>&1
"$BIN/localcluster/apiserver/kube-local" --data-dir "$T/kl" --kubeconfig-out "$KUBECONFIG" --port-file "$T/port" > "$T/kube-local.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$KUBECONFIG" ] && break; sleep 0.1; done
for _ in $(seq 50); do kubectl get --raw /healthz >/dev/null 2>&1 && break; sleep 0.1; done
kubectl apply -f "$R/crds/trainingjobs.hypertrain.dev.yaml" > /dev/null
"$BIN/localcluster/nodeagent/node-agent" --kubeconfig "$KUBECONFIG" --nodes 2 --work-dir "$T/pods" \
  --image-map "hypertrain:local=$BIN/runtime/cmd/hypertrain" --max-grace-s 3 --pod-kubeconfig "$KUBECONFIG" \
  --env HYPERTRAIN_PROGRESS_INTERVAL_S=1 > "$T/node-agent.log" 2>&1 &
PIDS+=($!)
start_operator() {
  "$BIN/operator/cmd/hypertrain-operator" --kubeconfig="$KUBECONFIG" --leader-elect=false --metrics-addr=127.0.0.1:0 \
    >> "$T/operator.log" 2>&1 &
  OPERATOR=$!
  PIDS+=($OPERATOR)
}
start_operator

# job NAME PORT MAX_STEPS BACKOFF [EXTRA_SED_EXPRESSION]
job() {
  sed -e "s#/tmp/hypertrain-local/#$T/$1/#g" -e "s#name: local-tiny#name: $1#" -e "s#masterPort: 29531#masterPort: $2#" \
      -e "s#max_steps: 40#max_steps: $3#" -e "s#backoffLimit: 3#backoffLimit: $4#" \
      -e "${5:-s#^##}" "$R/examples/local-tiny.yaml" > "$T/$1.yaml"
  sed -i "s#train_dir: $T/$1/data#train_dir: $T/data#" "$T/$1.yaml"
  # The demo's data uses the Llama-2 tokenizer; these fault tests train on bytes.
  sed -i -e "s#vocab_size: 32000#vocab_size: 256#" -e "/tokenizer: /d" "$T/$1.yaml"
  kubectl apply -f "$T/$1.yaml" > /dev/null
}
state() { kubectl get tj "$1" -o jsonpath='{.status.state}' 2>/dev/null || true; }
wait_state() {  # NAME STATE SECONDS
  for _ in $(seq $((${3} * 5))); do [ "$(state "$1")" = "$2" ] && return 0; sleep 0.2; done
  fail "$1 did not reach $2 in ${3}s (state '$(state "$1")')"
}
last_step() { tail -n 1 "$T/$1/exp/metrics.jsonl" 2>/dev/null | sed -n 's/.*"step":\([0-9]*\).*/\1/p'; }
wait_step() {  # NAME STEP SECONDS
  for _ in $(seq $((${3} * 5))); do [ "$(last_step "$1")" -ge "$2" ] 2>/dev/null && return 0; sleep 0.2; done
  fail "$1 did not reach step $2"
}

echo "--- 1. non-retryable exit"
job badcfg 29541 20 3 "s#backend: cpu#backend: nonsense#"
wait_state badcfg Failed 60
reason="$(kubectl get tj badcfg -o jsonpath='{.status.conditions[?(@.type=="Failed")].reason}')"
msg="$(kubectl get tj badcfg -o jsonpath='{.status.conditions[?(@.type=="Failed")].message}')"
[ "$reason" = NonRetryableExitCode ] || fail "reason $reason"
echo "$msg" | grep -q "trainer.backend" || fail "message does not carry the trainer's error: $msg"
[ "$(kubectl get tj badcfg -o jsonpath='{.status.restartCount}')" = 0 ] || fail "restarted"
echo "ok: $reason: $(echo "$msg" | tail -n 1)"
kubectl delete tj badcfg --wait=false > /dev/null

echo "--- 2. node turns unhealthy"
job health 29551 400 3
wait_state health Running 60
wait_step health 5 60
node="$(kubectl get pod health-node-1 -o jsonpath='{.spec.nodeName}')"
kubectl label node "$node" sagemaker.amazonaws.com/node-health-status=Unschedulable --overwrite > /dev/null
for _ in $(seq 300); do [ "$(kubectl get tj health -o jsonpath='{.status.restartCount}')" = 1 ] && break; sleep 0.2; done
[ "$(kubectl get tj health -o jsonpath='{.status.restartCount}')" = 1 ] || fail "no gang restart after $node turned unhealthy"
wait_state health Running 60
for p in health-node-0 health-node-1; do
  on="$(kubectl get pod "$p" -o jsonpath='{.spec.nodeName}')"
  [ -n "$on" ] && [ "$on" != "$node" ] || fail "$p is on '$on' (unhealthy: $node)"
done
echo "ok: pods moved off $node"
wait_state health Succeeded 180
kubectl label node "$node" sagemaker.amazonaws.com/node-health-status=Schedulable --overwrite > /dev/null

echo "--- 3. restart budget exhausted"
job budget 29561 2000 0
wait_state budget Running 60
wait_step budget 3 60
cid="$(kubectl get pod budget-node-0 -o jsonpath='{.status.containerStatuses[0].containerID}')"
kill -9 "${cid#local://}"
wait_state budget Failed 60
reason="$(kubectl get tj budget -o jsonpath='{.status.conditions[?(@.type=="Failed")].reason}')"
[ "$reason" = BackoffLimitExceeded ] || fail "reason $reason"
echo "ok: $reason"

echo "--- 4. hang (SIGSTOP)"
job hang 29571 5000 3 "s#^  runPolicy:#  faultPolicy: {hangTimeoutSeconds: 8, startupTimeoutSeconds: 60}\n  runPolicy:#"
wait_state hang Running 60
wait_step hang 3 60
for _ in $(seq 100); do [ -n "$(kubectl get tj hang -o jsonpath='{.status.progress.step}')" ] && break; sleep 0.2; done
[ -n "$(kubectl get tj hang -o jsonpath='{.status.progress.step}')" ] || fail "no status.progress from the launcher"
cid="$(kubectl get pod hang-node-1 -o jsonpath='{.status.containerStatuses[0].containerID}')"
rank="$(pgrep -P "${cid#local://}" | head -n 1)"
[ -n "$rank" ] || fail "no rank process under launcher ${cid#local://}"
kill -STOP "$rank"
for _ in $(seq 300); do [ "$(kubectl get tj hang -o jsonpath='{.status.restartCount}')" = 1 ] && break; sleep 0.2; done
[ "$(kubectl get tj hang -o jsonpath='{.status.restartCount}')" = 1 ] || fail "no restart after SIGSTOP"
reason="$(kubectl get tj hang -o jsonpath='{.status.lastFault.reason}')"
[ "$reason" = Hang ] || fail "restart reason '$reason', want Hang"
wait_state hang Running 60
for _ in $(seq 50); do [ -d "/proc/$rank" ] && [ "$(awk '{print $3}' "/proc/$rank/stat" 2>/dev/null)" != Z ] || break; sleep 0.2; done
[ -d "/proc/$rank" ] && [ "$(awk '{print $3}' "/proc/$rank/stat" 2>/dev/null)" != Z ] && fail "the stopped rank $rank survived the restart"
echo "ok: Hang -> gang restart"
kubectl delete tj hang --wait=false > /dev/null

echo "--- 5. operator killed during a restart"
job opkill 29581 80 3
wait_state opkill Running 60
wait_step opkill 3 60
cid="$(kubectl get pod opkill-node-0 -o jsonpath='{.status.containerStatuses[0].containerID}')"
kill -9 "${cid#local://}"
for _ in $(seq 100); do [ "$(kubectl get pod opkill-node-0 -o jsonpath='{.status.phase}')" = Failed ] && break; sleep 0.05; done
kill -9 "$OPERATOR"
wait "$OPERATOR" 2>/dev/null || true
sleep 1  # the failed pod sits unhandled while no operator runs
start_operator
wait_state opkill Succeeded 120
[ "$(kubectl get tj opkill -o jsonpath='{.status.restartCount}')" = 1 ] || fail "restartCount != 1"
pods="$(kubectl get pods -l hypertrain.dev/job-name=opkill --no-headers | wc -l)"
attempts="$(kubectl get pods -l hypertrain.dev/job-name=opkill -o jsonpath='{range .items[*]}{.metadata.labels.hypertrain\.dev/restart-attempt}{"\n"}{end}' | sort -u | tr '\n' ' ')"
[ "$pods" = 2 ] || fail "$pods pods for 2 ranks"
[ "$attempts" = "1 " ] || fail "restart attempts of the pods: $attempts"
echo "ok: one restart, 2 pods of attempt 1, Succeeded"

echo "--- 6. repeat offender excluded"
job offender 29591 2000 3 "s#^  runPolicy:#  faultPolicy: {maxRepeatOffenders: 1}\n  runPolicy:#"
wait_state offender Running 60
wait_step offender 3 60
bad="$(kubectl get pod offender-node-1 -o jsonpath='{.spec.nodeName}')"
cid="$(kubectl get pod offender-node-1 -o jsonpath='{.status.containerStatuses[0].containerID}')"
kill -9 "${cid#local://}"
for _ in $(seq 300); do [ "$(kubectl get tj offender -o jsonpath='{.status.restartCount}')" = 1 ] && break; sleep 0.2; done
wait_state offender Running 60
kubectl get tj offender -o jsonpath='{.status.excludedNodes}' | grep -q "$bad" || fail "$bad not in status.excludedNodes"
for p in offender-node-0 offender-node-1; do
  on="$(kubectl get pod "$p" -o jsonpath='{.spec.nodeName}')"
  [ -n "$on" ] && [ "$on" != "$bad" ] || fail "$p is on '$on' (excluded: $bad)"
done
echo "ok: $bad excluded, the gang runs elsewhere"
kubectl delete tj offender --wait=false > /dev/null
echo PASS
