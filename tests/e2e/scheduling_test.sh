#!/usr/bin/env bash
# End to end on real processes (kube-local + node agent + operator), pods that
# only sleep (no training: this is about getting a gang scheduled):
#  1. Kueue-style gating: a gang is admitted all or none (the node agent plays
#     Kueue's pod-group admission with node capacity as the quota);
#  2. a gang that cannot be placed is torn down after schedulingTimeoutSeconds,
#     retried after a backoff, then Failed/Unschedulable with the scheduler's
#     message; its GPUs are free again (another gang runs on them);
#  3. coscheduling: the PodGroup (minMember, owner) and all-or-nothing binding;
#     Volcano: its PodGroup, annotation and scheduler;
#  4. topology: a required layer-3 network node keeps the gang together;
#  5. podTemplate: a sidecar, an init container, a pull secret reach the pods;
#     a conflicting override fails the job naming the field;
#  6. every instance type's pod has its GPUs, EFA devices, hugepages and EFA
#     environment; a type not in the table gets a Warning event;
#  7. exit code 1 (a command's own error) fails the job at once.
# Nodes: 3, one GPU each; local-node-0 and -2 under network node nn-a, -1 under nn-b.
set -euo pipefail
R="$PWD"
T="$(mktemp -d "${TEST_TMPDIR:-/tmp}/scheduling.XXXXXX")"
BIN="$R"
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
fail() { echo "FAIL: $*" >&2; kubectl get tj,pods -o wide >&2 || true; exit 1; }

"$BIN/localcluster/apiserver/kube-local" --data-dir "$T/kl" --kubeconfig-out "$KUBECONFIG" --port-file "$T/port" > "$T/kube-local.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$KUBECONFIG" ] && break; sleep 0.1; done
for _ in $(seq 50); do kubectl get --raw /healthz >/dev/null 2>&1 && break; sleep 0.1; done
kubectl apply -f "$R/crds/trainingjobs.hypertrain.dev.yaml" -f "$R/localcluster/crds/podgroups.yaml" > /dev/null
L3=topology.k8s.aws/network-node-layer-3
"$BIN/localcluster/nodeagent/node-agent" --kubeconfig "$KUBECONFIG" --nodes 3 --work-dir "$T/pods" \
  --capacity nvidia.com/gpu=1 --admit-pod-groups --image-map sleep:local=/bin/sleep --max-grace-s 1 --poll-ms 100 \
  --node-label "0:$L3=nn-a" --node-label "1:$L3=nn-b" --node-label "2:$L3=nn-a" > "$T/node-agent.log" 2>&1 &
PIDS+=($!)
"$BIN/operator/cmd/hypertrain-operator" --kubeconfig="$KUBECONFIG" --leader-elect=false --metrics-addr=127.0.0.1:0 \
  > "$T/operator.log" 2>&1 &
PIDS+=($!)

# job NAME NODES GPUS [SPEC_YAML_LINES...]: a TrainingJob whose pods sleep
# (ARGS: sleep's arguments, default ["600"]).
job() {
  local name=$1 nodes=$2 gpus=$3
  shift 3
  {
    printf 'apiVersion: hypertrain.dev/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: %s\n  namespace: default\n' "$name"
    printf 'spec:\n  image: sleep:local\n  command: [sleep]\n  args: %s\n  nodes: %s\n' "${ARGS:-[\"600\"]}" "$nodes"
    if [ "$gpus" = 0 ]; then printf '  nprocPerNode: 1\n'; else printf '  gpusPerNode: %s\n' "$gpus"; fi
    printf '  faultPolicy: {deepHealthCheck: Ignored}\n'
    printf '  trainerConfig:\n    inline: |\n      trainer: {max_steps: 1}\n      model: {}\n'
    for line in "$@"; do printf '  %s\n' "$line"; done
  } > "$T/$name.yaml"
  kubectl apply -f "$T/$name.yaml" > /dev/null
}
jp() { kubectl get "$1" "$2" -o jsonpath="$3" 2>/dev/null || true; }
state() { jp tj "$1" '{.status.state}'; }
wait_state() {  # NAME STATE SECONDS
  for _ in $(seq $((${3} * 10))); do [ "$(state "$1")" = "$2" ] && return 0; sleep 0.1; done
  fail "$1 did not reach $2 in ${3}s (state '$(state "$1")')"
}
pods_of() { kubectl get pods -l hypertrain.dev/job-name="$1" -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.phase}{" "}{.spec.nodeName}{"\n"}{end}' 2>/dev/null || true; }
count_running() { pods_of "$1" | awk '$2 == "Running"' | wc -l; }
wait_running() {  # NAME COUNT SECONDS
  for _ in $(seq $((${3} * 10))); do [ "$(count_running "$1")" = "$2" ] && return 0; sleep 0.1; done
  fail "$1: $(count_running "$1") pods Running, want $2"
}
wait_gone() {  # NAME SECONDS: the job and its pods are gone
  kubectl delete tj "$1" --wait=false > /dev/null 2>&1 || true
  for _ in $(seq $((${2} * 10))); do [ -z "$(pods_of "$1")" ] && return 0; sleep 0.1; done
  fail "pods of $1 still there: $(pods_of "$1")"
}

