#!/usr/bin/env bash
# End to end on the real Kubernetes control plane (issue 19): etcd, the upstream
# kube-apiserver, kube-controller-manager and kube-scheduler 1.26.5
# (//localcluster/envtest), Helm 3, and the project's node agent playing the
# kubelet (pods bound by kube-scheduler, each process with a token of its pod's
# ServiceAccount, so RBAC applies to everything a pod does). One control plane
# for every case:
#
#  A. `helm install` without watchNamespaces: the Deployment's pod runs the
#     operator as its ServiceAccount;
#     1. examples/local-tiny.yaml in namespace ml-team trains; progress reaches
#        status through the job's own ServiceAccount; that account may patch its
#        progress ConfigMap and nothing else (the issue's image patch is denied);
#     2. a rank killed by SIGKILL -> gang restart, its cause in lastFault; a pod
#        deleted (SIGTERM) -> gang restart; resume from a checkpoint; Succeeded;
#        ttlSecondsAfterFinished deletes the job and the collector its objects;
#     3. examples/llama3-1b-p5.yaml in ml-team gets its 2 pods (GPU, EFA) and its
#        immutable fields stay immutable; a job in kube-system is ignored (it
#        says so: Pending/NamespaceExcluded and a Warning); a
#        Kueue job that fails ends its pod group (the operator's pods patch);
#     4. the operator's pod deleted: SIGTERM, exit 0, the new pod leads;
#     5. the audit log: what the operator called is exactly what the chart
#        grants (less what it holds only to grant), and nothing was refused;
#  B. `helm install` with watchNamespaces={team-a,team-new} (team-new missing):
#     the install creates it; a job in team-a succeeds; one in ml-team is left
#     alone; the operator cannot create pods in kube-system.
# Skips, naming HYPERTRAIN_KUBE_BINARIES, where the control plane is missing.
set -euo pipefail
R="$PWD"
B="${HT_BIN_ROOT:-$R}"  # built binaries (bazel-bin when run by hand from the repo root)
. "$R/localcluster/envtest/envtest.sh"
envtest_require "$B/localcluster/envtest/kube-envtest"

HELM="$(command -v helm || true)"
[ -n "$HELM" ] || HELM="${HOME:-/root}/.cache/hypertrain/bin/helm"
[ -x "$HELM" ] || { echo "FAIL: helm not found; run tools/setup.sh" >&2; exit 1; }
command -v kubectl > /dev/null || { echo "FAIL: kubectl not found" >&2; exit 1; }

