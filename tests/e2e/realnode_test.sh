#!/usr/bin/env bash
# A TrainingJob under real kubelets (issue 39): the envtest control plane plus
# two real nodes (localcluster/envtest/real-node.sh: containerd 1.6 + kubelet
# 1.26.5 each), the trainer from the OCI image tools/oci-images.sh builds (CPU
# build, user 1000), the operator on the host. An ml.p5.48xlarge-style job
# (8 GPUs, 32 EFA, hugepages per pod, advertised by the nodes) of the tiny model:
#  0. the operator's image runs under kubelet (--version, user 65532);
#  1. both pods Running on the two Nodes; `kubectl logs` shows rank 0's steps;
#  2. a rank inside node 1's container SIGKILLed -> the launcher writes the
#     cause to /dev/termination-log -> kubelet reports it -> the operator's
#     lastFault carries it -> gang restart;
#  3. node 0's container SIGKILLed (its PID 1) -> kubelet reports exit 137 ->
#     gang restart;
#  4. `kubectl delete pod` -> kubelet's SIGTERM -> rank 0 finishes its step and
#     saves it -> the next attempt resumes exactly there (0 lost steps) ->
#     Succeeded;
#  5. a kubelet stopped (its PID; its containers keep running) -> the node
#     lifecycle controller marks the Node NotReady (Unknown) within seconds
#     (kube-envtest's short --node-monitor-grace-period, the kubelet's 8 s
#     lease) -> the operator's PodLost -> the lost node's Terminating pod is
#     force-deleted (no kubelet will confirm its end) -> the next attempt's
#     pods are created, rank 0 Running on the healthy Node (rank 1 Pending:
#     host-network pods, one per Node here);
#  6. teardown leaves no process, shim, mount, cgroup, /run/containerd or
#     netns, and the host's kernel settings never changed.
# Skips (saying why) where the control plane or the real node cannot run.
set -euo pipefail
R="$PWD"
. "$R/localcluster/envtest/envtest.sh"
envtest_require "$R/localcluster/envtest/kube-envtest"
RN="$R/localcluster/envtest/real-node.sh"
envtest_require_real_node "$RN"
command -v kubectl > /dev/null || { echo "FAIL: kubectl not found; run tools/setup.sh" >&2; exit 1; }

T="$(mktemp -d "${TEST_TMPDIR:-/tmp}/realnode.XXXXXX")"
chmod 0755 "$T"
JOB=tiny
SYSCTLS=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys
         kernel/keys/root_maxbytes)
sysctls() { local s; for s in "${SYSCTLS[@]}"; do printf '%s=%s ' "$s" "$(cat "/proc/sys/$s")"; done; }
host_state() {  # what must be the same before and after
  sysctls
  ls -d /run/containerd /run/netns /run/netns/* /var/log/pods /var/log/containers /var/lib/kubelet \
    /sys/fs/cgroup/*/hypertrain-node-* /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/k8s.io /tmp/ht-node.* 2> /dev/null |
    tr '\n' ' ' || true
}
BEFORE="$(host_state)"
OP_PID=""
LOGS_PID=""
teardown() {
  [ -n "$LOGS_PID" ] && { kill -TERM "$LOGS_PID" 2> /dev/null || true; wait "$LOGS_PID" 2> /dev/null || true; LOGS_PID=""; }
  [ -n "$OP_PID" ] && { kill -TERM "$OP_PID" 2> /dev/null || true; wait "$OP_PID" 2> /dev/null || true; OP_PID=""; }
  "$RN" stop "$T/nodes" || true
  if [ -n "${ENVTEST_PID:-}" ]; then
    kill -TERM "$ENVTEST_PID" 2> /dev/null || true
    wait "$ENVTEST_PID" 2> /dev/null || true
    ENVTEST_PID=""
  fi
}
cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ] && [ -n "${ENVTEST_PID:-}" ]; then
    echo "=== state at failure" >&2
    kubectl get tj,pods -o wide >&2 2>&1 || true
    kubectl get tj "$JOB" -o jsonpath='{.status}' >&2 2>&1 || true
    kubectl get events --sort-by=.lastTimestamp 2> /dev/null | tail -n 20 >&2 || true
    for f in "$T"/operator.log "$T"/nodes/node-*/kubelet.log "$T"/nodes/node-*/containerd.log; do
      [ -f "$f" ] && { echo "== $f" >&2; grep -v '^I' "$f" | tail -n 15 >&2; }
    done
  fi
  teardown
  exit "$rc"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