echo "--- 1. Kueue: the whole gang or none of it"
job kq-a 2 1 "scheduling: {gang: {provider: kueue, queueName: team-a}}"
wait_running kq-a 2 30
[ -z "$(jp pod kq-a-node-0 '{.spec.schedulingGates[*].name}')" ] || fail "kq-a-node-0 still gated"
[ "$(jp pod kq-a-node-0 '{.metadata.labels.kueue\.x-k8s\.io/queue-name}')" = team-a ] || fail "no queue label"
[ "$(jp pod kq-a-node-1 '{.metadata.annotations.kueue\.x-k8s\.io/pod-group-total-count}')" = 2 ] || fail "no total count"
job kq-b 2 1 "scheduling: {gang: {provider: kueue, queueName: team-a}}"
for _ in $(seq 100); do [ "$(pods_of kq-b | wc -l)" = 2 ] && break; sleep 0.1; done
sleep 2  # many node agent passes: one GPU is free, the gang needs two
for p in kq-b-node-0 kq-b-node-1; do
  [ "$(jp pod $p '{.spec.schedulingGates[0].name}')" = kueue.x-k8s.io/admission ] || fail "$p lost its gate with one GPU free"
  [ -z "$(jp pod $p '{.spec.nodeName}')" ] || fail "$p was bound"
done
jp tj kq-b '{.status.scheduling.message}' | grep -q "waiting for admission by Kueue (LocalQueue team-a): 2 of 2 pods gated" \
  || fail "kq-b message: $(jp tj kq-b '{.status.scheduling.message}')"
echo "ok: kq-b waits whole ($(jp tj kq-b '{.status.scheduling.message}'))"
wait_gone kq-a 30
wait_running kq-b 2 30
echo "ok: kq-b admitted as a whole once kq-a freed its GPUs"
wait_gone kq-b 30

echo "--- 2. scheduling timeout: a partial gang is torn down, retried, then Failed/Unschedulable"
job hold 1 1
wait_running hold 1 30
job tmo 3 1 "runPolicy: {schedulingTimeoutSeconds: 3, schedulingRetry: {limit: 1, backoffSeconds: 1}}"
wait_running tmo 2 30  # two of three pods hold a GPU each: the partial gang
for _ in $(seq 150); do [ "$(jp tj tmo '{.status.scheduling.timeouts}')" = 1 ] && break; sleep 0.1; done
[ "$(jp tj tmo '{.status.conditions[?(@.type=="Restarting")].reason}')" = Unschedulable ] || fail "no Restarting/Unschedulable"
wait_state tmo Failed 30
[ "$(jp tj tmo '{.status.conditions[?(@.type=="Failed")].reason}')" = Unschedulable ] || fail "reason"
msg="$(jp tj tmo '{.status.conditions[?(@.type=="Failed")].message}')"
echo "$msg" | grep -q "schedulingTimeoutSeconds=3 (2 of 3 pods Running, 2 bound to nodes)" || fail "message: $msg"
echo "$msg" | grep -q "insufficient nvidia.com/gpu" || fail "no scheduler message: $msg"
[ "$(jp tj tmo '{.status.scheduling.timeouts}')" = 2 ] || fail "timeouts"
[ "$(jp tj tmo '{.status.restartAttempt}')" = 1 ] || fail "one retry, attempt 1"
for _ in $(seq 100); do [ -z "$(pods_of tmo)" ] && break; sleep 0.1; done
[ -z "$(pods_of tmo)" ] || fail "tmo pods left: $(pods_of tmo)"
job after 2 1
wait_running after 2 30
echo "ok: Failed/Unschedulable after 2 timeouts, its GPUs run another gang: $msg"
wait_gone after 30
kubectl delete tj tmo --wait=false > /dev/null

echo "--- 3. coscheduling and Volcano PodGroups"
job cos 3 1 "scheduling: {schedulerName: hypertrain-local, gang: {provider: coscheduling}}" \
  "runPolicy: {schedulingTimeoutSeconds: 120}"