T="$(mktemp -d "${TEST_TMPDIR:-/tmp}/realkube.XXXXXX")"
export HELM_CACHE_HOME="$T/helm/cache" HELM_CONFIG_HOME="$T/helm/config" HELM_DATA_HOME="$T/helm/data"
export OPENBLAS_NUM_THREADS=1
PIDS=()
cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "=== state at failure" >&2
    kubectl get tj,pods -A -o wide >&2 2>&1 || true
    kubectl get events -A --sort-by=.lastTimestamp 2>/dev/null | tail -n 25 >&2 || true
    for f in "$T"/node-agent.log "$T"/pods/hypertrain-system_*/container.log "$T"/pods/*/container.log; do
      [ -f "$f" ] && { echo "== $f" >&2; tail -n 25 "$f" >&2; }
    done
    [ -n "${ENVTEST_PID:-}" ] && tail -n 5 "$T/cp/kube-envtest.log" >&2
  fi
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill -TERM "${PIDS[i]}" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  exit "$rc"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
wait_for() {  # SECONDS WHAT COMMAND...: polls COMMAND until it succeeds
  local secs="$1" what="$2" deadline
  shift 2
  deadline=$((SECONDS + secs))
  until "$@" > /dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "timed out after ${secs}s waiting for $what"
    sleep 0.3
  done
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# --- control plane, data, node agent -------------------------------------------
t0=$SECONDS
envtest_start "$B/localcluster/envtest/kube-envtest" "$T/cp" --audit-log
PIDS+=("$ENVTEST_PID")
ok "control plane $(kubectl version -o json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])') ready in $((SECONDS - t0))s"
"$B/runtime/cmd/hypertrain" prepare --out "$T/data" --tokens-per-shard 100000 /usr/share/common-licenses/* \
  > "$T/prepare.log" 2>&1 || { cat "$T/prepare.log"; fail "prepare"; }
"$B/localcluster/nodeagent/node-agent" --kubeconfig "$KUBECONFIG" --nodes 2 --work-dir "$T/pods" \
  --bind-pods false --pod-credentials serviceaccount --max-grace-s 5 \
  --image-map "hypertrain:local=$B/runtime/cmd/hypertrain" \
  --image-map "hypertrain/operator:e2e=$B/operator/cmd/hypertrain-operator" \
  --env HYPERTRAIN_PROGRESS_INTERVAL_S=1 > "$T/node-agent.log" 2>&1 &
PIDS+=($!)
ready_nodes() { [ "$(kubectl get nodes --no-headers 2>/dev/null | grep -c ' Ready ')" = 2 ]; }
wait_for 60 "2 Ready nodes" ready_nodes
untainted() { [ -z "$(kubectl get nodes -o jsonpath='{.items[*].spec.taints}')" ]; }
wait_for 60 "the node lifecycle controller to lift the not-ready taints" untainted

rm -rf "$T/chart" && cp -rL "$R/charts/hypertrain-operator" "$T/chart"
# The chart's faultSettleMs (5 s): after a rank's SIGKILL the peers' pods exit
# 200 within milliseconds of the killed rank's pod (137), but the node agent
# may report them more than a second apart on a loaded machine; the settle
# window is what lets the operator blame the root cause (A2 checks it).
install_operator() {  # RELEASE [helm flags...]
  local rel="$1"
  shift
  "$HELM" install "$rel" "$T/chart" -n hypertrain-system --create-namespace --set image.tag=e2e \
    --set replicaCount=1 --set "metrics.port=$(free_port)" --wait --timeout 120s "$@" \
    > "$T/helm-$rel.log" 2>&1 || { cat "$T/helm-$rel.log"; fail "helm install $rel $*"; }
  leader() { [ -n "$(kubectl -n hypertrain-system get lease hypertrain-operator-leader -o jsonpath='{.spec.holderIdentity}')" ]; }
  wait_for 60 "the operator ($rel) to take the Lease" leader
}
operator_pod() { kubectl -n hypertrain-system get pods -l app.kubernetes.io/instance="$1" --field-selector=status.phase=Running -o jsonpath='{.items[0].metadata.name}'; }

# job NAME NAMESPACE PORT MAX_STEPS [EXTRA_SED]: examples/local-tiny.yaml renamed, paths under $T, byte tokens
job() {
  sed -e "s#/tmp/hypertrain-local/#$T/$1/#g" -e "s#name: local-tiny#name: $1#" -e "s#namespace: default#namespace: $2#" \
      -e "s#masterPort: 29531#masterPort: $3#" -e "s#max_steps: 40#max_steps: $4#" -e "${5:-s#^##}" \
      "$R/examples/local-tiny.yaml" > "$T/$1.yaml"
  sed -i "s#train_dir: $T/$1/data#train_dir: $T/data#" "$T/$1.yaml"
  # The demo's data uses the Llama-2 tokenizer; these jobs train on bytes (a ~10x cheaper model).
  sed -i -e "s#vocab_size: 32000#vocab_size: 256#" -e "/tokenizer: /d" "$T/$1.yaml"
  kubectl apply -f "$T/$1.yaml" > /dev/null
}
jp() { kubectl -n "$1" get tj "$2" -o jsonpath="$3" 2>/dev/null; }
state_is() { [ "$(jp "$1" "$2" '{.status.state}')" = "$3" ]; }
restarts_are() { [ "$(jp "$1" "$2" '{.status.restartCount}')" = "$3" ]; }
step_at_least() { [ "$(jp "$1" "$2" '{.status.progress.step}')" -ge "$3" ] 2>/dev/null; }
gone() { ! kubectl -n "$1" get "$2" "$3" > /dev/null 2>&1; }

# --- A. all-namespaces install ----------------------------------------------------
install_operator ht
OP1="$(operator_pod ht)"
ok "helm install (all namespaces): operator pod $OP1 leads as ServiceAccount hypertrain-system/ht-hypertrain-operator"
kubectl -n hypertrain-system get serviceaccount hypertrain-trainer > /dev/null 2>&1 \
  && fail "the chart still creates the shared hypertrain-trainer account"

echo "--- A1. a job in another namespace; the trainer's identity"
kubectl create namespace ml-team > /dev/null
# 150 steps: the rank kill and the pod delete must land before the job ends
# (about 10 steps/s here; the identity checks between take seconds).
job tiny ml-team 29611 150 "s#backoffLimit: 3#backoffLimit: 3\n    ttlSecondsAfterFinished: 3#"
wait_for 90 "tiny Running" state_is ml-team tiny Running
wait_for 90 "status.progress.step >= 3 (the launcher's report through its own token)" step_at_least ml-team tiny 3
sa="$(kubectl -n ml-team get pod tiny-node-0 -o jsonpath='{.spec.serviceAccountName}')"
[ "$sa" = tiny-trainer ] || fail "pods run as '$sa', want tiny-trainer"
as="system:serviceaccount:ml-team:tiny-trainer"
can() { kubectl auth can-i "$@" --as="$as" 2>/dev/null || true; }
[ "$(can patch configmap/tiny-progress -n ml-team)" = yes ] || fail "the trainer cannot patch its progress ConfigMap"
for q in "patch pods -n ml-team" "get pods -n ml-team" "patch pods -n hypertrain-system" \
         "patch configmap/other-progress -n ml-team" "update configmap/tiny-progress -n ml-team" \
         "patch configmap/tiny-config -n ml-team" "create pods -n ml-team"; do
  # shellcheck disable=SC2086
  [ "$(can $q)" = no ] || fail "the trainer may $q"
done
# The issue's attack, with the token the pod really holds.
pod_kc="$(ls "$T"/pods/ml-team_tiny-node-0_*/kubeconfig | head -n 1)"
if KUBECONFIG="$pod_kc" kubectl -n hypertrain-system patch pod "$OP1" --type=json \
     -p '[{"op":"replace","path":"/spec/containers/0/image","value":"evil/image:1"}]' > "$T/attack.out" 2>&1; then
  fail "the trainer's token patched the operator's pod image"