wait_for() {  # SECONDS WHAT COMMAND...
  local secs="$1" what="$2" deadline
  shift 2
  deadline=$((SECONDS + secs))
  until "$@" > /dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "timed out after ${secs}s waiting for $what"
    sleep 0.3
  done
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# --- images, control plane, nodes ------------------------------------------------
t0=$SECONDS
mkdir -p "$T/bin"
ln -s "$R/operator/cmd/hypertrain-operator" "$T/bin/"
# The CPU build: the CUDA build's image would add ~0.9 GB of libraries this CPU job never loads.
ln -s "$R/runtime/cmd/hypertrain_cpu" "$T/bin/hypertrain"
HT_OCI_COMPRESSION=none "$R/tools/oci-images.sh" "$T/images" "$T/bin" > "$T/images.txt"
ok "images built in $((SECONDS - t0))s: $(awk '{print $1}' "$T/images.txt" | tr '\n' ' ')"
# A stopped kubelet's Node goes NotReady 10 s after its last lease renewal (default 40 s).
envtest_start "$R/localcluster/envtest/kube-envtest" "$T/cp" --node-monitor-grace-period-s 10 --node-monitor-period-s 2
t0=$SECONDS
"$RN" start "$T/nodes" --kubeconfig "$KUBECONFIG" --images "$T/images" --nodes 2 --instance-type ml.p5.48xlarge \
  --capacity nvidia.com/gpu=8,vpc.amazonaws.com/efa=32 --hugepages-2mi 3072 2> "$T/real-node.log" ||
  { cat "$T/real-node.log" >&2; fail "real nodes did not start"; }
ok "$(tail -n 1 "$T/real-node.log") in $((SECONDS - t0))s"
for i in 0 1; do
  imgs="$(ctr -a "$(cat "$T/nodes/node-$i.address")" -n k8s.io images ls -q)"
  for ref in localhost/hypertrain-operator:local localhost/hypertrain:local localhost/pause:local; do
    grep -qx "$ref" <<< "$imgs" || fail "node $i: $ref not imported (ctr images ls: $imgs)"
  done
  cap="$(kubectl get node "hypertrain-node-$i" -o jsonpath='{.status.allocatable}')"
  for want in '"nvidia.com/gpu":"8"' '"vpc.amazonaws.com/efa":"32"' '"hugepages-2Mi":"6Gi"'; do
    grep -qF "$want" <<< "$cap" || fail "node $i: allocatable $cap lacks $want"
  done
done
ok "2 Nodes Ready (kubelet $(kubectl get node hypertrain-node-0 -o jsonpath='{.status.nodeInfo.kubeletVersion}')), images imported, allocatable GPU 8, EFA 32, hugepages-2Mi 6Gi"

# The operator's image under kubelet: its entrypoint and user (65532), read-only root.
kubectl apply -f - > /dev/null <<EOY
apiVersion: v1
kind: Pod
metadata: {name: operator-image}
spec:
  hostNetwork: true
  restartPolicy: Never
  automountServiceAccountToken: false
  containers:
  - name: operator
    image: localhost/hypertrain-operator:local
    imagePullPolicy: Never
    args: [--version]
    securityContext: {readOnlyRootFilesystem: true, runAsNonRoot: true}
EOY
wait_for 60 "pod operator-image to succeed" bash -c "[ \"\$(kubectl get pod operator-image -o jsonpath='{.status.phase}')\" = Succeeded ]"
ok "the operator image under kubelet: $(kubectl logs operator-image | head -n 1)"
kubectl delete pod operator-image --wait=false > /dev/null

# --- data, operator, job -----------------------------------------------------------
W="$T/w"  # the pods' hostPath (same path inside): data, checkpoints, metrics
mkdir -p "$W/data"
"$R/runtime/cmd/hypertrain" prepare --out "$W/data" --tokens-per-shard 50000 --no-progress \
  /usr/share/common-licenses/* > "$T/prepare.log" 2>&1 || { cat "$T/prepare.log"; fail "prepare"; }
chmod -R a+rwX "$W"
kubectl apply -f "$R/crds/trainingjobs.hypertrain.dev.yaml" > /dev/null
wait_for 30 "the TrainingJob CRD" kubectl get tj
OPENBLAS_NUM_THREADS=1 "$R/operator/cmd/hypertrain-operator" --kubeconfig="$KUBECONFIG" --leader-elect=false \
  --metrics-addr=127.0.0.1:0 > "$T/operator.log" 2>&1 &
OP_PID=$!
# Long enough that the delete at step >= 70 lands mid-training even at ~30 ms a step
# (the stream check before it costs a second; with 120 the job could finish first).
MAX_STEPS=300
cat > "$T/job.yaml" <<EOY
apiVersion: hypertrain.dev/v1alpha1
kind: TrainingJob
metadata: {name: $JOB, namespace: default}
spec:
  image: localhost/hypertrain:local
  imagePullPolicy: Never
  instanceType: ml.p5.48xlarge
  nodes: 2
  nprocPerNode: 1
  masterPort: $(free_port)
  checkpointDir: $W/exp/checkpoints
  resources: {requests: {cpu: "500m"}}
  runPolicy: {backoffLimit: 5}
  # The test's kills are not the nodes' fault; an excluded node would leave the
  # two host-network pods one host port (the rendezvous) on one Node.
  faultPolicy: {maxRepeatOffenders: 0}
  scheduling: {terminationGracePeriodSeconds: 10}
  env:
    - {name: OPENBLAS_NUM_THREADS, value: "1"}
    - {name: HYPERTRAIN_METRICS_PORT, value: "0"}
  volumes: [{name: work, hostPath: {path: $W, type: Directory}}]
  volumeMounts: [{name: work, mountPath: $W}]
  podTemplate:
    spec:
      # Host network on loopback: the rendezvous name resolves through /etc/hosts.
      hostNetwork: true
      hostAliases: [{ip: 127.0.0.1, hostnames: [$JOB-node-0.$JOB.default.svc]}]
  trainerConfig:
    inline: |
      trainer: {num_nodes: 2, devices: 1, backend: cpu, max_steps: $MAX_STEPS, log_every_n_steps: 1}
      exp_manager: {exp_dir: $W/exp, every_n_train_steps: 10}
      model:
        shape: tiny
        vocab_size: 256
        num_hidden_layers: 2
        max_context_width: 32
        train_batch_size: 2
        seed: 1234
        activation_checkpointing: none
        optim: {name: adamw, lr: 3.0e-3}
        data: {train_dir: $W/data}
EOY
kubectl apply -f "$T/job.yaml" > /dev/null
METRICS="$W/exp/metrics.jsonl"
last_step() { [ -s "$METRICS" ] && tail -n 1 "$METRICS" | sed -n 's/.*"step":\([0-9]*\).*/\1/p' || echo 0; }
tj() { kubectl get tj "$JOB" -o jsonpath="$1" 2> /dev/null; }
running_on_two_nodes() {
  [ "$(kubectl get pods -l hypertrain.dev/job-name=$JOB -o jsonpath='{range .items[*]}{.status.phase}/{.spec.nodeName}{"\n"}{end}' |
       grep '^Running/' | sort -u | wc -l)" = 2 ]
}
wait_for 120 "both pods Running on two Nodes" running_on_two_nodes
kubectl get pods -l hypertrain.dev/job-name=$JOB -o wide --no-headers | sed 's/^/    /'
wait_for 120 "rank 0's steps in kubectl logs" bash -c "kubectl logs $JOB-node-0 | grep -q 'step [0-9]*/$MAX_STEPS | loss'"
ok "pods Running on both Nodes; kubectl logs $JOB-node-0: $(kubectl logs "$JOB-node-0" | grep "step [0-9]*/$MAX_STEPS" | tail -n 1 | cut -c1-110)"

# The launcher's PID (the container's PID 1, as containerd knows it) of POD.
launcher_pid() {
  local node cid
  node="$(kubectl get pod "$1" -o jsonpath='{.spec.nodeName}')"
  cid="$(kubectl get pod "$1" -o jsonpath='{.status.containerStatuses[0].containerID}')"
  ctr -a "$(cat "$T/nodes/node-${node##*-}.address")" -n k8s.io tasks ls | awk -v c="${cid#containerd://}" '$1 == c {print $2}'
}

# --- 2. a rank SIGKILLed: the launcher's termination message ------------------------
wait_for 120 "step 15" bash -c "[ \$(tail -n 1 '$METRICS' | sed -n 's/.*\"step\":\([0-9]*\).*/\1/p') -ge 15 ]"
lp="$(launcher_pid "$JOB-node-1")"
[ -n "$lp" ] || fail "no container task for $JOB-node-1"
rank="$(cat "/proc/$lp/task/$lp/children" | awk '{print $1}')"
[ -n "$rank" ] || fail "the launcher (PID $lp) of $JOB-node-1 has no rank process"
echo ">>> kill -9 $rank (a rank in $JOB-node-1's container; launcher PID $lp) at step $(last_step)"
kill -KILL "$rank"
wait_for 60 "the first gang restart" bash -c "[ \"\$(kubectl get tj $JOB -o jsonpath='{.status.restartCount}')\" -ge 1 ]"
fault1="$(tj '{.status.lastFault}')"
echo "    lastFault: $fault1"
grep -q "killed by signal 9" <<< "$fault1" ||
  fail "lastFault does not carry the launcher's termination message (killed by signal 9): $fault1"
ok "rank SIGKILLed -> the launcher's /dev/termination-log -> kubelet -> lastFault; gang restart 1"

# --- 3. the container SIGKILLed: exit 137 --------------------------------------------
wait_for 120 "attempt 2's pods Running" bash -c "[ \"\$(kubectl get pod $JOB-node-0 -o jsonpath='{.metadata.labels.hypertrain\.dev/restart-attempt}/{.status.phase}')\" = 1/Running ]"
wait_for 120 "attempt 2 past step 40" bash -c "[ \$(tail -n 1 '$METRICS' | sed -n 's/.*\"step\":\([0-9]*\).*/\1/p') -ge 40 ]"
lp="$(launcher_pid "$JOB-node-0")"
[ -n "$lp" ] || fail "no container task for $JOB-node-0"
echo ">>> kill -9 $lp ($JOB-node-0's container PID 1, the launcher) at step $(last_step)"
kill -KILL "$lp"
wait_for 60 "the second gang restart" bash -c "[ \"\$(kubectl get tj $JOB -o jsonpath='{.status.restartCount}')\" -ge 2 ]"
fault2="$(tj '{.status.lastFault}')"
echo "    lastFault: $fault2"
grep -q "exited with code 137" <<< "$fault2" || fail "lastFault does not say exit code 137: $fault2"
ok "container SIGKILLed -> kubelet reports exit 137 -> gang restart 2"

# --- 4. kubectl delete pod: SIGTERM, the grace period, the final save -----------------
wait_for 120 "attempt 3's pods Running" bash -c "[ \"\$(kubectl get pod $JOB-node-0 -o jsonpath='{.metadata.labels.hypertrain\.dev/restart-attempt}/{.status.phase}')\" = 2/Running ]"
wait_for 120 "attempt 3 past step 70" bash -c "[ \$(tail -n 1 '$METRICS' | sed -n 's/.*\"step\":\([0-9]*\).*/\1/p') -ge 70 ]"
echo ">>> kubectl delete pod $JOB-node-0 at step $(last_step) (kubelet: SIGTERM, grace period 10 s)"
kubectl logs -f "$JOB-node-0" > "$T/attempt3-node0.log" 2>&1 &
LOGS_PID=$!
# The stream must be open before the delete: a pod that stops within a second
# is gone before a slow kubectl has looked it up (CI missed the stop that way).
wait_for 30 "kubectl logs -f $JOB-node-0 to stream" test -s "$T/attempt3-node0.log"
kubectl delete pod "$JOB-node-0" --wait=false > /dev/null
wait_for 60 "the third gang restart" bash -c "[ \"\$(kubectl get tj $JOB -o jsonpath='{.status.restartCount}')\" -ge 3 ]"
wait "$LOGS_PID" 2> /dev/null || true
LOGS_PID=""
stopped="$(grep -o 'stopping after step [0-9]* on request' "$T/attempt3-node0.log" | awk '{print $4}' | tail -n 1)"
[ -n "$stopped" ] || { tail -n 20 "$T/attempt3-node0.log"; fail "no graceful stop (SIGTERM) in $JOB-node-0's log"; }
ok "kubectl delete pod: rank 0 got SIGTERM and stopped after step $stopped, saving it"

wait_for 240 "the job to succeed" bash -c "[ \"\$(kubectl get tj $JOB -o jsonpath='{.status.state}')\" = Succeeded ]"
resumed="$(kubectl logs "$JOB-node-0" | grep -o 'resumed at step [0-9]*' | head -n 1)"
[ "$resumed" = "resumed at step $stopped" ] ||
  fail "attempt 4's rank 0 did not resume at the stop step $stopped (kubectl logs: '${resumed:-no resume}')"
twice="$(awk -F'"step":' -v n="$stopped" '{split($2, a, /[,}]/); if (a[1] + 0 == n) c++} END {print c + 0}' "$METRICS")"
[ "$twice" = 1 ] || fail "step $stopped appears $twice times in $METRICS: a step was trained twice"
[ -d "$W/exp/checkpoints/step-$MAX_STEPS" ] || fail "no final checkpoint step-$MAX_STEPS"
ok "Succeeded after $(tj '{.status.restartCount}') restarts; attempt 4 $resumed (kubectl logs): 0 lost steps; checkpoint step-$MAX_STEPS"

# --- 5. a kubelet stopped: Node NotReady -> PodLost -> gang restart on the healthy Node --
# CPU only; maxRepeatOffenders 1 excludes the lost Node.
LOST=lost
sed -e "s/name: $JOB,/name: $LOST,/" -e '/instanceType:/d' -e "s#$W/exp#$W/$LOST#g" \
    -e "s/max_steps: $MAX_STEPS/max_steps: 5000/" -e "s/masterPort: .*/masterPort: $(free_port)/" \
    -e "s/$JOB-node-0.$JOB.default.svc/$LOST-node-0.$LOST.default.svc/" \
    -e "s/faultPolicy: .*/faultPolicy: {maxRepeatOffenders: 1, podPendingOrLostGraceSeconds: 1}/" \
    "$T/job.yaml" > "$T/lost.yaml"
kubectl apply -f "$T/lost.yaml" > /dev/null
LM="$W/$LOST/metrics.jsonl"
lost_pods() { kubectl get pods -l hypertrain.dev/job-name=$LOST -o jsonpath='{range .items[*]}{.metadata.name}/{.metadata.labels.hypertrain\.dev/restart-attempt}/{.status.phase}/{.spec.nodeName}{"\n"}{end}'; }
wait_for 120 "$LOST's pods Running on two Nodes" bash -c "[ \"\$(kubectl get pods -l hypertrain.dev/job-name=$LOST -o jsonpath='{range .items[*]}{.status.phase}/{.spec.nodeName}{\"\\n\"}{end}' | grep '^Running/' | sort -u | wc -l)\" = 2 ]"
wait_for 120 "$LOST past step 12 (a checkpoint at 10)" bash -c "[ \$(tail -n 1 '$LM' | sed -n 's/.*\"step\":\([0-9]*\).*/\1/p') -ge 12 ]"
gone_node="$(kubectl get pod "$LOST-node-1" -o jsonpath='{.spec.nodeName}')"
i_gone="${gone_node##*-}"
kpid="$(awk -v i="$i_gone" '$1 == "kubelet" && $2 == i {print $3}' "$T/nodes/pids")"
[ -n "$kpid" ] && [ -d "/proc/$kpid" ] || fail "no kubelet PID for $gone_node in $T/nodes/pids"
healthy="hypertrain-node-$((1 - i_gone))"
echo ">>> kill -TERM $kpid ($gone_node's kubelet; its containers keep running) at step $(tail -n 1 "$LM" | sed -n 's/.*"step":\([0-9]*\).*/\1/p')"
t_stop=$SECONDS
kill -TERM "$kpid"
wait_for 30 "$gone_node NotReady" bash -c "[ \"\$(kubectl get node $gone_node -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" != True ]"
ready="$(kubectl get node "$gone_node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}: {.status.conditions[?(@.type=="Ready")].message}')"
ok "kubelet stopped -> $gone_node Ready=$ready after $((SECONDS - t_stop))s"
wait_for 60 "the PodLost gang restart" bash -c "[ \"\$(kubectl get tj $LOST -o jsonpath='{.status.restartCount}')\" -ge 1 ]"
fault="$(kubectl get tj "$LOST" -o jsonpath='{.status.lastFault}')"
echo "    lastFault: $fault"
grep -q '"reason":"PodLost"' <<< "$fault" || fail "the gang restart's fault is not PodLost: $fault"
grep -qF "node $gone_node): node NotReady for podPendingOrLostGraceSeconds=1" <<< "$fault" ||
  fail "lastFault does not name $gone_node NotReady: $fault"
