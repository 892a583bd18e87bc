#!/usr/bin/env bash
# The whole system on one machine (see docs/USER_GUIDE.md, "Local demo"):
# kube-local (API server) + node agent (2 local "nodes") + the operator; applies
# examples/local-tiny.yaml with kubectl (2 nodes x 2 CPU ranks, hybrid shard, the
# tiny model on real text, a checkpoint every few steps), shows the job's state
# moving, kills one trainer pod's process with SIGKILL mid-run, and shows the gang
# restart and the resume from the checkpoint; then deletes a pod with kubectl
# (SIGTERM: the ranks finish the step and save it) and shows the next attempt
# resuming at exactly that step (0 lost steps), through to Succeeded. Cleans up
# after itself (every process it started is ended by PID).
#
#   tools/local-e2e.sh            # on kube-local, the project's own API server
#   tools/local-e2e.sh --real     # the same on real Kubernetes (or HYPERTRAIN_REAL_KUBE=1):
#                                 # etcd + kube-apiserver, controller manager and scheduler 1.26.5
#                                 # (localcluster/envtest; binaries from $HYPERTRAIN_KUBE_BINARIES,
#                                 # default the cache tools/setup.sh fills from ../shared/kube) and
#                                 # two real nodes, containerd 1.6 + kubelet 1.26.5 each
#                                 # (localcluster/envtest/real-node.sh; needs root). The operator
#                                 # runs in its container (tools/oci-images.sh) as the Helm chart
#                                 # installs it (its ServiceAccount's token, the chart's RBAC; host
#                                 # network), the trainer pods under kubelet from the trainer image
#
# Environment (all optional):
#   HT_LOCAL_DIR     work directory (default /tmp/hypertrain-local; wiped first)
#   HT_BIN_DIR       directory with prebuilt kube-local, node-agent, hypertrain-operator
#                    and hypertrain, and kube-envtest for --real (skips the bazel build)
#   HT_MAX_STEPS     training steps (default 300)
#   HT_CKPT_EVERY    checkpoint interval in steps (default 10)
#   HT_KILL_AT_STEP  kill node 1's trainer once this step is logged (default 60; 0: no kill)
#   HT_DELETE_AT_STEP  `kubectl delete pod` node 0 once this step is logged, after the
#                    kill's restart (default 150; 0: no delete)
#   HT_VERIFY_REFERENCE=1  afterwards also train the same config uninterrupted with
#                    `hypertrain launch` (same 2x2 layout) and compare the final
#                    checkpoint's shard files byte for byte
#   HT_TOKENIZER     tokenizer directory for the data (default: the Llama-2 tokenizer
#                    that tools/setup.sh installs, ~/.cache/hypertrain/tokenizers/llama2);
#                    "bytes": byte tokens (vocab 256), a ~10x cheaper model for tests
#   HT_TIMEOUT_S     overall bound for the job (default 600)
#   HT_PROGRESS_INTERVAL_S  how often node 0's launcher publishes progress (default 2)
#   HT_REQUIRE_PROGRESS=1   fail when status.progress stays empty
set -euo pipefail

REAL="${HYPERTRAIN_REAL_KUBE:-0}"
for arg in "$@"; do
  case "$arg" in
    --real) REAL=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "local-e2e: unknown argument $arg (--real, --help)" >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${HT_LOCAL_DIR:-/tmp/hypertrain-local}"
MAX_STEPS="${HT_MAX_STEPS:-300}"
CKPT_EVERY="${HT_CKPT_EVERY:-10}"
KILL_AT="${HT_KILL_AT_STEP:-60}"
DELETE_AT="${HT_DELETE_AT_STEP:-150}"
TIMEOUT_S="${HT_TIMEOUT_S:-600}"
JOB=local-tiny
PIDS=()

say() { printf '\033[1m[local-e2e]\033[0m %s\n' "$*"; }
die() { say "FAILED: $*"; exit 1; }

