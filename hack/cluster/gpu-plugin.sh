#!/usr/bin/env bash
# Runs the gpu.nvidia.com kubelet plugin on the local nodes (node.sh), the way its DaemonSet would:
# one gpu-kubelet-plugin per node, as a host process inside the node's mount namespace, so that it
# serves /var/lib/kubelet/plugins/gpu.nvidia.com/dra.sock, registers through
# /var/lib/kubelet/plugins_registry and writes CDI specs to /var/run/cdi, all the node's own. The
# GPUs are a mock driver root per node (test/doubles/make-driver-root.sh).
#
#   gpu-plugin.sh up [--profile P | --profile NODE=P ...] [--nodes N | --nodes "NODE ..."]
#                    [--feature-gates GATES] [--arg ARG ...]
#                               plugin running, registered and published on each node; applies the
#                               DeviceClasses. Idempotent: a current plugin is left alone; one
#                               started with other gates or arguments is restarted.
#                               --feature-gates: the plugin's --feature-gates (default
#                               $DRA_GPU_PLUGIN_FEATURE_GATES, else none), e.g.
#                               TimeSlicingSettings=true; --arg: one more plugin argument, e.g.
#                               --arg --consumable-shares=memory (default: the words of
#                               $DRA_GPU_PLUGIN_ARGS). Both are kept per node for start/restart.
#   gpu-plugin.sh args NODE     the extra arguments the node's plugin runs with, one per line
#   gpu-plugin.sh down [--nodes ...]     SIGTERM (sockets removed), slices and driver root deleted
#   gpu-plugin.sh stop [--kill] NODE     SIGTERM (SIGKILL with --kill, sockets stay); keeps the
#                               profile, mock state, checkpoint and slices, like a plugin pod restart
#   gpu-plugin.sh start NODE             starts it again with the same profile
#   gpu-plugin.sh restart [--kill] NODE  both
#   gpu-plugin.sh status        one line per node
# Profiles: test/doubles/profiles/ (h100-8x, a100-mig-4x, t4-2x, gb200-4x); default h100-8x.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_CLUSTER_DIR/node-lib.sh"
source "$HACK_CLUSTER_DIR/gpu-nodes-lib.sh"
REPO_ROOT=$(cd "$HACK_CLUSTER_DIR/../.." && pwd)
GPU_PLUGIN_BIN=${DRA_GPU_PLUGIN_BIN:-$REPO_ROOT/build/default/cmd/gpu-kubelet-plugin/gpu-kubelet-plugin}
# shellcheck disable=SC2034 # read by profile_for (gpu-nodes-lib.sh)
DEFAULT_PROFILE=${DRA_GPU_PROFILE:-h100-8x}
# Node i serves /metrics and /healthz on 127.0.0.1:(GPU_PLUGIN_PORT + 100*(i-1)), beside its kubelet.
GPU_PLUGIN_PORT=${DRA_GPU_PLUGIN_PORT:-10280}
DRIVER=$GPU_DRIVER_NAME
KUBECTL=("$K8S_BIN_DIR/kubectl" --kubeconfig="$KUBECONFIG_PATH" --request-timeout=10s)

plugin_name() { echo "$1/gpu-kubelet-plugin"; }
plugin_log() { echo "$LOG_DIR/$1/gpu-kubelet-plugin.log"; }
plugin_port() { echo $((GPU_PLUGIN_PORT + 100 * ($(node_index "$1") - 1))); }
profile_file() { echo "$RUN_DIR/$1/gpu-plugin.profile"; }
# Extra plugin arguments (feature gates, --consumable-shares, ...), one per line.
args_file() { echo "$RUN_DIR/$1/gpu-plugin.args"; }
# On the host, and at the same path inside the node's namespace (which sees the host's /var/lib).
driver_root() { echo "$NODE_STATE_ROOT/$1/driver-root"; }
# The node's kubelet folders seen from the host (node_binds).
reg_socket() { echo "$NODE_STATE_ROOT/$1/kubelet/plugins_registry/$DRIVER-reg.sock"; }
dra_socket() { echo "$NODE_STATE_ROOT/$1/kubelet/plugins/$DRIVER/dra.sock"; }