for _ in $(seq 100); do [ "$(pods_of cos | wc -l)" = 3 ] && break; sleep 0.1; done
sleep 2
[ "$(pods_of cos | awk '$3 != ""' | wc -l)" = 0 ] || fail "part of the gang was bound with 2 GPUs free: $(pods_of cos)"
pg="$(jp pod cos-node-0 '{.metadata.labels.scheduling\.x-k8s\.io/pod-group}')"
[ -n "$pg" ] || fail "no pod-group label"
[ "$(jp podgroups.scheduling.x-k8s.io "$pg" '{.spec.minMember}')" = 3 ] || fail "PodGroup $pg minMember"
[ "$(jp podgroups.scheduling.x-k8s.io "$pg" '{.spec.scheduleTimeoutSeconds}')" = 120 ] || fail "scheduleTimeoutSeconds"
[ "$(jp podgroups.scheduling.x-k8s.io "$pg" '{.metadata.ownerReferences[0].name}')" = cos ] || fail "PodGroup owner"
jp tj cos '{.status.scheduling.message}' | grep -q "does not fit at once" || fail "cos message: $(jp tj cos '{.status.scheduling.message}')"
wait_gone hold 30
wait_running cos 3 30
echo "ok: PodGroup $pg (minMember 3): none bound with 2 GPUs free, all 3 at once with 3"
wait_gone cos 30
job vol 1 0 "scheduling: {gang: {provider: volcano, queueName: research}, priorityClassName: high}"
for _ in $(seq 100); do [ -n "$(pods_of vol)" ] && break; sleep 0.1; done
vg="$(jp pod vol-node-0 '{.metadata.annotations.scheduling\.k8s\.io/group-name}')"
[ -n "$vg" ] || fail "no Volcano group annotation"
[ "$(jp pod vol-node-0 '{.spec.schedulerName}')" = volcano ] || fail "schedulerName"
[ "$(jp podgroups.scheduling.volcano.sh "$vg" '{.spec.queue}')" = research ] || fail "Volcano PodGroup queue"
[ "$(jp podgroups.scheduling.volcano.sh "$vg" '{.spec.minMember}')" = 1 ] || fail "Volcano minMember"
echo "ok: Volcano PodGroup $vg (queue research), scheduler volcano"
wait_gone vol 30

echo "--- 4. topology: one layer-3 network node"
job topo 2 1 "scheduling: {topology: {layer: 3}}"
wait_running topo 2 30
nodes="$(pods_of topo | awk '{print $3}' | sort | tr '\n' ' ')"
[ "$nodes" = "local-node-0 local-node-2 " ] || fail "topo pods on $nodes (nn-a is local-node-0 and -2)"
echo "ok: both ranks under nn-a ($nodes)"
wait_gone topo 30

echo "--- 5. podTemplate"
job tpl 1 0 "podTemplate:" \
  "  metadata: {labels: {team: a}}" \
  "  spec:" \
  "    imagePullSecrets: [{name: ecr-pull}]" \
  "    initContainers: [{name: fetch, image: busybox, command: ['true']}]" \
  "    containers:" \
  "      - {name: log-shipper, image: fluent-bit:3}" \
  "      - {name: trainer, securityContext: {allowPrivilegeEscalation: false}, env: [{name: TEAM_ENV, value: x}]}"
wait_running tpl 1 30
[ "$(jp pod tpl-node-0 '{.spec.containers[*].name}')" = "trainer log-shipper" ] || fail "containers: $(jp pod tpl-node-0 '{.spec.containers[*].name}')"
[ "$(jp pod tpl-node-0 '{.spec.imagePullSecrets[0].name}')" = ecr-pull ] || fail "pull secret"
[ "$(jp pod tpl-node-0 '{.spec.initContainers[0].name}')" = fetch ] || fail "init container"
[ "$(jp pod tpl-node-0 '{.metadata.labels.team}')" = a ] || fail "label"
[ "$(jp pod tpl-node-0 '{.spec.containers[0].securityContext.allowPrivilegeEscalation}')" = false ] || fail "securityContext"
jp pod tpl-node-0 '{.spec.containers[0].env[*].name}' | grep -q TEAM_ENV || fail "trainer env"
echo "ok: sidecar, init container, pull secret, label and trainer extras in the pod"
wait_gone tpl 30
job badtpl 1 0 "podTemplate: {spec: {containers: [{name: trainer, command: [python, train.py]}]}}"
wait_state badtpl Failed 30
[ "$(jp tj badtpl '{.status.conditions[?(@.type=="Failed")].reason}')" = InvalidSpec ] || fail "badtpl reason"
jp tj badtpl '{.status.conditions[?(@.type=="Failed")].message}' | grep -q "spec.podTemplate.spec.containers\[0\].command: set spec.command" \
  || fail "badtpl message: $(jp tj badtpl '{.status.conditions[?(@.type=="Failed")].message}')"