fi
grep -q Forbidden "$T/attack.out" || fail "expected Forbidden: $(cat "$T/attack.out")"
if KUBECONFIG="$pod_kc" kubectl -n ml-team patch pod tiny-node-1 --type=json \
     -p '[{"op":"replace","path":"/spec/containers/0/image","value":"evil/image:1"}]' > /dev/null 2>&1; then
  fail "the trainer's token patched a trainer pod's image"
fi
ok "pods run as tiny-trainer: progress ConfigMap patch only (image patches Forbidden with the pod's own token)"

echo "--- A2. gang restarts: a rank killed, a pod deleted"
cid="$(kubectl -n ml-team get pod tiny-node-1 -o jsonpath='{.status.containerStatuses[0].containerID}')"
rank="$(pgrep -P "${cid#local://}" | head -n 1)"
[ -n "$rank" ] || fail "no rank process under the launcher ${cid#local://}"
kill -9 "$rank"
wait_for 60 "restartCount 1 after a rank's SIGKILL" restarts_are ml-team tiny 1
msg="$(jp ml-team tiny '{.status.lastFault.message}')"
echo "$msg" | grep -q "was killed by signal 9" || fail "lastFault does not carry the launcher's cause: $msg"
ok "rank $rank SIGKILL -> gang restart; lastFault: $msg"
wait_for 90 "tiny Running again" state_is ml-team tiny Running
wait_for 90 "attempt 2 to report progress" step_at_least ml-team tiny 1
# Recovery time (issue 34): the trainer's first step after the resume, its
# phases in the progress annotation, measured by the operator from the killed
# pod's finishedAt; one Recovered event says it.
recovered() { [ "$(jp ml-team tiny '{.status.lastRecoveryAttempt}')" = 1 ]; }
wait_for 60 "status.lastRecoverySeconds of attempt 1" recovered
rec="$(jp ml-team tiny '{.status.lastRecoverySeconds}')"
awk -v s="$rec" 'BEGIN { exit !(s > 0 && s < 60) }' || fail "lastRecoverySeconds '$rec' is not in (0, 60) s"
ev="$(kubectl -n ml-team get events --field-selector reason=Recovered -o jsonpath='{.items[*].message}')"
echo "$ev" | grep -q "recovered in .* (resumed from step [0-9]*): .*checkpoint load .* GB/s per rank" \
  || fail "no Recovered event with the phases: '$ev'"
ok "recovered in $rec s (lastRecoverySeconds); event: $ev"
kubectl -n ml-team delete pod tiny-node-0 --wait=false > /dev/null
wait_for 60 "restartCount 2 after the pod's deletion" restarts_are ml-team tiny 2
ok "pod deleted (SIGTERM) -> gang restart; lastFault: $(jp ml-team tiny '{.status.lastFault.message}')"
succeeded_status=""
grab() { succeeded_status="$(kubectl -n ml-team get tj tiny -o json 2>/dev/null)" && echo "$succeeded_status" | grep -q '"state": "Succeeded"'; }
wait_for 240 "tiny Succeeded" grab
grep -h -o "resumed at step [0-9]*" "$T"/pods/ml-team_tiny-node-0_*/container.log | tail -n 1 | grep -q resumed \
  || fail "no resume from a checkpoint in the pod logs"
ok "Succeeded after 2 gang restarts, resumed from a checkpoint"
wait_for 60 "ttlSecondsAfterFinished to delete the job" gone ml-team tj tiny
for obj in serviceaccount/tiny-trainer configmap/tiny-progress role/tiny-progress rolebinding/tiny-progress; do
  wait_for 60 "the garbage collector to delete $obj" gone ml-team "${obj%/*}" "${obj#*/}"
done
ok "TTL deleted the job; the collector its ServiceAccount, progress ConfigMap, Role and RoleBinding"

echo "--- A3. the p5 example; immutable fields; kube-system"
kubectl apply -f "$R/examples/llama3-1b-p5.yaml" > /dev/null
two_pods() { [ "$(kubectl -n ml-team get pods -l hypertrain.dev/job-name=llama3-1b-p5 --no-headers 2>/dev/null | wc -l)" = 2 ]; }
wait_for 60 "the p5 example's 2 pods" two_pods
gpus="$(kubectl -n ml-team get pod llama3-1b-p5-node-0 -o jsonpath='{.spec.containers[0].resources.limits.nvidia\.com/gpu}/{.spec.containers[0].resources.limits.vpc\.amazonaws\.com/efa}/{.spec.serviceAccountName}')"
[ "$gpus" = "8/32/llama3-1b-p5-trainer" ] || fail "p5 pod limits/account: $gpus"
if kubectl -n ml-team patch tj llama3-1b-p5 --type=merge -p '{"spec":{"instanceType":null,"nprocPerNode":4}}' \
     > "$T/immutable.out" 2>&1; then
  fail "removing instanceType and adding nprocPerNode was accepted"
fi
grep -q "is immutable" "$T/immutable.out" || fail "no immutability message: $(cat "$T/immutable.out")"
kubectl -n ml-team delete tj llama3-1b-p5 > /dev/null
ok "p5 example: 2 pods with 8 GPUs and 32 EFA each (Pending: no fsx-claim PVC here); instanceType stays immutable"
job sys kube-system 29621 4
excluded() { [ "$(jp kube-system sys '{.status.state}/{.status.conditions[?(@.type=="Created")].reason}')" = Pending/NamespaceExcluded ]; }
wait_for 30 "the kube-system job to say Pending/NamespaceExcluded" excluded
[ "$(kubectl -n kube-system get events --field-selector reason=NamespaceExcluded,involvedObject.name=sys --no-headers 2>/dev/null | wc -l)" -ge 1 ] \
  || fail "no NamespaceExcluded Event for the kube-system job"
[ "$(kubectl -n kube-system get pods -l hypertrain.dev/job-name=sys --no-headers 2>/dev/null | wc -l)" = 0 ] \
  || fail "the operator created pods in kube-system"
! kubectl -n kube-system get serviceaccount sys-trainer > /dev/null 2>&1 || fail "the operator created a ServiceAccount in kube-system"
kubectl -n kube-system delete tj sys > /dev/null
ok "a TrainingJob in kube-system is ignored: Pending/NamespaceExcluded and a Warning, nothing created"
# Under Kueue a failed job ends its pod group on one terminated pod (pods patch,
# the one call that needs it). No Kueue here: kube-apiserver 1.26 drops the
# admission gate (PodSchedulingReadiness is off), else this test lifts it.
job kq ml-team 29651 4 "s#^  runPolicy:#  scheduling:\n    gang: {provider: kueue, queueName: team-queue}\n  runPolicy:#;s#train_dir: .*#train_dir: $T/no-such-data#"
kq_pods() { [ "$(kubectl -n ml-team get pods -l hypertrain.dev/job-name=kq --no-headers 2>/dev/null | wc -l)" -ge 1 ]; }
wait_for 60 "kq's pods" kq_pods
for p in $(kubectl -n ml-team get pods -l hypertrain.dev/job-name=kq -o name); do
  [ "$(kubectl -n ml-team get "$p" -o jsonpath='{.metadata.labels.kueue\.x-k8s\.io/queue-name}')" = team-queue ] \
    || fail "$p has no Kueue queue label"
  [ -z "$(kubectl -n ml-team get "$p" -o jsonpath='{.spec.schedulingGates}' 2>/dev/null)" ] \
    || kubectl -n ml-team patch "$p" --type=json -p '[{"op":"remove","path":"/spec/schedulingGates"}]' > /dev/null
done
wait_for 90 "kq Failed (no data: exit 3)" state_is ml-team kq Failed
ended() { kubectl -n ml-team get pods -l hypertrain.dev/job-name=kq -o jsonpath='{.items[*].metadata.annotations}' | grep -q '"kueue.x-k8s.io/retriable-in-group":"false"'; }
wait_for 30 "a kq pod annotated kueue.x-k8s.io/retriable-in-group=false" ended
ok "Kueue job Failed ($(jp ml-team kq '{.status.conditions[?(@.type=="Failed")].reason}')); its pod group ended on a terminated pod"
kubectl -n ml-team delete tj kq > /dev/null

echo "--- A4. the operator's pod deleted"
kubectl -n hypertrain-system delete pod "$OP1" --wait=false > /dev/null
new_leader() { h="$(kubectl -n hypertrain-system get lease hypertrain-operator-leader -o jsonpath='{.spec.holderIdentity}')"; [ -n "$h" ] && [ "$h" != "$OP1" ]; }
wait_for 90 "a new operator pod to lead" new_leader
# It hands the lease over before it exits: wait for the node agent to see the exit.
op_exited() { grep -q "exited hypertrain-system/$OP1 code" "$T/node-agent.log"; }
wait_for 60 "operator pod $OP1 to exit after SIGTERM" op_exited
grep -q "exited hypertrain-system/$OP1 code 0" "$T/node-agent.log" || fail "the operator did not exit 0 on SIGTERM"
ok "SIGTERM: $OP1 exited 0; $(kubectl -n hypertrain-system get lease hypertrain-operator-leader -o jsonpath='{.spec.holderIdentity}') leads"

echo "--- A5. RBAC: granted == called (audit log)"
"$B/operator/cmd/hypertrain-operator" --print-permissions > "$T/permissions.txt"
kubectl get clusterrole ht-hypertrain-operator ht-hypertrain-operator-nodes -o json > "$T/clusterroles.json"
kubectl -n hypertrain-system get role ht-hypertrain-operator-leader-election -o json > "$T/lease-role.json"
python3 - "$T/cp/audit.log" "$T/permissions.txt" "$T/clusterroles.json" "$T/lease-role.json" <<'EOF' || fail "RBAC audit"
import json, sys
audit, perms, croles, lrole = sys.argv[1:]
op = "system:serviceaccount:hypertrain-system:ht-hypertrain-operator"
used, denied, trainer = set(), [], set()
for line in open(audit):
    e = json.loads(line)
    ref = e.get("objectRef") or {}
    if not ref.get("resource"):
        continue
    res = ref["resource"] + ("/" + ref["subresource"] if ref.get("subresource") else "")
    key = (ref.get("apiGroup") or "core", res, e["verb"])
    user = e["user"]["username"]
    code = (e.get("responseStatus") or {}).get("code", 0)
    if user == op:
        used.add(key)
        if code == 403:
            denied.append(key)
    elif user.startswith("system:serviceaccount:ml-team:") and not e.get("userAgent", "").startswith("kubectl"):
        trainer.add(key + (code,))  # the launchers (this test's own attacks used kubectl)
called, held = set(), set()
for line in open(perms):
    g, r, v, scope, kind, *switch = line.split()
    if switch:
        continue  # granted only with a chart value this install leaves off (gangScheduling.*)
    (called if kind == "called" else held).add((g, r, v))
granted = set()
for doc in (json.load(open(croles))["items"] + [json.load(open(lrole))]):
    for rule in doc["rules"]:
        for g in rule["apiGroups"]:
            for r in rule["resources"]:
                for v in rule["verbs"]:
                    granted.add((g or "core", r, v))
show = lambda s: " ".join(sorted("%s/%s:%s" % k for k in s)) or "-"
ok = True
if denied:
    print("FAIL: the API server refused the operator:", show(set(denied))); ok = False
if used != called:
    print("FAIL: called but not declared:", show(used - called)); print("FAIL: declared but never called:", show(called - used)); ok = False
if granted != called | held:
    print("FAIL: granted but not declared:", show(granted - called - held)); print("FAIL: declared but not granted:", show((called | held) - granted)); ok = False
if {(g, r, v) for g, r, v, c in trainer} != {("core", "configmaps", "patch")} or any(c >= 400 for *_, c in trainer):
    print("FAIL: the trainers called", sorted(trainer)); ok = False
print("operator called (audit):", show(used))
print("held only to grant:", show(held))
print("trainers called:", sorted(trainer))
sys.exit(0 if ok else 1)
EOF
ok "the operator called exactly what the chart grants (less what it holds to grant); nothing was refused"

# --- B. watchNamespaces, one of them missing ----------------------------------------
echo "--- B. helm install with watchNamespaces={team-a,team-new}"
"$HELM" uninstall ht -n hypertrain-system --wait > /dev/null
kubectl create namespace team-a > /dev/null
# The CRD stays from release ht (crds.keep): this release does not own it.
install_operator ht2 --set 'watchNamespaces={team-a,team-new}' --set crds.install=false
[ "$(kubectl get namespace team-new -o jsonpath='{.metadata.annotations.helm\.sh/resource-policy}')" = keep ] \
  || fail "the missing watched namespace team-new was not created (kept on uninstall)"
ok "install succeeded with a missing watched namespace (created, kept on uninstall)"
job small team-a 29631 8
job stray ml-team 29641 8
wait_for 120 "small Succeeded in team-a" state_is team-a small Succeeded
[ "$(kubectl -n ml-team get pods -l hypertrain.dev/job-name=stray --no-headers 2>/dev/null | wc -l)" = 0 ] \
  || fail "the namespaced operator created pods in ml-team"
as2="system:serviceaccount:hypertrain-system:ht2-hypertrain-operator"
[ "$(kubectl auth can-i create pods -n team-a --as="$as2")" = yes ] || fail "the operator cannot create pods in team-a"
[ "$(kubectl auth can-i create pods -n kube-system --as="$as2" 2>/dev/null || true)" = no ] \
  || fail "the namespaced operator may create pods in kube-system"
[ "$(kubectl auth can-i create pods -n ml-team --as="$as2" 2>/dev/null || true)" = no ] \
  || fail "the namespaced operator may create pods in an unwatched namespace"
"$HELM" uninstall ht2 -n hypertrain-system --wait > /dev/null
kubectl get namespace team-new > /dev/null || fail "helm uninstall deleted the watched namespace team-new"
ok "a job in team-a Succeeded; ml-team left alone; no pods in kube-system; team-new kept after uninstall"
echo "PASS ($((SECONDS - t0))s)"
