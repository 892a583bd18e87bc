# Shell helpers for tests on the real control plane (source this file).
#
#   . localcluster/envtest/envtest.sh
#   envtest_require "$KUBE_ENVTEST"           # skips the test (exit 0) when the binaries are missing
#                                             # (fails under CI, where tools/setup.sh provides them)
#   envtest_start "$KUBE_ENVTEST" "$T/cp"     # starts it; sets ENVTEST_PID and KUBECONFIG
#   ...                                       # the caller ends $ENVTEST_PID (SIGTERM) in its cleanup
#
# The binaries come from $HYPERTRAIN_KUBE_BINARIES (kube-apiserver,
# kube-controller-manager, kube-scheduler 1.26.5), else from the cache that
# tools/setup.sh fills from ../shared/kube; etcd from Debian's etcd-server.

# Writes a one-case JUnit file marked skipped, so tools/test.sh counts a skip (not a pass).
envtest_write_skip_xml() {  # MESSAGE
  [ -n "${XML_OUTPUT_FILE:-}" ] || return 0
  local name="${TEST_TARGET:-envtest}" msg
  msg="$(printf '%s' "$1" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g')"
  cat > "$XML_OUTPUT_FILE" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="$name" tests="1" failures="0" errors="0" skipped="1">
<testcase name="$name" classname="$name" result="skipped"><skipped message="$msg"/></testcase>
</testsuite></testsuites>
EOF
}

envtest_require() {  # KUBE_ENVTEST_BINARY; under CI ($CI set) missing binaries fail instead
  local why
  if ! why="$("$1" --check 2>&1)"; then
    if [ -n "${CI:-}" ]; then
      echo "FAIL: under CI tools/setup.sh must provide the control plane: $why" >&2
      exit 1
    fi
    echo "SKIP: $why"
    envtest_write_skip_xml "$why"
    exit 0
  fi
}

envtest_start() {  # KUBE_ENVTEST_BINARY WORK_DIR [extra flags...]
  local bin="$1" dir="$2"
  shift 2
  mkdir -p "$dir"
  rm -f "$dir/ready"
  "$bin" --work-dir "$dir" "$@" > "$dir/kube-envtest.out" 2> "$dir/kube-envtest.log" &
  ENVTEST_PID=$!
  local deadline=$((SECONDS + 120))
  while [ ! -s "$dir/ready" ]; do
    if ! kill -0 "$ENVTEST_PID" 2>/dev/null; then
      echo "FAIL: kube-envtest exited before the control plane was ready:" >&2
      cat "$dir/kube-envtest.log" >&2
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "FAIL: the control plane was not ready (kube-envtest wrote no $dir/ready) in 120 s:" >&2
      cat "$dir/kube-envtest.log" >&2
      return 1
    fi
    sleep 0.1
  done
  export KUBECONFIG="$dir/kubeconfig"
}

# A kubeconfig for ServiceAccount NS/NAME (a real token from the TokenRequest API).
envtest_sa_kubeconfig() {  # NAMESPACE NAME OUT_FILE
  local token server ca
  token="$(kubectl -n "$1" create token "$2" --duration=1h)" || return 1
  server="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
  ca="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')"
  cat > "$3" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: envtest, cluster: {server: "$server", certificate-authority: "$ca"}}]
users: [{name: $2, user: {token: "$token"}}]
contexts: [{name: envtest, context: {cluster: envtest, user: $2, namespace: $1}}]
current-context: envtest
EOF
  chmod 600 "$3"
}

# Real nodes (containerd + kubelet; real-node.sh). Skips the test (exit 0) where
# they cannot run. Under CI, missing software fails (tools/setup.sh installs
# containerd, runc, the CNI plugins and kubelet); a machine that cannot run them
# (not root, no mount namespaces, no cgroup v1) skips there too, saying why.
envtest_require_real_node() {  # REAL_NODE_SH
  local why rc=0
  why="$("$1" check 2>&1)" || rc=$?
  [ "$rc" = 0 ] && return 0
  if [ "$rc" = 3 ] && [ -n "${CI:-}" ]; then
    echo "FAIL: under CI tools/setup.sh must provide the real node's software: $why" >&2
    exit 1
  fi
  echo "SKIP: $why"
  envtest_write_skip_xml "$why"
  exit 0
}
