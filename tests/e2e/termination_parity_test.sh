#!/usr/bin/env bash
# The same pods under the node agent and under a real kubelet (issue 39 item 5):
# what each reports in status.containerStatuses[0].state.terminated must be what
# kubelet 1.26 reports (measured on real-node.sh):
#  - the termination message file verbatim, its LAST 4096 bytes;
#  - FallbackToLogsOnError on a failure: the last 2048 bytes of the last 80 log
#    lines, verbatim (trailing newline kept); nothing for a success;
#  - exitCode, reason Error/Completed, startedAt, finishedAt; no `signal`.
#   termination_parity_test.sh --node-agent | --real-node
# The container is /bin/sh: under the node agent the host's, under kubelet an
# image of it built here (images/rootfs.sh, tools/oci_image.py).
set -euo pipefail
R="$PWD"
MODE="${1:?usage: termination_parity_test.sh --node-agent|--real-node}"
. "$R/localcluster/envtest/envtest.sh"
envtest_require "$R/localcluster/envtest/kube-envtest"
RN="$R/localcluster/envtest/real-node.sh"
[ "$MODE" = --real-node ] && envtest_require_real_node "$RN"
T="$(mktemp -d "${TEST_TMPDIR:-/tmp}/parity.XXXXXX")"
chmod 0755 "$T"
AGENT_PID=""
cleanup() {
  local rc=$?
  [ -n "$AGENT_PID" ] && { kill -TERM "$AGENT_PID" 2> /dev/null || true; wait "$AGENT_PID" 2> /dev/null || true; }
  [ "$MODE" = --real-node ] && { "$RN" stop "$T/nodes" || true; }
  if [ -n "${ENVTEST_PID:-}" ]; then kill -TERM "$ENVTEST_PID" 2> /dev/null || true; wait "$ENVTEST_PID" 2> /dev/null || true; fi
  exit "$rc"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

envtest_start "$R/localcluster/envtest/kube-envtest" "$T/cp"
if [ "$MODE" = --real-node ]; then
  for b in /bin/sh /bin/cat; do "$R/images/rootfs.sh" "$(readlink -f "$b")" "$T/shfs"; done
  mv "$T/shfs/usr/local/bin/$(basename "$(readlink -f /bin/sh)")" "$T/shfs/usr/local/bin/sh"
  mkdir -p "$T/images" "$T/pausefs/usr/local/bin"
  cc -static -Os -s -o "$T/pausefs/usr/local/bin/pause" "$R/images/pause.c"
  python3 "$R/tools/oci_image.py" --rootfs "$T/pausefs" --ref localhost/pause:local --out "$T/images/pause.tar" \
    --user 65535:65535 --entrypoint '["/usr/local/bin/pause"]' > /dev/null
  python3 "$R/tools/oci_image.py" --rootfs "$T/shfs" --ref localhost/sh:local --out "$T/images/sh.tar" \
    --user 1000:1000 --env PATH=/usr/local/bin > /dev/null
  "$RN" start "$T/nodes" --kubeconfig "$KUBECONFIG" --images "$T/images" --nodes 1 2> "$T/real-node.log" ||
    { cat "$T/real-node.log" >&2; fail "the real node did not start"; }
else
  "$R/localcluster/nodeagent/node-agent" --kubeconfig "$KUBECONFIG" --nodes 1 --work-dir "$T/pods" \
    --bind-pods false --image-map "localhost/sh:local=$(readlink -f /bin/sh)" > "$T/node-agent.log" 2>&1 &
  AGENT_PID=$!
fi
for _ in $(seq 300); do kubectl get sa default > /dev/null 2>&1 && break; sleep 0.1; done

# NAME POLICY SCRIPT: a pod whose sh runs SCRIPT ($TL is the termination log).
pod() {
  cat <<EOY
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  hostNetwork: true
  restartPolicy: Never
  automountServiceAccountToken: false
  tolerations: [{operator: Exists}]
  containers:
  - name: c
    image: localhost/sh:local
    imagePullPolicy: Never
    terminationMessagePolicy: $2
    command: [sh, -c, 'TL=\${HYPERTRAIN_TERMINATION_LOG:-/dev/termination-log}; $3']
---
EOY
}
{
  pod file File 'i=0; while [ $i -lt 100 ]; do echo "msg $i ........................................" >> $TL; i=$((i+1)); done; exit 4'
  pod fallback FallbackToLogsOnError 'i=0; while [ $i -lt 100 ]; do echo "line $i ........................................"; i=$((i+1)); done; exit 3'
  pod both FallbackToLogsOnError 'echo logged; echo "the cause" > $TL; exit 2'
  pod success FallbackToLogsOnError 'echo hello; exit 0'
} > "$T/pods.yaml"
kubectl apply -f "$T/pods.yaml" > /dev/null
done_pods() { [ "$(kubectl get pods -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -cE '^(Succeeded|Failed)$')" = 4 ]; }
for _ in $(seq 600); do done_pods && break; sleep 0.2; done
done_pods || { kubectl get pods -o wide >&2; fail "the pods did not finish in 120 s"; }

kubectl get pods -o json > "$T/pods.json"
python3 - "$T/pods.json" "$MODE" <<'EOP'
import json, sys
pods = {p["metadata"]["name"]: p for p in json.load(open(sys.argv[1]))["items"]}
msg_lines = "".join(f"msg {i} ........................................\n" for i in range(100))
log_lines = "".join(f"line {i} ........................................\n" for i in range(20, 100))
want = {  # name: (phase, exitCode, reason, message)
    "file": ("Failed", 4, "Error", msg_lines[-4096:]),
    "fallback": ("Failed", 3, "Error", log_lines[-2048:]),
    "both": ("Failed", 2, "Error", "the cause\n"),
    "success": ("Succeeded", 0, "Completed", None),
}
bad = []
for name, (phase, code, reason, message) in want.items():
    st = pods[name]["status"]
    t = st["containerStatuses"][0]["state"]["terminated"]
    got = (st["phase"], t.get("exitCode"), t.get("reason"), t.get("message"))
    if got != (phase, code, reason, message):
        bad.append(f"{name}: want {(phase, code, reason, message)!r}\n  got {got!r}")
    for k in ("startedAt", "finishedAt"):
        if not t.get(k):
            bad.append(f"{name}: no terminated.{k}")
    if "signal" in t:
        bad.append(f"{name}: terminated.signal is set ({t['signal']}); kubelet never sets it")
    print(f"ok: {sys.argv[2]} {name}: phase {got[0]}, exitCode {got[1]}, reason {got[2]}, message {len(got[3] or '')} bytes")
if bad:
    print("FAIL:\n" + "\n".join(bad), file=sys.stderr)
    sys.exit(1)
EOP
echo PASS