# The command line for start_component (lib.sh). A host process has one view of the driver root,
# so the host and container driver roots are the same path; only /proc comes from the mock root.
# MPS control daemons (gate MPSSupport) run the nodes' workload image, which every node has
# loaded (never pulled), in the default namespace.
cmd_gpu_kubelet_plugin() {
  local n=${1%/*} root; root=$(driver_root "${1%/*}")
  # shellcheck disable=SC2034 # read by start_component (lib.sh)
  CMD_PREFIX=(nsenter --mount="$(node_mntns "$n")" --)
  CMD=("$GPU_PLUGIN_BIN" --node-name="$n" --kubeconfig="$KUBECONFIG_PATH"
    --kubelet-plugins-directory-path=/var/lib/kubelet/plugins
    --kubelet-registrar-directory-path=/var/lib/kubelet/plugins_registry --cdi-root=/var/run/cdi
    --nvidia-driver-root="$root" --container-driver-root="$root" --proc-root="$root/proc" --sys-root="$root/sys"
    --http-endpoint="127.0.0.1:$(plugin_port "$n")" --v="${DRA_GPU_PLUGIN_VERBOSITY:-2}"
    --namespace=default --image-name="$WORKLOAD_IMAGE" --image-pull-policy=Never)
  local extra
  if [[ -s $(args_file "$n") ]]; then
    mapfile -t extra <"$(args_file "$n")"
    CMD+=("${extra[@]}")
  fi
}

# Log lines of the current run only (start_component writes a "==== ... starting" marker). Read
# whole: a reader that stops early would fail the pipeline under pipefail.
current_log() {
  local f line; f=$(plugin_log "$1")
  line=$(grep -n '^==== .* starting ' "$f" 2>/dev/null | tail -n 1 | cut -d: -f1)
  tail -n +"${line:-1}" "$f" 2>/dev/null
}

fail_plugin() {
  printf '[cluster] error: %s gpu-kubelet-plugin %s; last 30 lines of %s:\n' "$1" "$2" "$(plugin_log "$1")" >&2
  tail -n 30 "$(plugin_log "$1")" >&2 || true
  exit 1
}

# Ready = /healthz answers, the kubelet confirmed the registration (NotifyRegistrationStatus,
# logged by the plugin) and the node's ResourceSlices list devices.
wait_plugin_ready() {
  local n=$1 deadline=$((SECONDS + WAIT_TIMEOUT)) what
  while :; do
    component_pid "$(plugin_name "$n")" >/dev/null || fail_plugin "$n" "exited while starting"
    if ! curl -sf -m 2 "http://127.0.0.1:$(plugin_port "$n")/healthz" >/dev/null; then what="/healthz"
    elif [[ $(current_log "$n") != *"plugin registered with kubelet"* ]]; then what="kubelet registration"
    elif (($(slice_devices "$n") == 0)); then what="ResourceSlice devices"
    else return 0; fi
    ((SECONDS < deadline)) || fail_plugin "$n" "not ready after ${WAIT_TIMEOUT}s: waiting for $what"
    sleep 0.2
  done
}

# Prints why the running plugin differs from what `up` would start (nothing when it is current).
plugin_drift() {
  local n=$1 pid
  pid=$(component_pid "$(plugin_name "$n")") || { echo "not running"; return 0; }
  [[ -s $(profile_file "$n") && $(<"$(profile_file "$n")") == "$2" ]] || { echo "profile changed"; return 0; }
  component_drift "$pid" "$(plugin_name "$n")"
}

# Stops the plugin. After SIGTERM its sockets must be gone (it removes them on exit); SIGKILL leaves
# them, as a crash does. With no plugin running, stale sockets of an earlier crash are removed when
# $3 says so (down), so that the kubelet stops trying to register them.
stop_plugin() {
  local n=$1 grace=${2:-10} clean_stale=${3:-0} was_running=0 s
  ! component_pid "$(plugin_name "$n")" >/dev/null || was_running=1
  stop_component "$(plugin_name "$n")" "$grace"
  for s in "$(reg_socket "$n")" "$(dra_socket "$n")"; do
    [[ -e $s ]] || continue
    if ((was_running && grace > 0)); then fail_plugin "$n" "left its socket $s behind after SIGTERM"; fi
    ((was_running || !clean_stale)) || rm -f "$s"
  done
}

start_plugin() {
  local n=$1 profile=$2 t=$EPOCHREALTIME
  [[ -x $GPU_PLUGIN_BIN ]] || die "gpu-plugin: no $GPU_PLUGIN_BIN; build it: cmake --build --preset default --target gpu-kubelet-plugin mock_nvml nvidia_smi nvidia_cuda_mps_control"
  progress "$n: mock driver root $(driver_root "$n") (profile $profile)"
  "$REPO_ROOT/test/doubles/make-driver-root.sh" "$profile" "$(driver_root "$n")" >/dev/null
  echo "$profile" >"$(profile_file "$n")"
  progress "$n: starting gpu-kubelet-plugin (log $(plugin_log "$n"), metrics 127.0.0.1:$(plugin_port "$n"))"
  start_component "$(plugin_name "$n")"
  wait_plugin_ready "$n"
  progress "$n: gpu-kubelet-plugin registered, $(slice_devices "$n") devices published in $(elapsed "$t")"
}

lock() {
  exec 9>"$CLUSTER_DIR.lock"
  flock -w 600 9 || die "another cluster script holds $CLUSTER_DIR.lock"
}

cmd_up() {
  local n profile why t=$EPOCHREALTIME
  lock
  for n in $(select_nodes "$1"); do
    profile=$(profile_for "$n")
    mkdir -p "$RUN_DIR/$n"
    if ((${#EXTRA_ARGS[@]})); then printf '%s\n' "${EXTRA_ARGS[@]}"; fi >"$(args_file "$n")"
    why=$(plugin_drift "$n" "$profile")
    if [[ -z $why ]]; then
      progress "$n: gpu-kubelet-plugin already running (pid $(component_pid "$(plugin_name "$n")"), profile $profile)"
      continue
    fi
    if [[ $why != "not running" ]]; then
      progress "$n: gpu-kubelet-plugin outdated ($why), restarting it"
      stop_plugin "$n"
    fi
    start_plugin "$n" "$profile"
  done
  # The chart is the one source of the DeviceClasses: its GPU ones, rendered as helm-driver.sh
  # would install them on this cluster (helm-values.yaml), applied without a release.
  [[ -x $HELM_BIN_DIR/helm ]] || die "gpu-plugin: no helm at $HELM_BIN_DIR/helm; build it: hack/cluster/build.sh helm"
  "$HELM_BIN_DIR/helm" template gpu-plugin "$REPO_ROOT/deployments/helm/dra-driver-nvidia-gpu" \
    --namespace gpu-plugin -f "$HACK_CLUSTER_DIR/helm-values.yaml" \
    --set resources.computeDomains.enabled=false --api-versions resource.k8s.io/v1/DeviceClass \
    --show-only templates/deviceclasses.yaml |
    "${KUBECTL[@]}" apply --server-side --force-conflicts -f - >/dev/null
  progress "GPU driver ready in $(elapsed "$t"); DeviceClasses: $("${KUBECTL[@]}" get deviceclasses -o name | xargs)"
}

# Nodes with anything of a plugin left (a pid file, a driver root), running or half gone.
plugin_nodes() {
  local p
  for p in "$RUN_DIR/$NODE_PREFIX"-*/gpu-kubelet-plugin.pid "$NODE_STATE_ROOT/$NODE_PREFIX"-*/driver-root; do
    [[ -e $p ]] && basename "$(dirname "$p")"
  done | sort -u -t- -k3n
}

cmd_down() {
  local n any=0
  lock
  for n in $(plugin_nodes); do
    [[ -z $1 || " ${1//,/ } " == *" $n "* ]] || continue
    any=1
    if component_pid "$(plugin_name "$n")" >/dev/null; then progress "$n: stopping gpu-kubelet-plugin"; fi
    stop_plugin "$n" 10 1
    # What the kubelet does 30 s after a driver is gone, at once, so nothing allocates from it.
    "${KUBECTL[@]}" delete resourceslices --field-selector "spec.nodeName=$n,spec.driver=$DRIVER" \
      >/dev/null 2>&1 || true
    rm -rf "$(driver_root "$n")" "$(profile_file "$n")" "$(args_file "$n")"
  done
  if ((any)); then progress "GPU plugins down"; else progress "no GPU plugins to stop"; fi
}

# stop/start/restart keep the profile, the driver root (mock state), the checkpoint and the slices,
# as a plugin pod restart or crash (--kill) would.
cmd_stop() {
  local grace=10 n
  [[ ${1:-} != --kill ]] || { grace=0; shift; }
  n=${1:?usage: $0 stop [--kill] NODE}
  lock
  progress "$n: stopping gpu-kubelet-plugin$( ((grace)) || echo " with SIGKILL")"
  stop_plugin "$n" "$grace"
}

cmd_start() {
  local n=${1:?usage: $0 start NODE}
  lock
  [[ -s $(profile_file "$n") ]] || die "gpu-plugin: no plugin was set up on $n (gpu-plugin.sh up)"
  if component_pid "$(plugin_name "$n")" >/dev/null; then
    progress "$n: gpu-kubelet-plugin already running"
  else
    start_plugin "$n" "$(<"$(profile_file "$n")")"
  fi
}

cmd_status() {
  local n pid rc=0
  for n in $(running_nodes); do
    if pid=$(component_pid "$(plugin_name "$n")"); then
      printf '%-12s gpu-kubelet-plugin:up pid %s profile %s devices %s metrics 127.0.0.1:%s\n' "$n" \
        "$pid" "$(cat "$(profile_file "$n")" 2>/dev/null)" "$(slice_devices "$n")" "$(plugin_port "$n")"
    else
      printf '%-12s gpu-kubelet-plugin:down\n' "$n"; rc=1
    fi
  done
  return "$rc"
}

main() {
  local cmd=${1:-} nodes="" gates=${DRA_GPU_PLUGIN_FEATURE_GATES:-} args_given=0
  shift || true
  PROFILES=()
  EXTRA_ARGS=()
  case $cmd in
    stop) cmd_stop "$@"; return ;;
    start) cmd_start "$@"; return ;;
    restart) (cmd_stop "$@") && cmd_start "${@: -1}"; return ;;
    status) cmd_status; return ;;
    args) cat "$(args_file "${1:?usage: $0 args NODE}")" 2>/dev/null || true; return ;;
  esac
  while (($#)); do
    case $1 in
      --nodes) nodes=${2:?--nodes needs a value}; shift 2 ;;
      --profile) PROFILES+=("${2:?--profile needs a value}"); shift 2 ;;
      --feature-gates) gates=${2?--feature-gates needs a value}; shift 2 ;;
      --arg) EXTRA_ARGS+=("${2:?--arg needs a value}"); args_given=1; shift 2 ;;
      *) die "usage: $0 up [--profile P|NODE=P]... [--nodes N|NODES] [--feature-gates G] [--arg A]... | down [--nodes NODES] | stop|start|restart [--kill] NODE | args NODE | status" ;;
    esac
  done
  # shellcheck disable=SC2206 # word splitting of $DRA_GPU_PLUGIN_ARGS is the interface
  ((args_given)) || EXTRA_ARGS=(${DRA_GPU_PLUGIN_ARGS:-})
  [[ -z $gates ]] || EXTRA_ARGS=(--feature-gates="$gates" "${EXTRA_ARGS[@]}")
  case $cmd in
    up) cmd_up "$nodes" ;;
    down) cmd_down "$nodes" ;;
    *) die "usage: $0 up|down|stop|start|restart|args|status (see the header of $0)" ;;
  esac
}

main "$@"