excluded="$(kubectl get tj "$LOST" -o jsonpath='{.status.excludedNodes}')"
grep -qF "\"$gone_node\"" <<< "$excluded" || fail "$gone_node not in status.excludedNodes ($excluded)"
# The lost Node's pod stays Terminating unless the operator force-deletes it: the
# next attempt's pod of the same name exists only once it is gone. Attempt 2's
# rank 0 runs on the healthy Node; its rank 1 stays Pending there: host-network
# pods of one job claim the same host ports (the trainer's containerPorts), one
# pod per Node on this loopback harness (a real cluster has a spare node).
attempt2() { [ "$(lost_pods | grep -c "^$LOST-node-[01]/1/")" = 2 ] && lost_pods | grep -q "^$LOST-node-0/1/Running/$healthy\$"; }
wait_for 60 "attempt 2's pods (the lost one force-deleted), rank 0 Running on $healthy" attempt2
lost_pods | sed 's/^/    /'
ok "PodLost -> $gone_node excluded, its Terminating pod force-deleted -> attempt 2 created $((SECONDS - t_stop))s after the kubelet stopped, rank 0 Running on $healthy"
kubectl delete tj "$LOST" --wait=false > /dev/null

# --- 6. teardown leaves nothing --------------------------------------------------------
socks=("$(cat "$T"/nodes/node-0.address)" "$(cat "$T"/nodes/node-1.address)")
teardown
for s in "${socks[@]}"; do
  for f in /proc/[0-9]*/cmdline; do
    if { tr '\0' ' ' < "$f"; } 2> /dev/null | grep -qF -- "$s"; then fail "a process of $s is left: $(tr '\0' ' ' < "$f")"; fi
  done
done
pgrep -f "$T/nodes" > /dev/null && fail "processes of $T/nodes left: $(pgrep -af "$T/nodes")"
grep -F "$T" /proc/mounts && fail "mounts under $T left"
AFTER="$(host_state)"
[ "$AFTER" = "$BEFORE" ] || fail "the host changed: before [$BEFORE] after [$AFTER]"
ok "teardown: no process, shim or mount left; cgroups, /run/containerd, netns and kernel settings as before ($(sysctls))"
echo PASS
