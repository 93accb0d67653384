# shellcheck shell=bash disable=SC2034 # its variables are read by the scripts that source it
# Shared settings and helpers for the hack/cluster scripts. Source it; it has no side effects beyond
# defining variables and functions (it also sources components.sh). Every setting that reads DRA_*
# can be overridden from the environment.
K8S_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
# The containerd the local nodes run; must match hack/cluster/containerd/go.mod.
CONTAINERD_VERSION=v2.4.2
# The Helm that lints, renders and installs the chart; must match hack/cluster/helm/go.mod.
HELM_VERSION=v4.3.1
# Builds live outside the source tree so that a fresh clone reuses them and rebuilds are instant.
DRA_CACHE_DIR=${DRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dra-driver-nvidia-gpu}
K8S_BIN_DIR=$DRA_CACHE_DIR/k8s-$K8S_VERSION/bin
ETCD_BIN_DIR=$DRA_CACHE_DIR/etcd-$ETCD_VERSION/bin
CONTAINERD_BIN_DIR=$DRA_CACHE_DIR/containerd-$CONTAINERD_VERSION/bin
HELM_BIN_DIR=$DRA_CACHE_DIR/helm-$HELM_VERSION/bin
# Runtime state of the local cluster (certificates, etcd data, logs, pids, kubeconfig).
CLUSTER_DIR=${DRA_CLUSTER_DIR:-/tmp/dra-cluster}
KUBECONFIG_PATH=$CLUSTER_DIR/admin.kubeconfig
PKI_DIR=$CLUSTER_DIR/pki
RUN_DIR=$CLUSTER_DIR/run
LOG_DIR=$CLUSTER_DIR/logs
APISERVER_PORT=${DRA_APISERVER_PORT:-6443}
ETCD_CLIENT_PORT=${DRA_ETCD_PORT:-2379}
ETCD_PEER_PORT=$((ETCD_CLIENT_PORT + 1))
# The upstream default secure ports; a kubelet (10250/10248) and kube-proxy (10249/10256) do not clash.
SCHEDULER_PORT=${DRA_SCHEDULER_PORT:-10259}
CONTROLLER_MANAGER_PORT=${DRA_CONTROLLER_MANAGER_PORT:-10257}
SERVICE_CIDR=${DRA_SERVICE_CIDR:-10.96.0.0/16}
SERVICE_FIRST_IP=${DRA_SERVICE_FIRST_IP:-10.96.0.1}
# Where pods reach the API server: an address on this machine's lo inside the nodes' range (the
# pods' CNI routes cover it, docs/development.md "Pod network"), since there is no kube-proxy to
# route the `kubernetes` Service. The apiserver listens on every address and its certificate
# names this one. Host clients keep using 127.0.0.1.
APISERVER_POD_IP=${DRA_APISERVER_POD_IP:-10.250.0.254}
SA_ISSUER=https://kubernetes.default.svc.cluster.local
# Images of the local nodes (hack/images, built by images.sh, imported into every node's
# containerd): the sandbox image and a small glibc + busybox image for test pods. No registry
# serves them, so pods must use imagePullPolicy: Never (or IfNotPresent).
PAUSE_IMAGE=localhost/dra-pause:v1
WORKLOAD_IMAGE=localhost/dra-workload:v1
IMAGES_DIR=$DRA_CACHE_DIR/images
# Otherwise every ctr call warns that cgroup v1 (this VM) is deprecated.
export CONTAINERD_SUPPRESS_DEPRECATION_WARNINGS=true
# Optional extra gates for every component, e.g. DRADeviceTaintRules=true (docs/api-facts.md,
# "Cluster feature gates").
FEATURE_GATES=${DRA_FEATURE_GATES:-}
# Seconds to wait for one component to turn healthy before giving up.
WAIT_TIMEOUT=${DRA_CLUSTER_WAIT:-120}
# Start order; down.sh stops in reverse.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler)

HACK_CLUSTER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

