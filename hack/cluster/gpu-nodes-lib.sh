# shellcheck shell=bash
# Node selection and GPU-driver checks of helm-driver.sh (the driver from the Helm chart); driver-
# image.sh uses running_nodes. Source it after lib.sh and node-lib.sh; set DEFAULT_PROFILE and
# PROFILES (the --profile arguments) before calling profile_for.
GPU_DRIVER_NAME=gpu.nvidia.com
gpu_nodes_kubectl() { "$K8S_BIN_DIR/kubectl" --kubeconfig="$KUBECONFIG_PATH" --request-timeout=10s "$@"; }

# Nodes whose <component> (default kubelet) runs now, in index order.
running_nodes() {
  local d n component=${1:-kubelet}
  for d in "$RUN_DIR/$NODE_PREFIX"-*; do
    n=${d##*/}
    [[ -d $d ]] && component_pid "$n/$component" >/dev/null && echo "$n"
  done | sort -t- -k3n
}

# --nodes N (the first N running nodes) or names (comma or space separated); none: every running
# node. Dies naming a node that does not run.
select_nodes() {
  local all me=${0##*/}; all=$(running_nodes kubelet)
  [[ -n $all ]] || die "$me: no local node is running; start them with hack/cluster/up.sh --nodes N"
  if [[ -z $1 ]]; then echo "$all"
  elif [[ $1 =~ ^[0-9]+$ ]]; then head -n "$1" <<<"$all"
  else
    local n
    for n in ${1//,/ }; do grep -qx "$n" <<<"$all" || die "$me: node $n is not running"; echo "$n"; done
  fi
}

# The profile of a node from the --profile list ("P" for all, "NODE=P" for one; the last match wins).
profile_for() {
  local n=$1 p want=$DEFAULT_PROFILE
  for p in "${PROFILES[@]}"; do
    if [[ $p == *=* ]]; then [[ ${p%%=*} != "$n" ]] || want=${p#*=}; else want=$p; fi
  done
  echo "$want"
}

# How many devices the node's gpu.nvidia.com slices list (0 when the API server does not answer).
slice_devices() {
  local c
  c=$(gpu_nodes_kubectl get resourceslices -o json \
    --field-selector "spec.nodeName=$1,spec.driver=$GPU_DRIVER_NAME" 2>/dev/null |
    jq '[.items[].spec.devices // [] | length] | add // 0') || c=0
  echo "${c:-0}"
}
