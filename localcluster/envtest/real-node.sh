#!/usr/bin/env bash
# Real Kubernetes nodes for tests: per node one containerd 1.6 and one kubelet
# 1.26.5 (../shared/kube/README.md), on an envtest control plane.
#
#   real-node.sh check                      exit 0 when nodes can run here, else why and
#                                           3 (software missing) or 4 (the machine cannot)
#   real-node.sh start DIR --kubeconfig F --images IMG_DIR [--nodes N]
#                [--instance-type T] [--capacity NAME=QTY,...] [--hugepages-2mi PAGES]
#   real-node.sh stop DIR                   ends everything start made (idempotent)
#
# DIR/node-<i>.address holds the path of node i's containerd socket (for ctr -a).
# ConfigMap openshift-service-ca.crt is created in default, kube-system and the
# namespaces in $RN_NAMESPACES (this kubelet's token volumes need it; see start).
# IMG_DIR holds pause.tar (the sandbox image) and any other OCI archives
# (tools/oci-images.sh); each is imported into every node's containerd.
# Node i (0-based) is hypertrain-node-<i>. Each node is one private mount
# namespace (unshare -m, propagation private) holding its containerd and its
# kubelet, so that kubelet's volume mounts are what runc bind-mounts. Inside
# it, files and directories are bound over what kubelet and containerd would
# otherwise write on the host: the kernel settings kubelet sets
# (vm.overcommit_memory, vm.panic_on_oom, kernel.panic, kernel.panic_on_oops,
# kernel.keys.root_maxkeys/root_maxbytes), /run/containerd (shim sockets),
# /run/netns, /var/log/pods, /var/log/containers and /var/lib/kubelet. Each node
# has its own containerd (root, state, socket, config; a kubelet kills the pods
# in its runtime it does not know, so two kubelets cannot share one), its
# kubelet its root dir, ports and cgroup root (/hypertrain-node-<i>,
# cgroupfs). Pods use the host network (loopback; the only CNI network is
# `loopback`, which changes nothing on the host); makeIPTablesUtilChains is off.
# Extended resources (GPU, EFA) are advertised by patching each Node's status
# (kubernetes.io/docs/tasks/administer-cluster/extended-resource-node);
# hugepages-2Mi, which kubelet takes from the machine, by a file bound over
# the pool size kubelet reads (no pages are reserved; nothing enforces them).
# stop ends kubelets, containers, shims and containerd by PID and removes the
# cgroups and the host directories start created; the mounts go with the
# namespaces.
set -euo pipefail

KUBE_DIR="${HYPERTRAIN_KUBE_BINARIES:-$HOME/.cache/hypertrain/kube-v1.26.5}"
KUBELET="$KUBE_DIR/kubelet"
SYSCTLS=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops
         kernel/keys/root_maxkeys kernel/keys/root_maxbytes)
HOST_DIRS=(/run/containerd /run/netns /var/log/pods /var/log/containers /var/lib/kubelet)
CGROUP_CONTROLLERS=(cpu cpuacct cpuset memory devices freezer blkio pids hugetlb net_cls net_prio perf_event rdma systemd)

die() { echo "real-node: $*" >&2; exit 1; }
log() { echo "real-node: $*" >&2; }

