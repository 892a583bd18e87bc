#!/usr/bin/env bash
# kube-envtest as shell tests use it: starts the real control plane, kubectl
# talks to it with the admin kubeconfig (the server reports v1.26.5, which
# Helm's kubeVersion check needs), and SIGTERM ends every component by PID.
set -euo pipefail
. localcluster/envtest/envtest.sh
BIN="$PWD/localcluster/envtest/kube-envtest"
envtest_require "$BIN"
T="${TEST_TMPDIR:-$(mktemp -d)}"
cleanup() { [ -n "${ENVTEST_PID:-}" ] && kill -TERM "$ENVTEST_PID" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$T/cp/kube-envtest.log" >&2 || true; exit 1; }

envtest_start "$BIN" "$T/cp" --kubeconfig-out "$T/admin.kubeconfig" --node-monitor-grace-period-s 10 \
  --node-monitor-period-s 2
cmp -s "$T/admin.kubeconfig" "$KUBECONFIG" || fail "--kubeconfig-out differs from the work dir's kubeconfig"
grep -q "insecure" "$KUBECONFIG" && fail "the kubeconfig skips TLS verification"
server="$(kubectl version -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\(v1\.26\.[0-9]*\)".*/\1/p' | tail -n 1)"
[ "$server" = v1.26.5 ] || fail "server version '$server'"
kubectl create namespace smoke > /dev/null
kubectl -n smoke create serviceaccount bot > /dev/null
envtest_sa_kubeconfig smoke bot "$T/bot.kubeconfig"
if KUBECONFIG="$T/bot.kubeconfig" kubectl -n smoke get pods > /dev/null 2>"$T/denied"; then
  fail "a ServiceAccount without roles listed pods"
fi
grep -q "forbidden" "$T/denied" || fail "expected forbidden: $(cat "$T/denied")"

# Every component is a child of kube-envtest; SIGTERM ends them all.
children="$(ps -o pid= --ppid "$ENVTEST_PID" | tr -d ' ')"
[ "$(echo "$children" | wc -w)" = 4 ] || fail "expected 4 components, got: $children"
# The node lifecycle controller's periods reach the controller manager.
cm=""
for p in $children; do grep -q kube-controller-manager "/proc/$p/cmdline" && cm="$p"; done
[ -n "$cm" ] || fail "no kube-controller-manager among $children"
args="$(tr '\0' ' ' < "/proc/$cm/cmdline")"
for want in --node-monitor-grace-period=10s --node-monitor-period=2s; do
  grep -q -- "$want" <<< "$args" || fail "kube-controller-manager runs without $want: $args"
done
kill -TERM "$ENVTEST_PID"
for _ in $(seq 150); do kill -0 "$ENVTEST_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$ENVTEST_PID" 2>/dev/null && fail "kube-envtest did not exit in 15 s"
wait "$ENVTEST_PID" || fail "kube-envtest exited non-zero after SIGTERM"
ENVTEST_PID=
for p in $children; do kill -0 "$p" 2>/dev/null && fail "component $p outlived kube-envtest"; done

# A bad period is a usage error naming the flag.
rc=0
"$BIN" --work-dir "$T/bad" --node-monitor-grace-period-s 0 2> "$T/bad.err" || rc=$?
[ "$rc" = 2 ] || fail "--node-monitor-grace-period-s 0 exited $rc, not 2"
grep -q -- "--node-monitor-grace-period-s must be a positive number of seconds" "$T/bad.err" ||
  fail "no message naming --node-monitor-grace-period-s: $(cat "$T/bad.err")"

# Without binaries the check names the variable (what a skip prints).
if HYPERTRAIN_KUBE_BINARIES=/nonexistent "$BIN" --check 2>"$T/why"; then fail "--check passed without binaries"; fi
grep -q HYPERTRAIN_KUBE_BINARIES "$T/why" || fail "the skip message does not name HYPERTRAIN_KUBE_BINARIES"
echo PASS