[ -z "$(pods_of badtpl)" ] || fail "badtpl created pods"
echo "ok: $(jp tj badtpl '{.status.conditions[?(@.type=="Failed")].message}')"
kubectl delete tj badtpl --wait=false > /dev/null

echo "--- 6. every instance type"
"$BIN/operator/cmd/hypertrain-operator" --print-instance-types > "$T/types.tsv"
[ "$(wc -l < "$T/types.tsv")" -ge 40 ] || fail "instance table: $(wc -l < "$T/types.tsv") rows"
i=0
: > "$T/types.yaml"
while IFS=$'\t' read -r type gpus efa rdma model; do
  printf -- '---\napiVersion: hypertrain.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: it-%s, namespace: default, labels: {suite: types}, annotations: {type: "%s"}}\n' "$i" "$type" >> "$T/types.yaml"
  printf 'spec: {image: sleep:local, command: [sleep], args: ["600"], instanceType: "%s", trainerConfig: {inline: "trainer: {max_steps: 1}\\nmodel: {}\\n"}}\n' "$type" >> "$T/types.yaml"
  i=$((i + 1))
done < "$T/types.tsv"
job it-unknown 1 8 "instanceType: ml.p9.48xlarge"
kubectl apply -f "$T/types.yaml" > /dev/null
for _ in $(seq 300); do [ "$(kubectl get pods -l hypertrain.dev/job-name --no-headers 2>/dev/null | grep -c '^it-')" -ge $((i + 1)) ] && break; sleep 0.1; done
kubectl get pods -o json > "$T/type-pods.json"
python3 - "$T/types.tsv" "$T/type-pods.json" <<'PY'
import json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
pods = {p["metadata"]["labels"].get("hypertrain.dev/job-name"): p for p in json.load(open(sys.argv[2]))["items"]}
bad = []
for i, (name, gpus, efa, rdma, _) in enumerate(rows):
    pod = pods.get(f"it-{i}")
    if pod is None:
        bad.append(f"{name}: no pod"); continue
    c = pod["spec"]["containers"][0]
    lim, req = c["resources"].get("limits", {}), c["resources"].get("requests", {})
    env = {e["name"]: e.get("value") for e in c["env"]}
    want = {"nvidia.com/gpu": gpus}
    if efa != "0":
        want.update({"vpc.amazonaws.com/efa": efa, "hugepages-2Mi": "5120Mi"})
    for k, v in want.items():
        if lim.get(k) != v or req.get(k) != v:
            bad.append(f"{name}: {k} limit {lim.get(k)} request {req.get(k)}, want {v}")
    for k in ("vpc.amazonaws.com/efa", "hugepages-2Mi"):
        if efa == "0" and k in lim:
            bad.append(f"{name}: {k} on a type without EFA")
    if (env.get("FI_PROVIDER") == "efa") != (efa != "0"):
        bad.append(f"{name}: FI_PROVIDER {env.get('FI_PROVIDER')}")
    if (env.get("FI_EFA_USE_DEVICE_RDMA") == "1") != (rdma == "1" and efa != "0"):
        bad.append(f"{name}: FI_EFA_USE_DEVICE_RDMA {env.get('FI_EFA_USE_DEVICE_RDMA')}")
    if pod["spec"]["nodeSelector"].get("node.kubernetes.io/instance-type") != name:
        bad.append(f"{name}: nodeSelector")
if bad:
    print("\n".join(bad)); sys.exit(1)
print(f"ok: {len(rows)} instance types, each pod with its GPUs, EFA devices, hugepages and EFA environment")
PY
for _ in $(seq 100); do kubectl get events --field-selector reason=SpecWarning --no-headers 2>/dev/null | grep -q ml.p9.48xlarge && break; sleep 0.1; done
kubectl get events --field-selector reason=SpecWarning --no-headers 2>/dev/null | grep -q "ml.p9.48xlarge is not in the operator's table" \
  || fail "no SpecWarning event for ml.p9.48xlarge"
echo "ok: Warning SpecWarning for ml.p9.48xlarge"
kubectl delete tj -l suite=types --wait=false > /dev/null
kubectl delete tj it-unknown --wait=false > /dev/null

echo "--- 7. exit code 1 is a command's own error: Failed at once"
kubectl delete pods -l hypertrain.dev/job-name --wait=false > /dev/null 2>&1 || true
ARGS='["not-a-number"]' job exit1 1 0 "runPolicy: {backoffLimit: 3}"
wait_state exit1 Failed 30
[ "$(jp tj exit1 '{.status.conditions[?(@.type=="Failed")].reason}')" = NonRetryableExitCode ] || fail "exit1 reason"
[ "$(jp tj exit1 '{.status.restartCount}')" = 0 ] || fail "exit1 restarted"
echo "ok: $(jp tj exit1 '{.status.lastFault.message}' | head -n 1)"
echo PASS