# Prints why nodes cannot run here. Exit 3: software is missing (tools/setup.sh
# installs it); exit 4: this machine cannot run them (privileges, kernel).
check() {
  local why="" b
  for b in containerd containerd-shim-runc-v2 runc ctr unshare nsenter python3; do
    [ -n "$why" ] || command -v "$b" > /dev/null || why="$b is not installed (tools/setup.sh installs containerd, runc)"
  done
  [ -n "$why" ] || [ -x "$KUBELET" ] || why="kubelet 1.26.5 not found at $KUBELET (tools/setup.sh unpacks ../shared/kube/kubelet.xz; or set HYPERTRAIN_KUBE_BINARIES to a directory holding kubelet)"
  [ -n "$why" ] || [ -x /usr/lib/cni/loopback ] || [ -x /opt/cni/bin/loopback ] || why="the CNI loopback plugin is missing (Debian package containernetworking-plugins)"
  if [ -n "$why" ]; then echo "real kubelet nodes cannot run here: $why"; return 3; fi
  [ "$(id -u)" -eq 0 ] || why="needs root (containerd, kubelet, mount namespaces)"
  [ -n "$why" ] || [ -d /sys/fs/cgroup/memory ] || why="needs cgroup v1 with the memory controller at /sys/fs/cgroup/memory"
  [ -n "$why" ] || grep -qw overlay /proc/filesystems || why="the kernel has no overlay filesystem"
  [ -n "$why" ] || unshare -m true 2> /dev/null || why="cannot create a mount namespace (unshare -m)"
  if [ -n "$why" ]; then echo "real kubelet nodes cannot run here: $why"; return 4; fi
}

cni_dir() { if [ -x /usr/lib/cni/loopback ]; then echo /usr/lib/cni; else echo /opt/cni/bin; fi; }

write_containerd_config() {  # NODE_DIR SOCKET
  local d="$1" sock="$2"
  mkdir -p "$d/containerd/root" "$d/containerd/state" "$d/cni/net.d" "$d/runc"
  cat > "$d/cni/net.d/10-loopback.conflist" <<EOC
{"cniVersion": "0.4.0", "name": "loopback", "plugins": [{"type": "loopback"}]}
EOC
  cat > "$d/containerd/config.toml" <<EOC
version = 2
root = "$d/containerd/root"
state = "$d/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:local"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$d/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$(cni_dir)"
    conf_dir = "$d/cni/net.d"
EOC
}

write_kubelet_config() {  # NODE_DIR INDEX PORT HEALTHZ_PORT CA_FILE
  local d="$1" i="$2"
  cat > "$d/kubelet/config.yaml" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $3
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $4
cgroupDriver: cgroupfs
cgroupRoot: /hypertrain-node-$i
failSwapOn: false
makeIPTablesUtilChains: false
protectKernelDefaults: false
# On 127.0.0.1 only. The envtest API server presents no client certificate to
# kubelets, so kubectl logs and exec (API server -> kubelet) need anonymous access.
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
  x509: {clientCAFile: "$5"}
authorization: {mode: AlwaysAllow}
rotateCertificates: false
serverTLSBootstrap: false
volumePluginDir: "$d/kubelet/volume-plugins"
resolvConf: /etc/resolv.conf
maxPods: 20
nodeStatusUpdateFrequency: 4s
# The lease is renewed every quarter of this (2 s): a controller manager with a
# short --node-monitor-grace-period (kube-envtest --node-monitor-grace-period-s)
# sees a stopped kubelet's Node go NotReady within seconds, a live one never.
nodeLeaseDurationSeconds: 8
nodeStatusReportFrequency: 20s
syncFrequency: 10s
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOC
}

# The script a node's namespace runs first: binds over the kernel settings
# and host paths, then becomes containerd.
write_ns_init() {  # NODE_DIR
  local d="$1" s
  mkdir -p "$d/sysctl" "$d/host"
  {
    echo "set -e"
    for s in "${SYSCTLS[@]}"; do
      [ -e "/proc/sys/$s" ] || continue
      cat "/proc/sys/$s" > "$d/sysctl/${s//\//.}"
      echo "mount --bind '$d/sysctl/${s//\//.}' '/proc/sys/$s'"
    done
    # cAdvisor reads the 2 MiB pool's size here: kubelet advertises hugepages-2Mi.
    local hp=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
    if [ "$HUGEPAGES" -gt 0 ] && [ -e "$hp" ]; then
      echo "$HUGEPAGES" > "$d/sysctl/nr_hugepages"
      echo "mount --bind '$d/sysctl/nr_hugepages' '$hp'"
    fi
    for s in "${HOST_DIRS[@]}"; do
      mkdir -p "$d/host$s"
      echo "mount --bind '$d/host$s' '$s'"
    done
    echo "exec containerd --config '$d/containerd/config.toml'"
  } > "$d/ns-init.sh"
}

