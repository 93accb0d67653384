#!/usr/bin/env bash
# Starts and stops local Kubernetes nodes (containerd + kubelet each, see node-lib.sh) registered
# with the control plane of up.sh, which it starts first when needed.
#
#   node.sh up [--nodes N]   nodes dra-node-1..N Ready (default: as many as run now, at least 1);
#                            extra running nodes are stopped. Idempotent.
#   node.sh down             stops every node: processes, mounts, cgroups, addresses, Node objects
#   node.sh status           one line per node; exits 0 only when all are Ready
#   node.sh restart-kubelet [--kill] NODE   restarts only that kubelet (pods keep running), as a
#                            kubelet upgrade or crash would; --kill sends SIGKILL
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_CLUSTER_DIR/pki.sh"
source "$HACK_CLUSTER_DIR/node-lib.sh"
source "$HACK_CLUSTER_DIR/node-host.sh"
export PATH=$CONTAINERD_BIN_DIR:$PATH # containerd finds containerd-shim-runc-v2 on PATH
KUBECTL=("$K8S_BIN_DIR/kubectl" --kubeconfig="$KUBECONFIG_PATH" --request-timeout=10s)

apiserver_up() { component_pid kube-apiserver >/dev/null && component_healthy kube-apiserver; }

# Names of nodes that have anything left on this machine (pid files, folders, cgroups).
existing_nodes() {
  local p
  for p in "$RUN_DIR/$NODE_PREFIX"-* "$NODE_RUN_ROOT/$NODE_PREFIX"-* "$NODE_STATE_ROOT/$NODE_PREFIX"-* \
    "$CLUSTER_DIR/nodes/$NODE_PREFIX"-* /sys/fs/cgroup/*/"$NODE_PREFIX"-*; do
    [[ -e $p ]] && echo "${p##*/}"
  done | sort -u -t- -k3n
}

# What a running node was started with; a change (a setting in node-config.sh, a rebuilt image,
# the folder layout of node_binds) restarts the node.
config_digest() {
  # The node images only (pause, workload): the driver image is imported by helm-driver.sh and
  # changes with every build, which must not restart running nodes.
  { cat "$(node_conf_dir "$1")"/{containerd.toml,kubelet.yaml,kubelet.kubeconfig} "$IMAGES_DIR"/{pause,workload}-*.digest
    node_binds "$1"; } | sha256sum | cut -c1-16
}

write_configs() {
  mkdir -p "$(node_conf_dir "$1")"
  node_pki "$1"
  write_containerd_config "$1"
  write_cni_config "$1"
  write_kubelet_config "$1"
}

node_running() {
  local c pid
  [[ -s $RUN_DIR/$1/config.digest && $(<"$RUN_DIR/$1/config.digest") == "$(config_digest "$1")" ]] || return 1
  for c in containerd kubelet; do
    pid=$(component_pid "$1/$c") && component_healthy "$1/$c" && [[ -z $(component_drift "$pid" "$1/$c") ]] ||
      return 1
  done
}

start_node() {
  local n=$1 t=$EPOCHREALTIME
  progress "$n: preparing (ip $(node_ip "$n"), kubelet port $(node_port "$n"), pods $POD_NET.$(node_index "$n").0/24)"
  write_configs "$n"
  host_setup_node "$n"
  progress "$n: starting containerd (log $LOG_DIR/$n/containerd.log)"
  start_component "$n/containerd"
  wait_healthy "$n/containerd"
  progress "$n: importing images $PAUSE_IMAGE $WORKLOAD_IMAGE"
  "$HACK_CLUSTER_DIR/images.sh" import "$(node_socket "$n")" "$NODE_SNAPSHOTTER"
  progress "$n: starting kubelet (log $LOG_DIR/$n/kubelet.log)"
  start_component "$n/kubelet"
  wait_healthy "$n/kubelet"
  config_digest "$n" >"$RUN_DIR/$n/config.digest"
  progress "$n: kubelet healthy in $(elapsed "$t")"
}

# Stops a node and removes every trace of it, whatever state it is in.
stop_node() {
  local n=$1
  stop_component "$n/kubelet"
  # Containers first, while their shims still run and reap them.
  kill_node_cgroup_procs "$n"
  stop_component "$n/containerd"
  kill_node_ns_procs "$n"
  kill_node_cgroup_procs "$n"
  host_teardown_node "$n"
  rm -rf "$(node_conf_dir "$n")" "${RUN_DIR:?}/$n"
  # A node that comes back under the same name starts empty, as its pods are gone.
  if apiserver_up; then
    "${KUBECTL[@]}" delete node "$n" --ignore-not-found --wait=false >/dev/null || true
    "${KUBECTL[@]}" delete pods -A --field-selector "spec.nodeName=$n" --force --grace-period=0 \
      >/dev/null 2>&1 || true
  fi
}

