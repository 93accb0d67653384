# shellcheck shell=bash disable=SC2034 # its variables are read by the files that load it
# Helpers for the ComputeDomain scenarios (cd_*.bats). Load after lib.bash and gpu_lib.bash.
#
# Nodes 1 and 2 (run.sh: mock H100s and A100s) have no multi-node NVLink fabric, so the
# compute-domain plugin gives them an empty clique ID and they get no IMEX channels. The
# ComputeDomain scenarios start extra nodes (3, 4, ...) whose mock driver root serves the GB200
# profile (gb200-4x: NVLink fabric registered, cluster dd6ffbfa-..., clique 7), prepare them as the
# operator would, let the chart's DaemonSet come to them (helm-driver.sh install is an idempotent
# upgrade that also imports the image into the new nodes), and stop them again at the end, so the
# GPU scenarios find the two nodes they expect.

CD_DRIVER=compute-domain.nvidia.com
CD_LABEL=resource.nvidia.com/computeDomain
CD_PROFILE=gb200-4x
CONTROLLER_SELECTOR=dra-driver-nvidia-gpu-component=controller

# cd_profile <clique id>: a GB200 profile file whose GPUs report fabric clique <clique id>.
cd_profile() {
  local out=$BATS_FILE_TMPDIR/gb200-clique$1.json
  jq --argjson c "$1" '.gpu_defaults.fabric.clique_id = $c' \
    "$REPO_ROOT/test/doubles/profiles/$CD_PROFILE.json" >"$out"
  echo "$out"
}

# cd_nodes_up <first index> <last index> [clique id]: starts local nodes up to <last index>,
# prepares <first>..<last> with the GB200 profile (clique 7 unless given) and waits until both
# plugins publish there. Exports CD_NODES (their names).
cd_nodes_up() {
  local first=$1 last=$2 clique=${3:-7} i names=() profiles=()
  "$REPO_ROOT/hack/cluster/up.sh" --nodes "$last" >&3
  source "$CLUSTER_DIR/nodes.env"
  for ((i = first; i <= last; i++)); do
    names+=("$(node_var "$i" NAME)")
    profiles+=(--profile "$(node_var "$i" NAME)=$(cd_profile "$clique")")
  done
  "$REPO_ROOT/hack/cluster/helm-driver.sh" prepare-nodes --nodes "${names[*]}" "${profiles[@]}" >&3
  "$REPO_ROOT/hack/cluster/helm-driver.sh" install >&3
  for n in "${names[@]}"; do wait_cd_plugin_ready "$n"; done
  CD_NODES="${CD_NODES:+$CD_NODES }${names[*]}"
  export CD_NODES
}