wait_until() {  # SECONDS WHAT COMMAND...
  local secs="$1" what="$2" deadline
  shift 2
  deadline=$((SECONDS + secs))
  until "$@" > /dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || { log "timed out after ${secs}s waiting for $what"; return 1; }
    sleep 0.2
  done
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() {
  local dir="" kubeconfig="" images="" nodes=2 itype="" capacity=""
  HUGEPAGES=0
  dir="$1"; shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --kubeconfig) kubeconfig="$2"; shift 2 ;;
      --images) images="$2"; shift 2 ;;
      --nodes) nodes="$2"; shift 2 ;;
      --instance-type) itype="$2"; shift 2 ;;
      --capacity) capacity="$2"; shift 2
        # kubelet sets hugepages-* from the machine's pools on every status update.
        [[ ",$capacity" != *,hugepages-* ]] || { echo "real-node: --capacity: hugepages-* come from the hugepage pool kubelet reads (kubelet overwrites them): use --hugepages-2mi PAGES" >&2; exit 2; } ;;
      --hugepages-2mi) HUGEPAGES="$2"; shift 2
        [[ "$HUGEPAGES" =~ ^[0-9]+$ ]] || { echo "real-node: --hugepages-2mi must be a page count, not '$HUGEPAGES'" >&2; exit 2; } ;;
      *) echo "real-node: unknown flag $1" >&2; exit 2 ;;
    esac
  done
  [ -n "$kubeconfig" ] && [ -f "$kubeconfig" ] || { echo "real-node: --kubeconfig FILE is required" >&2; exit 2; }
  [ -f "$images/pause.tar" ] || { echo "real-node: --images DIR must hold pause.tar (tools/oci-images.sh)" >&2; exit 2; }
  [[ "$nodes" =~ ^[1-9]$ ]] || { echo "real-node: --nodes must be 1..9, not '$nodes'" >&2; exit 2; }
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  local why; why="$(check)" || die "$why"
  : > "$dir/pids"
  : > "$dir/created"
  # Host paths the namespaces bind over must exist; remember which start made.
  local p c
  for p in "${HOST_DIRS[@]}"; do [ -d "$p" ] || { mkdir -p "$p"; echo "$p" >> "$dir/created"; }; done
  for c in "${CGROUP_CONTROLLERS[@]}"; do
    [ -d "/sys/fs/cgroup/$c" ] && [ ! -d "/sys/fs/cgroup/$c/k8s.io" ] && echo "/sys/fs/cgroup/$c/k8s.io" >> "$dir/created"
  done
  local ca; ca="$(kubectl --kubeconfig "$kubeconfig" config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority}')"
  # Unix socket paths are limited to 108 bytes: containerd's socket and kubelet's
  # root dir (it holds sockets too) live in a short directory.
  local short; short="$(mktemp -d /tmp/ht-node.XXXXXX)"
  echo "$short" >> "$dir/created"
  local i d cpid kpid sock kroot
  for ((i = 0; i < nodes; i++)); do
    d="$dir/node-$i"
    sock="$short/node-$i.sock"
    kroot="$short/kubelet-$i"
    echo "$sock" > "$d.address"
    mkdir -p "$d/kubelet" "$kroot/pki"
    write_containerd_config "$d" "$sock"
    write_ns_init "$d"
    unshare -m --propagation private -- bash "$d/ns-init.sh" > "$d/containerd.log" 2>&1 &
    cpid=$!
    echo "containerd $i $cpid" >> "$dir/pids"
    wait_until 30 "containerd of node $i ($sock; log $d/containerd.log)" \
      ctr -a "$sock" version || { tail -20 "$d/containerd.log" >&2; return 1; }
    for p in "$images"/*.tar; do
      ctr -a "$sock" -n k8s.io images import --no-unpack=false "$p" > /dev/null \
        || die "node $i: ctr images import $p failed"
    done
    write_kubelet_config "$d" "$i" "$(free_port)" "$(free_port)" "$ca"
    for c in "${CGROUP_CONTROLLERS[@]}"; do  # kubelet wants its cgroup root to exist
      [ -d "/sys/fs/cgroup/$c" ] && mkdir -p "/sys/fs/cgroup/$c/hypertrain-node-$i"
    done
    local labels="hypertrain.dev/node-agent=kubelet,sagemaker.amazonaws.com/node-health-status=Schedulable"
    [ -z "$itype" ] || labels="$labels,node.kubernetes.io/instance-type=$itype"
    nsenter -t "$cpid" -m -- "$KUBELET" --config "$d/kubelet/config.yaml" --kubeconfig "$kubeconfig" \
      --root-dir "$kroot" --cert-dir "$kroot/pki" \
      --container-runtime-endpoint "unix://$sock" --pod-infra-container-image localhost/pause:local \
      --node-ip 127.0.0.1 --hostname-override "hypertrain-node-$i" --node-labels "$labels" \
      > "$d/kubelet.log" 2>&1 &
    kpid=$!
    echo "kubelet $i $kpid" >> "$dir/pids"
  done
  for ((i = 0; i < nodes; i++)); do
    kpid="$(awk -v i="$i" '$1 == "kubelet" && $2 == i {print $3}' "$dir/pids")"
    wait_until 60 "Node hypertrain-node-$i Ready (log $dir/node-$i/kubelet.log)" \
      bash -c "kill -0 $kpid || exit 0; kubectl --kubeconfig '$kubeconfig' get node hypertrain-node-$i -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True" \
      || { tail -30 "$dir/node-$i/kubelet.log" >&2; return 1; }
    pid_alive "$kpid" || { tail -30 "$dir/node-$i/kubelet.log" >&2; die "kubelet of node $i exited"; }
    # kubelet 1.26 refuses a loopback --node-ip ("nodeIP can't be loopback address") and
    # then leaves the addresses alone: the API server reaches it (logs) at 127.0.0.1.
    kubectl --kubeconfig "$kubeconfig" patch node "hypertrain-node-$i" --subresource=status --type=merge \
      -p '{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.1"}]}}' > /dev/null \
      || die "patching hypertrain-node-$i's address failed"
    if [ -n "$capacity" ]; then
      local ops="" kv
      for kv in ${capacity//,/ }; do
        ops="$ops{\"op\":\"add\",\"path\":\"/status/capacity/${kv%%=*}\",\"value\":\"${kv#*=}\"},"
      done
      ops="[${ops%,}]"
      ops="${ops//\/status\/capacity\/nvidia.com\//\/status\/capacity\/nvidia.com~1}"
      ops="${ops//\/status\/capacity\/vpc.amazonaws.com\//\/status\/capacity\/vpc.amazonaws.com~1}"
      kubectl --kubeconfig "$kubeconfig" patch node "hypertrain-node-$i" --subresource=status --type=json -p "$ops" > /dev/null \
        || die "patching hypertrain-node-$i's capacity ($capacity) failed"
      # kubelet copies them into allocatable (what the scheduler uses) on its next status update.
      for kv in ${capacity//,/ }; do
        wait_until 30 "hypertrain-node-$i's allocatable to show ${kv%%=*}" bash -c \
          "kubectl --kubeconfig '$kubeconfig' get node hypertrain-node-$i -o jsonpath='{.status.allocatable}' | grep -qF '\"${kv%%=*}\":\"${kv#*=}\"'" \
          || die "hypertrain-node-$i does not advertise ${kv}"
      done
    fi
  done
  # This kubelet (built from OpenShift MicroShift's Kubernetes tree) adds ConfigMap
  # openshift-service-ca.crt to every service-account token volume: pods that
  # mount a token stay ContainerCreating in a namespace without it.
  local ns
  for ns in default kube-system ${RN_NAMESPACES:-}; do
    kubectl --kubeconfig "$kubeconfig" -n "$ns" create configmap openshift-service-ca.crt \
      --from-file=service-ca.crt="$ca" > /dev/null 2>&1 || true
  done
  log "$nodes node(s) Ready (kubelet $("$KUBELET" --version | awk '{print $2}'), containerd $(containerd --version | awk '{print $3}')); state in $dir"
}

pid_alive() { [ -d "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2> /dev/null; }

stop_pid() {  # PID: SIGTERM, then SIGKILL after 10 s
  local p="$1" n
  pid_alive "$p" || return 0
  kill -TERM "$p" 2> /dev/null || return 0
  for n in $(seq 100); do pid_alive "$p" || return 0; sleep 0.1; done
  kill -KILL "$p" 2> /dev/null || true
  for n in $(seq 50); do pid_alive "$p" || return 0; sleep 0.1; done
}

# PIDs of shims (and their containers' processes) of the containerd at SOCKET.
shim_pids() {  # SOCKET
  local f
  for f in /proc/[0-9]*/cmdline; do
    { tr '\0' ' ' < "$f"; } 2> /dev/null | grep -qF -- "-address $1 " && { f="${f#/proc/}"; echo "${f%/cmdline}"; }
  done
  return 0
}