cleanup() {
  local rc=$?
  if [ -n "${NODES:-}" ]; then  # real nodes: the operator's log, then kubelets, containers, containerd
    kubectl -n hypertrain-system logs deploy/ht-hypertrain-operator > "$WORK/logs/operator.log" 2>&1 || true
    "$ROOT/localcluster/envtest/real-node.sh" stop "$NODES" 2>> "$WORK/logs/real-node.log" || true
  fi
  # Reverse order: the operator, then the node agent (it kills its pods' process
  # groups on SIGTERM), then the API server. Each by its PID.
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill -TERM "${PIDS[i]}" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  say "all processes stopped; logs, metrics and checkpoints stay under $WORK (rm -rf $WORK removes them)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- build -------------------------------------------------------------------
if [ -n "${HT_BIN_DIR:-}" ]; then
  BIN="$HT_BIN_DIR"
else
  "$ROOT/tools/setup.sh"  # installs what a fresh machine is missing; quiet otherwise
  say "building (bazel)"
  BAZEL=(bazel)
  [ -n "${HT_BAZEL_OUTPUT_BASE:-}" ] && BAZEL+=(--output_base="$HT_BAZEL_OUTPUT_BASE")
  (cd "$ROOT" && "${BAZEL[@]}" build --experimental_convenience_symlinks=ignore \
     //localcluster/apiserver:kube-local //localcluster/nodeagent:node-agent \
     //operator/cmd:hypertrain-operator //runtime/cmd:hypertrain //localcluster/envtest:kube-envtest)
  BB="$(cd "$ROOT" && "${BAZEL[@]}" info bazel-bin 2>/dev/null)"
  BIN="$WORK.bin"
  rm -rf "$BIN" && mkdir -p "$BIN"
  cp "$BB/localcluster/apiserver/kube-local" "$BB/localcluster/nodeagent/node-agent" \
     "$BB/operator/cmd/hypertrain-operator" "$BB/runtime/cmd/hypertrain" "$BB/localcluster/envtest/kube-envtest" "$BIN/"
fi
CONTROL_PLANE=kube-local
NODE_AGENT=node-agent
[ "$REAL" = 1 ] && CONTROL_PLANE=kube-envtest NODE_AGENT=""
for b in "$CONTROL_PLANE" $NODE_AGENT hypertrain-operator hypertrain; do
  [ -x "$BIN/$b" ] || die "$BIN/$b is missing"
done
command -v kubectl >/dev/null || die "kubectl is not installed (tools/setup.sh installs it)"
if [ "$REAL" = 1 ]; then
  why="$("$BIN/kube-envtest" --check 2>&1)" || die "--real needs the Kubernetes control plane: $why"
  why="$("$ROOT/localcluster/envtest/real-node.sh" check 2>&1)" || die "--real needs real nodes: $why"
  HELM="$(command -v helm || echo "$HOME/.cache/hypertrain/bin/helm")"
  [ -x "$HELM" ] || die "--real installs the operator with Helm: helm is not installed (tools/setup.sh installs it)"
fi

rm -rf "$WORK" && mkdir -p "$WORK"/{logs,data}
# Real nodes: the trainer runs as user 1000 and reads and writes $WORK through a hostPath.
[ "$REAL" = 1 ] && chmod 0777 "$WORK"
export KUBECONFIG="$WORK/kubeconfig"
export OPENBLAS_NUM_THREADS=1

# --- data --------------------------------------------------------------------
inputs=(/usr/share/common-licenses/*)
[ -e "${inputs[0]}" ] || die "no text in /usr/share/common-licenses (base-files)"
TOKENIZER="${HT_TOKENIZER:-$HOME/.cache/hypertrain/tokenizers/llama2}"
prepare=("$BIN/hypertrain" prepare --out "$WORK/data" --tokens-per-shard 100000 --no-progress)
TOKENIZER_SED="s#^##"
if [ "$TOKENIZER" = bytes ]; then
  say "preparing the data set from ${#inputs[@]} license texts as bytes (vocab 256)"
  TOKENIZER_SED="/tokenizer: /d"
else
  [ -f "$TOKENIZER/tokenizer.json" ] || die "no tokenizer.json in $TOKENIZER (tools/setup.sh installs the Llama-2 tokenizer)"
  mkdir -p "$WORK/tokenizer"
  cp "$TOKENIZER"/tokenizer*.json "$WORK/tokenizer/"
  say "preparing the data set from ${#inputs[@]} license texts with the tokenizer in $TOKENIZER"
  prepare+=(--tokenizer "$WORK/tokenizer")
fi
"${prepare[@]}" "${inputs[@]}" > "$WORK/logs/prepare.log" 2>&1 || { cat "$WORK/logs/prepare.log"; die "prepare"; }
tail -n 1 "$WORK/logs/prepare.log"
VOCAB="$(sed -n 's/^ *"vocab_size": \([0-9]*\).*/\1/p' "$WORK/data/manifest.json")"

# --- --real: real nodes and the operator in its container ---------------------------
NODES=""
# Images (tools/oci-images.sh), two real nodes, then the chart's operator on them.
start_real_nodes_and_operator() {
  local t0=$SECONDS ns=hypertrain-system server port
  say "building the OCI images (operator, trainer, pause; tools/oci-images.sh)"
  HT_OCI_COMPRESSION=none "$ROOT/tools/oci-images.sh" "$WORK/images" "$BIN" > "$WORK/logs/oci-images.log" 2>&1 ||
    { cat "$WORK/logs/oci-images.log"; die "tools/oci-images.sh"; }
  kubectl create namespace "$ns" > /dev/null
  say "starting 2 real nodes (containerd + kubelet each; localcluster/envtest/real-node.sh)"
  NODES="$WORK/nodes"
  RN_NAMESPACES="$ns" "$ROOT/localcluster/envtest/real-node.sh" start "$NODES" --kubeconfig "$KUBECONFIG" \
    --images "$WORK/images" --nodes 2 2> "$WORK/logs/real-node.log" ||
    { tail -n 30 "$WORK/logs/real-node.log"; die "the real nodes did not start"; }
  say "$(tail -n 1 "$WORK/logs/real-node.log" | sed 's/^real-node: //') in $((SECONDS - t0))s"
  server="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
  port="${server##*:}"
  # The chart as on a cluster (its ServiceAccount, ClusterRole, CRD), one replica, the
  # image from the node's containerd. Host network: the nodes' only pod network is
  # loopback; the API server is at 127.0.0.1 (no kube-proxy for the kubernetes Service).
  printf '#!/bin/sh\nexec sed "/^      serviceAccountName: /a\\      hostNetwork: true"\n' > "$WORK/host-network.sh"
  chmod +x "$WORK/host-network.sh"
  say "helm install ht charts/hypertrain-operator -n $ns (the operator in its container under kubelet)"
  HELM_CACHE_HOME="$WORK/helm/cache" HELM_CONFIG_HOME="$WORK/helm/config" HELM_DATA_HOME="$WORK/helm/data" \
  "$HELM" install ht "$ROOT/charts/hypertrain-operator" -n "$ns" --post-renderer "$WORK/host-network.sh" \
    --set image.repository=localhost/hypertrain-operator --set image.tag=local --set image.pullPolicy=Never \
    --set replicaCount=1 --set metrics.port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')" \
    --set 'extraEnv[0].name=KUBERNETES_SERVICE_HOST' --set 'extraEnv[0].value=127.0.0.1' \
    --set 'extraEnv[1].name=KUBERNETES_SERVICE_PORT' --set-string "extraEnv[1].value=$port" \
    --wait --timeout 180s > "$WORK/logs/helm.log" 2>&1 ||
    { cat "$WORK/logs/helm.log"; kubectl -n "$ns" get pods -o wide; die "helm install of the operator"; }
  kubectl -n "$ns" get pods -o wide --no-headers | sed 's/^/    /'
  kubectl -n "$ns" get pods -o jsonpath='{range .items[*]}    image {.spec.containers[0].image}, user {.spec.securityContext.runAsUser}, ServiceAccount {.spec.serviceAccountName}, hostNetwork {.spec.hostNetwork}{"\n"}{end}'
  for _ in $(seq 100); do kubectl get tj > /dev/null 2>&1 && break; sleep 0.1; done
}

# The demo's job for real nodes: the trainer image, $WORK through a hostPath at the
# same path, host network with rank 0's name in /etc/hosts, the API server on
# 127.0.0.1 for the launcher's progress reports.
real_node_job() {  # FILE
  local server port
  server="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
  port="${server##*:}"
  sed -i -e "s#^  image: hypertrain:local#  image: localhost/hypertrain:local\n  imagePullPolicy: Never#" \
    -e "s#^  env:#  env:\n    - {name: HYPERTRAIN_PROGRESS_INTERVAL_S, value: \"${HT_PROGRESS_INTERVAL_S:-2}\"}\n    - {name: HYPERTRAIN_METRICS_PORT, value: \"0\"}\n    - {name: KUBERNETES_SERVICE_HOST, value: 127.0.0.1}\n    - {name: KUBERNETES_SERVICE_PORT, value: \"$port\"}#" \
    "$1"
  cat >> "$1" <<EOY
  volumes: [{name: work, hostPath: {path: $WORK, type: Directory}}]
  volumeMounts: [{name: work, mountPath: $WORK}]
  podTemplate:
    spec:
      hostNetwork: true
      hostAliases: [{ip: 127.0.0.1, hostnames: [$JOB-node-0.$JOB.default.svc]}]
EOY
  chmod -R a+rwX "$WORK/data" "$WORK/tokenizer" 2> /dev/null || chmod -R a+rwX "$WORK/data"
}

# The PID (on this host) of a pod's container's PID 1, as its node's containerd knows it.
container_pid() {  # POD CONTAINER_ID
  local node
  node="$(kubectl get pod "$1" -o jsonpath='{.spec.nodeName}')"
  ctr -a "$(cat "$NODES/node-${node##*-}.address")" -n k8s.io tasks ls | awk -v c="${2#containerd://}" '$1 == c {print $2}'
}

# kubelet's pod logs (CRI format) to where the node agent writes them, before
# kubelet's garbage collection removes a deleted pod's: the checks below read them.
copy_pod_logs() {
  local d n
  for d in "$NODES"/node-*/host/var/log/pods/default_*; do
    [ -d "$d" ] || continue
    n="$(basename "$d")"
    mkdir -p "$WORK/pods/$n"
    cat "$d"/*/*.log > "$WORK/pods/$n/container.log.tmp" 2> /dev/null && mv "$WORK/pods/$n/container.log.tmp" "$WORK/pods/$n/container.log"
  done
  return 0
}

# --- control plane, node agent, operator ---------------------------------------
AGENT_FLAGS=(--pod-kubeconfig "$KUBECONFIG")
if [ "$REAL" = 1 ]; then
  say "starting the real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)"
  "$BIN/kube-envtest" --work-dir "$WORK/control-plane" --kubeconfig-out "$KUBECONFIG" \
    > "$WORK/logs/kube-envtest.out" 2> "$WORK/logs/kube-envtest.log" &
  PIDS+=($!)
  for _ in $(seq 1200); do [ -s "$WORK/control-plane/ready" ] && break; kill -0 "${PIDS[-1]}" 2>/dev/null || break; sleep 0.1; done
  [ -s "$WORK/control-plane/ready" ] || { cat "$WORK/logs/kube-envtest.log"; die "the control plane did not start"; }
  kubectl version 2>/dev/null | grep -i server || true
else
  say "starting kube-local"
  "$BIN/kube-local" --data-dir "$WORK/kube-local" --kubeconfig-out "$KUBECONFIG" --port-file "$WORK/port" \
    > "$WORK/logs/kube-local.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do [ -s "$KUBECONFIG" ] && [ -s "$WORK/port" ] && break; sleep 0.1; done
  [ -s "$KUBECONFIG" ] || { cat "$WORK/logs/kube-local.log"; die "kube-local did not start"; }
  for _ in $(seq 50); do kubectl get --raw /healthz >/dev/null 2>&1 && break; sleep 0.1; done
fi
if [ "$REAL" = 1 ]; then
  start_real_nodes_and_operator
else
  kubectl apply -f "$ROOT/crds/trainingjobs.hypertrain.dev.yaml"
  for _ in $(seq 100); do kubectl get tj >/dev/null 2>&1 && break; sleep 0.1; done
  say "starting the node agent (2 nodes)"
  "$BIN/node-agent" --kubeconfig "$KUBECONFIG" --nodes 2 --work-dir "$WORK/pods" \
    --image-map "hypertrain:local=$BIN/hypertrain" "${AGENT_FLAGS[@]}" --max-grace-s 5 \
    --env HYPERTRAIN_PROGRESS_INTERVAL_S="${HT_PROGRESS_INTERVAL_S:-2}" \
    > "$WORK/logs/node-agent.log" 2>&1 &
  PIDS+=($!)
  say "starting the operator"
  "$BIN/hypertrain-operator" --kubeconfig="$KUBECONFIG" --leader-elect=false --metrics-addr=127.0.0.1:0 \
    > "$WORK/logs/operator.log" 2>&1 &
  PIDS+=($!)
fi
for _ in $(seq 300); do [ "$(kubectl get nodes --no-headers 2>/dev/null | grep -c ' Ready')" = 2 ] && break; sleep 0.1; done
# On the real control plane the node lifecycle controller lifts the not-ready taint of a Ready node.
for _ in $(seq 300); do [ -z "$(kubectl get nodes -o jsonpath='{.items[*].spec.taints}' 2>/dev/null)" ] && break; sleep 0.1; done
kubectl get nodes -L node.kubernetes.io/instance-type -L sagemaker.amazonaws.com/node-health-status

# --- the job -------------------------------------------------------------------
sed -e "s#/tmp/hypertrain-local/#$WORK/#g" \
    -e "s#max_steps: 40#max_steps: $MAX_STEPS#" \
    -e "s#every_n_train_steps: 4#every_n_train_steps: $CKPT_EVERY#" \
    -e "s#vocab_size: 32000#vocab_size: $VOCAB#" -e "$TOKENIZER_SED" \
    "$ROOT/examples/local-tiny.yaml" > "$WORK/local-tiny.yaml"
[ "$REAL" = 1 ] && real_node_job "$WORK/local-tiny.yaml"
say "kubectl apply -f examples/local-tiny.yaml (max_steps $MAX_STEPS, checkpoint every $CKPT_EVERY steps)"
kubectl apply -f "$WORK/local-tiny.yaml"

METRICS="$WORK/exp/metrics.jsonl"
last_step() { [ -s "$METRICS" ] && tail -n 1 "$METRICS" | sed -n 's/.*"step":\([0-9]*\).*/\1/p' || echo 0; }
state() { kubectl get tj "$JOB" -o jsonpath='{.status.state}/{.status.restartCount}' 2>/dev/null || true; }

killed=0
deleted=0
prev=""
deadline=$((SECONDS + TIMEOUT_S))
while :; do
  s="$(state)"
  if [ "$s" != "$prev" ]; then
    say "TrainingJob $JOB: state=${s%/*} restarts=${s#*/} (step $(last_step))"
    kubectl get pods -l hypertrain.dev/job-name="$JOB" -o wide --no-headers 2>/dev/null | sed 's/^/    /' || true
    prev="$s"
  fi
  case "${s%/*}" in Succeeded) break ;; Failed) kubectl get tj "$JOB" -o yaml; die "the job failed" ;; esac
  if [ "$killed" = 0 ] && [ "$KILL_AT" -gt 0 ] && [ "${s%/*}" = Running ] && [ "$(last_step)" -ge "$KILL_AT" ]; then
    cid="$(kubectl get pod "$JOB-node-1" -o jsonpath='{.status.containerStatuses[0].containerID}')"
    if [ "$REAL" = 1 ]; then pid="$(container_pid "$JOB-node-1" "$cid")"; else pid="${cid#local://}"; fi
    [ -n "$pid" ] && [ "$pid" != "$cid" ] || die "no process for pod $JOB-node-1 (containerID '$cid')"
    say ">>> kill -9 $pid (pod $JOB-node-1's trainer launcher$([ "$REAL" = 1 ] && echo ", its container's PID 1")) at step $(last_step)"
    kill -9 "$pid"
    killed=1
  fi
  # The exit code kubelet reported for the killed container, as the operator recorded it.
  if [ "$REAL" = 1 ] && [ "$killed" = 1 ] && [ -z "${kill_code:-}" ]; then
    kill_code="$(kubectl get tj "$JOB" -o jsonpath='{.status.lastFault.pod}={.status.lastFault.exitCode}' 2>/dev/null | sed -n "s/^$JOB-node-1=//p")"
  fi
  # Graceful: Kubernetes' SIGTERM to the pod's launcher (the node agent sends it
  # on deletion), after the SIGKILL's restart if there was one. Triggered by the
  # trainer's own metrics, not by state=Running: on a busy machine the operator's
  # Restarting -> Running update can trail the second attempt by seconds, and a
  # short run would end before a poll saw Running (CI missed it that way). A step
  # past DELETE_AT (> the kill's step) can only come from the running next attempt.
  if [ "$deleted" = 0 ] && [ "$DELETE_AT" -gt 0 ] && { [ "$killed" = 1 ] || [ "$KILL_AT" = 0 ]; } &&
     [ "$(last_step)" -ge "$DELETE_AT" ] && [ "$(last_step)" -lt "$MAX_STEPS" ] && [ "${s#*/}" -ge "$killed" ]; then
    deleted_at="$(last_step)"
    say ">>> kubectl delete pod $JOB-node-0 at step $deleted_at (SIGTERM: finish the step, save it, exit 143)"
    kubectl delete pod "$JOB-node-0" --wait=false
    deleted=1
  fi
  [ "$SECONDS" -lt "$deadline" ] || { kubectl get tj "$JOB" -o yaml; die "timed out after ${TIMEOUT_S}s"; }
  [ "$REAL" = 1 ] && copy_pod_logs
  sleep 0.5
done
[ "$REAL" = 1 ] && copy_pod_logs
[ "$DELETE_AT" = 0 ] || [ "$DELETE_AT" -ge "$MAX_STEPS" ] || [ "$deleted" = 1 ] ||
  die "the job succeeded before any poll saw a step in [$DELETE_AT, $MAX_STEPS) to delete pod $JOB-node-0 at (a fast machine: raise HT_MAX_STEPS)"

kubectl get tj "$JOB"
progress="$(kubectl get tj "$JOB" -o jsonpath='{.status.progress}')"
say "status.progress (from node 0's launcher, hypertrain.dev/progress on ConfigMap $JOB-progress): ${progress:-none}"
[ -n "$progress" ] || [ "${HT_REQUIRE_PROGRESS:-0}" != 1 ] || die "no status.progress"
kubectl get tj "$JOB" -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}' | sed 's/^/    /'
kubectl get events --field-selector involvedObject.name="$JOB" --no-headers 2>/dev/null | sed 's/^/    /' | tail -n 12 || true

if [ "$killed" = 1 ]; then
  restarts="$(kubectl get tj "$JOB" -o jsonpath='{.status.restartCount}')"
  [ "${restarts:-0}" -ge 1 ] || die "the job succeeded without a gang restart"
  if [ "$REAL" = 1 ]; then
    say "kubelet reported the killed container's exit code ${kill_code:-(not seen)} (status.lastFault.exitCode after the kill)"
    [ "${kill_code:-}" = 137 ] || die "the SIGKILLed pod $JOB-node-1 was not reported with exit code 137 (got '${kill_code:-}')"
  fi
  # The second attempt's rank 0 logs where it resumed; metrics.jsonl holds both
  # attempts' lines (steps after the checkpoint appear twice when attempt 1 got past it).
  from="$({ grep -h -o "resumed at step [0-9]*" "$WORK"/pods/*/container.log || true; } | awk '{print $4}' | sort -n | head -n 1)"
  [ -n "$from" ] || die "no resume from a checkpoint in the pod logs ($WORK/pods)"
  reached="$(awk -F'"step":' '{split($2, a, /[,}]/); s = a[1] + 0; if (s <= prev) { print prev; exit } prev = s} END {}' "$METRICS")"
  say "attempt 1 was killed at step ${reached:-$from}; attempt 2 resumed from the checkpoint of step $from"
  grep -h -i "resum" "$WORK"/pods/*/container.log | sort -u | head -n 4 | sed 's/^/    /' || true
  # Recovery time (issue 34): the operator's measure, from the failed pod's
  # finishedAt to the next attempt's first step, with its phases (one Recovered
  # event per gang restart; the status holds the last one).
  rec_s="$(kubectl get tj "$JOB" -o jsonpath='{.status.lastRecoverySeconds}')"
  say "recovery of the last gang restart: ${rec_s:-not reported} s from the fault to the first step after the resume (status.lastRecoverySeconds)"
  kubectl get events --field-selector reason=Recovered -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' 2>/dev/null |
    sed 's/^/    /' || true
  grep -h -o "rank [0-9]* read .* GB/s)" "$WORK"/pods/*/container.log 2>/dev/null | sort -u | head -n 4 | sed 's/^/    checkpoint load: /' || true
  say "loss around the restart (step: loss):"
  awk -F'"step":' -v f="$from" '{split($2, a, /[,}]/); s = a[1] + 0; match($0, /"loss":[^,]*/);
      l = substr($0, RSTART + 7, RLENGTH - 7); if (s >= f - 2 && s <= f + 3) print "    " s ": " l}' "$METRICS"
fi

if [ "$deleted" = 1 ]; then
  # The deleted pod's ranks (and their peers) stopped after one step and saved
  # it; the next attempt resumed exactly there: no step is trained twice.
  stopped="$({ grep -h -o "stopping after step [0-9]* on request" "$WORK"/pods/*/container.log || true; } | awk '{print $4}' | sort -un | tail -n 1)"
  resumed="$({ grep -h -o "resumed at step [0-9]*" "$WORK"/pods/*/container.log || true; } | awk '{print $4}' | sort -n | tail -n 1)"
  [ -n "$resumed" ] && [ "$resumed" -ge "$deleted_at" ] ||
    die "kubectl delete pod at step $deleted_at: no later attempt resumed at or after that step (last resume: step ${resumed:-none})"
  if [ -z "$stopped" ]; then
    # The gang restart deletes both pods of the stopped attempt, and kubelet may
    # remove their logs before a poll copies them: the stop step is then where
    # the next attempt resumed, and the metrics below prove nothing was redone.
    say "(kubelet removed the stopped attempt's pod logs before a copy: its stop step is where the next attempt resumed)"
    stopped="$resumed"
  fi
  [ "$resumed" = "$stopped" ] || die "stopped after step $stopped on SIGTERM, but the next attempt resumed at step $resumed"
  # Steps logged twice: only the kill's (attempt 1 trained past its last checkpoint).
  redone="$(awk -F'"step":' -v r="${reached:-0}" '{split($2, a, /[,}]/); s = a[1] + 0; if (++c[s] == 2 && s > r) printf "%s ", s}' "$METRICS")"
  [ -z "$redone" ] || die "steps trained twice after kubectl delete pod (lost at the stop): $redone"
  say "kubectl delete pod: every rank stopped after step $stopped and saved it (exit 143); the next attempt resumed at step $stopped: 0 lost steps"
  grep -h "stopped on request\|received SIGTERM" "$WORK"/pods/*/container.log | sort -u | head -n 3 | sed 's/^/    /' || true
fi

if [ "${HT_VERIFY_REFERENCE:-0}" = 1 ]; then
  say "reference: the same config trained uninterrupted with hypertrain launch (2 nodes x 2 ranks)"
  kubectl get configmap "$JOB-config" -o jsonpath='{.data.config\.yaml}' > "$WORK/config.yaml"
  port=$((30000 + RANDOM % 20000))
  lpids=()
  for node in 0 1; do
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port NNODES=2 NODE_RANK=$node \
      "$BIN/hypertrain" launch --nproc-per-node 2 --grace-period-s 2 -- train --config "$WORK/config.yaml" \
      --set exp_manager.exp_dir="$WORK/reference" > "$WORK/logs/reference-node$node.log" 2>&1 &
    lpids+=($!)
  done
  for p in "${lpids[@]}"; do wait "$p" || die "reference run failed (see $WORK/logs/reference-node*.log)"; done
  a="$WORK/exp/checkpoints/step-$MAX_STEPS"
  b="$WORK/reference/checkpoints/step-$MAX_STEPS"
  n=0
  for f in "$b"/*.bin; do
    [ -e "$f" ] || die "no shard files in $b"
    cmp "$f" "$a/$(basename "$f")" || die "final parameters differ: $(basename "$f")"
    n=$((n + 1))
  done
  say "final checkpoint step-$MAX_STEPS: $n shard files identical to the uninterrupted run"
fi

say "Succeeded. Where things are:"
say "  pod logs      $WORK/pods/<namespace>_<pod>_<uid>/container.log$([ "$REAL" = 1 ] && echo " (copied from kubelet's /var/log/pods)")"
say "  metrics       $METRICS"
say "  checkpoints   $WORK/exp/checkpoints"
if [ "$REAL" = 1 ]; then
  say "  components    $WORK/logs/{$CONTROL_PLANE,real-node,operator}.log, $WORK/control-plane/*.log, $NODES/node-*/{kubelet,containerd}.log"
else
  say "  components    $WORK/logs/{$CONTROL_PLANE,node-agent,operator}.log"
fi