# cd_nodes_down: undoes cd_nodes_up for every node beyond run.sh's two (any test of the file may
# have started more), back to two nodes.
cd_nodes_down() {
  local n names=()
  source "$CLUSTER_DIR/nodes.env"
  for n in $DRA_NODES; do if (($(node_idx "$n") > 2)); then names+=("$n"); fi; done
  ((${#names[@]})) || return 0
  "$REPO_ROOT/hack/cluster/helm-driver.sh" unprepare-nodes --nodes "${names[*]}" >&3 || true
  "$REPO_ROOT/hack/cluster/up.sh" --nodes 2 >&3
  source "$CLUSTER_DIR/nodes.env"
  CD_NODES=
}

# cd_reprofile <node> <clique id>: the node's GPUs now report another clique. prepare-nodes
# restarts the node's plugin pod when the profile changes (the Go driver would re-read the fabric
# only every 10 min); this waits for the new pod.
cd_reprofile() {
  local old; old=$(plugin_pod "$1")
  "$REPO_ROOT/hack/cluster/helm-driver.sh" prepare-nodes --nodes "$1" --profile "$1=$(cd_profile "$2")" >&3
  wait_plugin_ready "$1" "$old"
  wait_cd_plugin_ready "$1"
}

# The compute-domain plugin of node <name> publishes its two devices and the kubelet registered it.
cd_slice_devices() {
  kubectl get resourceslices -o json | jq -r --arg n "$1" --arg d "$CD_DRIVER" \
    '[.items[] | select(.spec.nodeName == $n and .spec.driver == $d) | .spec.devices[].name] | sort | join(",")'
}
cd_plugin_ready() {
  local pod; pod=$(plugin_pod "$1")
  [[ -n $pod ]] && [[ $(cd_slice_devices "$1") == channel-0,daemon-0 ]] &&
    kubectl -n "$DRIVER_NS" logs "$pod" -c compute-domains 2>/dev/null | grep -q '"plugin registered with kubelet"'
}
wait_cd_plugin_ready() {
  wait_for 120 "the compute-domain plugin on $1" cd_plugin_ready "$1" || {
    kubectl -n "$DRIVER_NS" logs "$(plugin_pod "$1")" -c compute-domains --tail=30 >&2; return 1
  }
}

# compute_domain <name> [allocationMode]: the public docs' ComputeDomain, channel template
# <name>-channel.
compute_domain() {
  k apply -f - >/dev/null <<EOF2
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata: {name: $1}
spec:
  numNodes: 0
  channel:
    resourceClaimTemplate: {name: $1-channel}
    allocationMode: ${2:-Single}
EOF2
}
cd_uid() { k get computedomain "$1" -o jsonpath='{.metadata.uid}'; }

# What a workload container prints: how many IMEX channel devices it has, and which of channel0,
# channel222 and channel2047 are there.
CD_LIST='echo channels=$(ls /dev/nvidia-caps-imex-channels 2>/dev/null | wc -l) $(ls /dev/nvidia-caps-imex-channels 2>/dev/null | grep -x -e channel0 -e channel222 -e channel2047 | xargs)'

# cd_workload <pod> <node> <template>: a pod on <node> with one IMEX channel claim from
# <template>; its container prints $CD_LIST, then waits for SIGTERM.
cd_workload() {
  k apply -f - >/dev/null <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  nodeSelector: {kubernetes.io/hostname: $2}
  terminationGracePeriodSeconds: 5
  containers:
  - name: ctr
    image: $DRA_WORKLOAD_IMAGE
    imagePullPolicy: Never
    command: [sh, -c, "$CD_LIST; $SLEEP"]
    resources:
      claims: [{name: imex-channel}]
  resourceClaims:
  - name: imex-channel
    resourceClaimTemplateName: $3
EOF2
}
# The first line the workload printed ("channels=1 channel0").
cd_seen() { k logs "$1" -c ctr 2>/dev/null | head -1; }
DRA_WORKLOAD_IMAGE=${DRA_WORKLOAD_IMAGE:-$WORKLOAD_IMAGE}

# The ComputeDomain's status: "Ready|n1,n2" (status, sorted node names).
cd_status() {
  k get computedomain "$1" -o json |
    jq -r '"\(.status.status // "")|\([.status.nodes[]?.name] | sort | join(","))"'
}
# wait_cd_status <cd> <want> [timeout]: prints the objects involved on timeout.
wait_cd_status() {
  wait_for "${3:-120}" "ComputeDomain $1 to be $2" eval '[[ $(cd_status '"$1"') == "'"$2"'" ]]' || {
    echo "status: $(cd_status "$1")" >&2
    kubectl -n "$DRIVER_NS" get pods,computedomaincliques -o wide >&2
    kubectl -n "$DRIVER_NS" get computedomaincliques -o yaml >&2
    kubectl -n "$DRIVER_NS" describe pods -l "$CD_LABEL=$(cd_uid "$1")" >&2
    # What each daemon logged, and the hosts file its IMEX daemon resolves its peers with.
    kubectl -n "$DRIVER_NS" logs -l "$CD_LABEL=$(cd_uid "$1")" --prefix --tail=40 >&2 || true
    local p
    for p in $(daemon_pods "$(cd_uid "$1")"); do
      echo "$p /etc/hosts:" >&2
      kubectl -n "$DRIVER_NS" exec "${p#pod/}" -- cat /etc/hosts >&2 || true
    done
    return 1
  }
}
# The daemon pods of a ComputeDomain (in the driver namespace), by uid.
daemon_pods() { kubectl -n "$DRIVER_NS" get pods -l "$CD_LABEL=$1" -o name "${@:2}"; }