rm_cgroup_tree() {  # DIR: removes empty cgroups depth-first
  [ -d "$1" ] || return 0
  find "$1" -depth -type d -exec rmdir {} \; 2> /dev/null || true
  [ ! -d "$1" ]
}

stop() {
  local dir="$1" kind i pid d sock task
  [ -f "$dir/pids" ] || return 0
  dir="$(cd "$dir" && pwd)"
  # Kubelets first (they stop nothing on exit), then every task, then containerd.
  while read -r kind i pid; do [ "$kind" = kubelet ] && stop_pid "$pid"; done < "$dir/pids"
  while read -r kind i pid; do
    [ "$kind" = containerd ] || continue
    d="$dir/node-$i"
    sock="$(cat "$d.address")"
    if pid_alive "$pid"; then
      for task in $(ctr -a "$sock" -n k8s.io tasks ls -q 2> /dev/null); do
        timeout 20 ctr -a "$sock" -n k8s.io tasks delete --force "$task" > /dev/null 2>&1 || true
      done
      stop_pid "$pid"
    fi
    for task in $(shim_pids "$sock"); do stop_pid "$task"; done
  done < "$dir/pids"
  # Processes of containers whose shim died are in the node's cgroups.
  local c left=0
  for ((i = 0; i < 10; i++)); do
    for c in /sys/fs/cgroup/*/hypertrain-node-[0-9]; do
      [ -d "$c" ] || continue
      for pid in $(find "$c" -name cgroup.procs -exec cat {} + 2> /dev/null); do kill -KILL "$pid" 2> /dev/null || true; done
    done
    left=0
    for c in /sys/fs/cgroup/*/hypertrain-node-[0-9]; do rm_cgroup_tree "$c" || left=1; done
    [ "$left" = 0 ] && break
    sleep 0.5
  done
  [ "$left" = 0 ] || log "WARNING: cgroups left: $(ls -d /sys/fs/cgroup/*/hypertrain-node-[0-9] 2> /dev/null | tr '\n' ' ')"
  if [ -f "$dir/created" ]; then
    while read -r p; do
      case "$p" in
        /sys/fs/cgroup/*) rm_cgroup_tree "$p" || log "WARNING: cgroup $p left" ;;
        *) rm -rf --one-file-system "$p" ;;
      esac
    done < "$dir/created"
  fi
  # Overlay snapshots hold read-only dirs; the namespaces' mounts are gone with them.
  rm -f "$dir/pids"
}

case "${1:-}" in
  check) check ;;
  start) [ $# -ge 2 ] || { echo "usage: real-node.sh start DIR --kubeconfig F --images DIR [--nodes N]" >&2; exit 2; }; shift; start "$@" ;;
  stop) [ $# -eq 2 ] || { echo "usage: real-node.sh stop DIR" >&2; exit 2; }; stop "$2" ;;
  *) echo "usage: real-node.sh check | start DIR --kubeconfig F --images DIR [--nodes N] [--instance-type T] [--capacity K=V,...] | stop DIR" >&2; exit 2 ;;
esac