progress() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
# Seconds since $1 (an earlier $EPOCHREALTIME), with one decimal.
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1fs", b - a }'; }
die() { printf '[cluster] error: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------------
# Processes. A pid file holds the pid of the component itself (not of a wrapper). A component name
# is its binary's name, optionally under a node folder ("dra-node-1/kubelet", see node.sh);
# cmd_<binary> gets the full name as $1 and fills CMD, plus CMD_PREFIX for a wrapper that execs
# the binary in place (nsenter), so the pid stays the component's.

pid_file() { echo "$RUN_DIR/$1.pid"; }
cmd_fn() { local b=${1##*/}; echo "cmd_${b//-/_}"; }

# Prints the component's pid when its pid file names a live process running the expected binary
# (guards against pid reuse after a reboot or a crash).
component_pid() {
  local f pid; f=$(pid_file "$1")
  [[ -s $f ]] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") == *"/${1##*/} "* ]] || return 1
  echo "$pid"
}

# Why a running component no longer matches what up.sh would start: its flags changed in this file,
# or build.sh replaced its binary (the running inode then shows as deleted). Prints nothing if current.
component_drift() {
  local pid=$1 name=$2 fn; fn=$(cmd_fn "$2")
  CMD_PREFIX=()
  "$fn" "$name"
  [[ $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") == "${CMD[*]} " ]] || { echo "flags changed"; return 0; }
  [[ $(readlink "/proc/$pid/exe" 2>/dev/null) != *" (deleted)" ]] || echo "binary rebuilt"
}

port_in_use() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

# Starts the component detached from the caller: its own session (setsid) so that the caller's
# process group or terminal going away does not signal it, stdin from /dev/null, output to its log.
# The inner bash records its own pid and then execs, so the pid file names the component itself
# whether or not setsid had to fork.
start_component() {
  local name=$1 fn; fn=$(cmd_fn "$1")
  CMD_PREFIX=()
  "$fn" "$name"
  local pidf log; pidf=$(pid_file "$name"); log=$LOG_DIR/$name.log
  mkdir -p "${pidf%/*}" "${log%/*}"
  rm -f "$pidf"
  printf '==== %s starting %s\n' "$(date -Is)" "${CMD[*]}" >>"$log"
  # 9>&-: the up/down lock must not be inherited, or the component would hold it for its lifetime.
  # 3..8 likewise: a caller's pipes (bats reports on fd 3) would stay open, and the caller would
  # wait for their end as long as the component runs.
  (setsid nohup bash -c 'echo $$ >"$0"; exec "$@"' "$pidf" "${CMD_PREFIX[@]}" "${CMD[@]}" >>"$log" 2>&1 </dev/null \
    3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &)
  # Wait for the exec, so that component_pid (which checks the command line) sees the component.
  local i
  for i in $(seq 50); do component_pid "$name" >/dev/null && return 0; sleep 0.1; done
  fail_component "$name" "did not start within 5s"
}

# Waits until the component is healthy; on failure prints one line naming it and the tail of its
# log, then exits non-zero.
wait_healthy() {
  local name=$1 deadline=$((SECONDS + WAIT_TIMEOUT))
  while ! component_healthy "$name"; do
    if ! component_pid "$name" >/dev/null; then
      fail_component "$name" "exited while starting"
    elif ((SECONDS >= deadline)); then
      fail_component "$name" "not healthy at $(health_url "$name") after ${WAIT_TIMEOUT}s"
    fi
    sleep 0.2
  done
}

fail_component() {
  printf '[cluster] error: %s %s; last 30 lines of %s:\n' "$1" "$2" "$LOG_DIR/$1.log" >&2
  tail -n 30 "$LOG_DIR/$1.log" >&2 || true
  exit 1
}

# SIGTERM, then SIGKILL after $2 seconds (default 10; 0 means SIGKILL at once). Returns once the
# process is gone.
stop_pid() {
  local pid=$1 grace=${2:-10} i
  ((grace > 0)) || kill -KILL "$pid" 2>/dev/null || true
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < grace * 10; i++)); do
    pid_alive "$pid" || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  while pid_alive "$pid"; do sleep 0.1; done
}

# A zombie counts as gone: our components are reparented to PID 1 (or a subreaper), which may be
# slow to reap or, in some containers, never does, and `kill -0` succeeds on a zombie.
pid_alive() {
  local stat
  { stat=$(<"/proc/$1/stat"); } 2>/dev/null || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z ]]
}

stop_component() {
  local pid
  if pid=$(component_pid "$1"); then
    progress "stopping $1 (pid $pid)"
    stop_pid "$pid" "${2:-10}"
  fi
  rm -f "$(pid_file "$1")"
}

# Pids of processes whose command line mentions $CLUSTER_DIR, leaving out this shell and its
# ancestors (a caller such as `bash -c 'down.sh; ls /tmp/dra-cluster'` is not part of the cluster).
cluster_pids() {
  local skip=" " p=$$ pid args
  while [[ $p -gt 1 ]]; do skip+="$p "; p=$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ') || p=1; done
  for pid in /proc/[0-9]*; do
    pid=${pid#/proc/}
    [[ $skip == *" $pid "* ]] && continue
    args=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || continue
    [[ $args == *"$CLUSTER_DIR/"* ]] && echo "$pid"
  done
  return 0
}

# True when the pid runs one of our binaries (from the build cache, or by name for components that
# other scripts may add, e.g. a kubelet), as opposed to, say, `tail -f $CLUSTER_DIR/logs/x.log`.
is_cluster_binary() {
  local exe; exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
  [[ $exe == "$DRA_CACHE_DIR/"* ]] && return 0
  [[ " ${COMPONENTS[*]} kubelet containerd gpu-kubelet-plugin " == *" ${exe##*/} "* ]]
}

source "$HACK_CLUSTER_DIR/components.sh"