ensure_node() {
  local n=$1
  [[ ! -d $(node_conf_dir "$n") ]] || write_configs "$n"
  if node_running "$n"; then
    progress "$n: already running (kubelet pid $(component_pid "$n/kubelet"))"
    return 0
  fi
  if existing_nodes | grep -qx "$n"; then
    progress "$n: incomplete or outdated, restarting it from scratch"
    stop_node "$n"
  fi
  start_node "$n"
}

wait_ready() {
  local n=$1 deadline=$((SECONDS + WAIT_TIMEOUT)) st
  while :; do
    st=$("${KUBECTL[@]}" get node "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) || st=
    [[ $st == True ]] && return 0
    component_pid "$n/kubelet" >/dev/null || fail_component "$n/kubelet" "exited before node $n was Ready"
    ((SECONDS < deadline)) || fail_component "$n/kubelet" "node $n not Ready after ${WAIT_TIMEOUT}s (Ready=$st)"
    sleep 0.5
  done
}

cmd_up() {
  local want=$1 i n t=$EPOCHREALTIME
  # Idempotent and quick when the control plane is current; it also builds what is missing.
  [[ ${DRA_CONTROL_PLANE_CHECKED:-0} == 1 ]] || "$HACK_CLUSTER_DIR/up.sh"
  exec 9>"$CLUSTER_DIR.lock"
  flock -w 600 9 || die "another up.sh/down.sh/node.sh holds $CLUSTER_DIR.lock"
  if [[ -z $want ]]; then
    want=$(existing_nodes | grep -c . || true)
    ((want > 0)) || want=1
  fi
  ((want >= 1 && want <= NODE_MAX)) || die "--nodes must be 1..$NODE_MAX"
  "$HACK_CLUSTER_DIR/images.sh" build >/dev/null
  host_setup_shared
  for n in $(existing_nodes); do
    (($(node_index "$n") <= want)) || { progress "$n: beyond --nodes $want, stopping it"; stop_node "$n"; }
  done
  for ((i = 1; i <= want; i++)); do ensure_node "$(node_name "$i")"; done
  for ((i = 1; i <= want; i++)); do wait_ready "$(node_name "$i")"; done
  write_nodes_env "$want"
  progress "$want node(s) Ready in $(elapsed "$t"): ${KUBECTL[*]:0:2} get nodes"
}

cmd_down() {
  local n t=$EPOCHREALTIME any=0
  exec 9>"$CLUSTER_DIR.lock"
  flock -w 600 9 || die "another up.sh/down.sh/node.sh holds $CLUSTER_DIR.lock"
  for n in $(existing_nodes); do
    any=1
    progress "$n: stopping"
    stop_node "$n"
  done
  host_teardown_shared
  verify_nodes_gone
  rm -f "$CLUSTER_DIR/nodes.env"
  if ((any)); then progress "nodes down in $(elapsed "$t")"; else progress "no nodes running"; fi
}

cmd_status() {
  local n rc=0 c line ready
  for n in $(existing_nodes); do
    line=$(printf '%-12s' "$n")
    for c in containerd kubelet; do
      if component_pid "$n/$c" >/dev/null && component_healthy "$n/$c"; then line+=" $c:up"; else line+=" $c:down"; rc=1; fi
    done
    ready=$("${KUBECTL[@]}" get node "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) || ready='?'
    [[ $ready == True ]] || rc=1
    echo "$line Ready:$ready ip:$(node_ip "$n") port:$(node_port "$n") socket:$(node_socket "$n")"
  done
  [[ -n $(existing_nodes) ]] || { echo "no nodes"; rc=1; }
  return "$rc"
}

cmd_restart_kubelet() {
  local grace=10 n t=$EPOCHREALTIME
  [[ ${1:-} != --kill ]] || { grace=0; shift; }
  n=${1:?usage: $0 restart-kubelet [--kill] NODE}
  exec 9>"$CLUSTER_DIR.lock"
  flock -w 600 9 || die "another up.sh/down.sh/node.sh holds $CLUSTER_DIR.lock"
  component_pid "$n/containerd" >/dev/null || die "$n is not running; start it with $0 up"
  stop_component "$n/kubelet" "$grace"
  start_component "$n/kubelet"
  wait_healthy "$n/kubelet"
  wait_ready "$n"
  progress "$n: kubelet restarted and Ready in $(elapsed "$t")"
}

main() {
  local cmd=${1:-} nodes=""
  shift || true
  [[ $cmd != restart-kubelet ]] || { cmd_restart_kubelet "$@"; return; }
  while (($#)); do
    case $1 in
      --nodes) nodes=${2:?--nodes needs a number}; shift 2 ;;
      --nodes=*) nodes=${1#*=}; shift ;;
      *) die "usage: $0 up [--nodes N] | down | status | restart-kubelet [--kill] NODE" ;;
    esac
  done
  [[ -z $nodes || $nodes =~ ^[0-9]+$ ]] || die "--nodes must be a number"
  case $cmd in
    up) cmd_up "$nodes" ;;
    down) cmd_down ;;
    status) cmd_status ;;
    *) die "usage: $0 up [--nodes N] | down | status | restart-kubelet [--kill] NODE" ;;
  esac
}

main "$@"
