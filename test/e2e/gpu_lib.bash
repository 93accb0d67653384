# Helpers for the GPU scenarios (gpu_*.bats). Load after lib.bash. run.sh starts the plugins:
# node 1 serves the mock h100-8x profile (8 full GPUs), node 2 a100-mig-4x (MIG devices only).
# Pods choose their node with a nodeSelector, never with nodeName, so that the kube-scheduler
# still allocates their claims.

GPU_NODE=$DRA_NODE_1_NAME
MIG_NODE=${DRA_NODE_2_NAME:-}
DRIVER=gpu.nvidia.com
# What the quickstart containers run after printing their GPUs: wait for SIGTERM, exit at once.
SLEEP="trap 'exit 0' TERM; sleep 9999 & wait"

k() { kubectl -n "$E2E_NS" "$@"; }

# Index of a node name in nodes.env (dra-node-2 -> 2).
node_idx() { echo "${1##*-}"; }
# The single-GPU claim `gpu` of pod <pod> on $GPU_NODE: allocated to one GPU of the node's pool,
# the GPU the container sees is the one the slice announced under that name, and the claim's CDI
# spec is on the node. Prints the claim's UID.
assert_one_gpu_claim() {
  local claim devs uid
  claim=$(claim_of "$1" gpu)
  devs=$(allocated "$claim")
  [[ $devs =~ ^$GPU_NODE/gpu-[0-9]+$ ]] || { echo "allocated: $devs" >&2; return 1; }
  [ "$(gpu_uuids "$1")" = "$(slice_uuid "$devs")" ] || { echo "$1 sees another GPU than $devs" >&2; return 1; }
  uid=$(k get resourceclaim "$claim" -o jsonpath='{.metadata.uid}')
  [ -f "$(cdi_spec "$GPU_NODE" "$uid")" ] || { echo "no CDI spec for claim $uid" >&2; return 1; }
  echo "$uid"
}
# Where node <name>'s plugin serves /metrics and /healthz: hack/cluster/gpu-plugin.sh's rule.
plugin_port() { echo $((${DRA_GPU_PLUGIN_PORT:-10280} + 100 * ($(node_idx "$1") - 1))); }

# claim_template <name> [class] [extra YAML under "exactly:"], applied in the test namespace.
claim_template() {
  k apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $1}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: ${2:-gpu.nvidia.com}
${3:+$(sed 's/^/          /' <<<"$3")}
EOF
}

# claim <name> [class] [extra YAML under "exactly:"]: a ResourceClaim (shared by whoever names it).
claim() {
  k apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: ${2:-gpu.nvidia.com}
${3:+$(sed 's/^/        /' <<<"$3")}
EOF
}

# pod_yaml <name> <node> <claims> [containers] [restartPolicy] [command]: a workload pod on <node>
# whose containers print `nvidia-smi -L` and then wait for SIGTERM (or run [command]).
#   claims:     "gpu=template:single-gpu shared=claim:one-gpu" (pod claim = source)
#   containers: "ctr0=gpu,shared ctr1=gpu" (container = the pod claims it uses); default: one
#               container "ctr" with every claim
pod_yaml() {
  local name=$1 node=$2 claims=$3 ctrs=${4:-} policy=${5:-Always} cmd=${6:-"nvidia-smi -L; $SLEEP"} c
  [[ -n $ctrs ]] || ctrs="ctr=$(for c in $claims; do printf '%s,' "${c%%=*}"; done | sed 's/,$//')"
  printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s, labels: {app: %s}}\nspec:\n' "$name" "$name"
  printf '  restartPolicy: %s\n  terminationGracePeriodSeconds: 5\n' "$policy"
  printf '  nodeSelector: {kubernetes.io/hostname: %s}\n  resourceClaims:\n' "$node"
  for c in $claims; do
    case ${c#*=} in
      template:*) printf '  - {name: %s, resourceClaimTemplateName: %s}\n' "${c%%=*}" "${c#*=template:}" ;;
      claim:*) printf '  - {name: %s, resourceClaimName: %s}\n' "${c%%=*}" "${c#*=claim:}" ;;
    esac
  done
  [[ -z ${INIT_SLEEP:-} ]] || printf '  initContainers:\n  - {name: init, image: %s, imagePullPolicy: Never, command: [sleep, "%s"]}\n' \
    "$DRA_WORKLOAD_IMAGE" "$INIT_SLEEP"
  printf '  containers:\n'
  for c in $ctrs; do
    printf '  - name: %s\n    image: %s\n    imagePullPolicy: Never\n' "${c%%=*}" "$DRA_WORKLOAD_IMAGE"
    printf '    command: ["sh", "-c", "%s"]\n' "$cmd"
    printf '    resources: {claims: [%s]}\n' "$(tr ',' '\n' <<<"${c#*=}" | sed 's/.*/{name: &}/' | paste -sd,)"
  done
}

pod() { pod_yaml "$@" | k apply -f - >/dev/null; }

# Lines of `nvidia-smi -L` that name a full GPU, from the pod's log (container $2 if given).
gpu_lines() {
  k logs "$1" ${2:+-c "$2"} | grep -E '^GPU [0-9]+: .*\(UUID: GPU-[0-9a-f-]+\)$' || true
}
gpu_uuids() { gpu_lines "$@" | grep -oE 'GPU-[0-9a-f-]+'; }

# Fails (printing the log) unless the container saw exactly $2 GPUs.
assert_gpus() {
  local pod=$1 want=$2 ctr=${3:-} got
  got=$(gpu_lines "$pod" "$ctr" | grep -c . || true)
  ((got == want)) && return 0
  echo "pod $pod${ctr:+ container $ctr} sees $got GPUs, want $want; its log:" >&2
  k logs "$pod" ${ctr:+-c "$ctr"} >&2 || true
  return 1
}

# Waits until the pod's log has its `nvidia-smi -L` output (Running means started, not printed).
wait_log() {
  local deadline=$((SECONDS + 30))
  until k logs "$1" ${2:+-c "$2"} 2>/dev/null | grep -qE '^(GPU |No devices|[Ee]rror|Failed)'; do
    ((SECONDS < deadline)) || { echo "pod $1 printed nothing" >&2; return 1; }
    sleep 0.3
  done
}

# The ResourceClaim behind a pod's claim entry (generated from a template, or named).
claim_of() {
  k get pod "$1" -o json |
    jq -r --arg c "$2" '(.status.resourceClaimStatuses // [] | map(select(.name == $c)) | .[0].resourceClaimName)
      // (.spec.resourceClaims[] | select(.name == $c) | .resourceClaimName)'
}

# "pool/device" of every device allocated to a claim.
allocated() { k get resourceclaim "$1" -o json | jq -r '.status.allocation.devices.results[]? | "\(.pool)/\(.device)"'; }

# The uuid attribute the ResourceSlice publishes for pool/device.
slice_uuid() {
  kubectl get resourceslices -o json --field-selector "spec.driver=$DRIVER" |
    jq -r --arg p "${1%%/*}" --arg d "${1#*/}" \
      '.items[] | select(.spec.pool.name == $p) | .spec.devices[] | select(.name == $d) | .attributes.uuid.string'
}

slice_device_count() {
  kubectl get resourceslices -o json --field-selector "spec.nodeName=$1,spec.driver=$DRIVER" |
    jq '[.items[].spec.devices | length] | add // 0'
}

# The node's transient CDI specs (its /var/run/cdi) and its checkpoint, from the host.
cdi_dir() { node_var "$(node_idx "$1")" CDI_DYNAMIC_DIR; }
cdi_spec() { echo "$(cdi_dir "$1")/k8s.gpu.nvidia.com-claim_$2.json"; }
cdi_specs() { find "$(cdi_dir "$1")" -maxdepth 1 -name 'k8s.gpu.nvidia.com-claim_*' | sort; }
checkpoint_claims() {
  jq '.data.preparedClaims | length' "$(node_var "$(node_idx "$1")" KUBELET_DIR)/plugins/$DRIVER/checkpoint.json"
}
plugin_log() { echo "$CLUSTER_DIR/logs/$1/gpu-kubelet-plugin.log"; }

# What the node has prepared before this file's tests (a demo's pods, say), in BASE_{CDI,CP}_<node>,
# for setup_file. The tests count what they add on top.
record_baseline() {
  export "BASE_CDI_${1//-/_}=$(cdi_specs "$1" | grep -c . || true)" \
    "BASE_CP_${1//-/_}=$(checkpoint_claims "$1")"
}
base_cdi() { local v="BASE_CDI_${1//-/_}"; echo "${!v:-0}"; }
base_cp() { local v="BASE_CP_${1//-/_}"; echo "${!v:-0}"; }
cdi_count() { cdi_specs "$1" | grep -c . || true; }

# Deletes the test's workloads and waits until the node is back to its baseline: no claims left
# in the namespace, no more CDI specs and checkpoint entries than before the file's tests.
clean_node() {
  local node=${1:-$GPU_NODE} deadline=$((SECONDS + 60))
  k delete deployments,jobs,pods --all --wait=false >/dev/null 2>&1 || true
  k delete resourceclaims --all --wait=false >/dev/null 2>&1 || true
  until [[ -z $(k get pods,resourceclaims -o name 2>/dev/null) && $(cdi_count "$node") == "$(base_cdi "$node")" &&
    $(checkpoint_claims "$node") == "$(base_cp "$node")" ]]; do
    if ((SECONDS >= deadline)); then
      echo "node $node not back to its baseline ($(base_cdi "$node") CDI specs, $(base_cp "$node") prepared) after 60s:" >&2
      k get pods,resourceclaims >&2 || true
      cdi_specs "$node" >&2
      echo "checkpoint claims: $(checkpoint_claims "$node")" >&2
      return 1
    fi
    sleep 0.3
  done
}

# Test-only sabotage for the isolation check (README "e2e"): DRA_E2E_BREAK_CDI=drop-gpu rewrites
# the claim's CDI spec as soon as the plugin writes it, dropping the /dev/nvidia<minor> nodes;
# =all-gpus adds every GPU node of the mock root. The pod gets a 3 s init container so that the
# workload container is created from the edited spec. The product is not involved.
sabotage_cdi() {
  local node=$1 mode=$2 deadline=$((SECONDS + 30)) f root before
  root=$(node_var "$(node_idx "$node")" KUBELET_DIR)/../driver-root
  before=$(cdi_specs "$node")
  until f=$(comm -13 <(echo "$before") <(cdi_specs "$node") | grep . | head -n1) && [[ -n $f ]]; do
    ((SECONDS < deadline)) || return 0
    sleep 0.05
  done
  case $mode in
    drop-gpu) jq '.devices[].containerEdits |= (.deviceNodes |= map(select(.path | test("^/dev/nvidia[0-9]+$") | not))
                | .env = ["DRA_E2E_SABOTAGED=1"])' "$f" >"$f.tmp" ;;
    all-gpus) jq --argjson extra "$(for d in "$root"/dev/nvidia[0-9]*; do
                jq -n --arg p "/dev/${d##*/}" --arg h "$(realpath "$d")" '{path: $p, hostPath: $h}'; done | jq -s .)" \
                '.devices[].containerEdits.deviceNodes |= map(select(.path | test("^/dev/nvidia[0-9]+$") | not)) + $extra' \
                "$f" >"$f.tmp" ;;
  esac
  mv -f "$f.tmp" "$f"
  echo "# sabotaged $f ($mode)" >&3
}

# The node's mock driver root on the host, and its fake nvidia-smi (reads the mock NVML state the
# node's plugin and containers see).
node_driver_root() { echo "$(node_var "$(node_idx "$1")" KUBELET_DIR)/../driver-root"; }
node_smi() { local n=$1; shift; "$(node_driver_root "$n")/usr/bin/nvidia-smi" "$@"; }

# plugin_with_args NODE [ARG...]: (re)starts the node's plugin, same profile, with exactly these
# extra arguments (gpu-plugin.sh up --arg ...). save_plugin_args NODE FILE keeps the current ones
# for restore_plugin_args NODE FILE (in a teardown).
plugin_with_args() {
  local node=$1 a args=()
  shift
  for a in "$@"; do args+=(--arg "$a"); done
  DRA_GPU_PLUGIN_ARGS="" DRA_GPU_PLUGIN_FEATURE_GATES="" "$REPO_ROOT/hack/cluster/gpu-plugin.sh" up \
    --nodes "$node" --profile "$node=$(cat "$RUN_DIR/$node/gpu-plugin.profile")" "${args[@]}" >&3
}
save_plugin_args() { "$REPO_ROOT/hack/cluster/gpu-plugin.sh" args "$1" >"$2"; }
restore_plugin_args() {
  local saved
  mapfile -t saved <"$2"
  plugin_with_args "$1" "${saved[@]}"
}

# change_plugin_args NODE [ARG...]: plugin_with_args, after keeping the arguments the node's plugin
# ran with before the first change of this test file; restore_changed_plugin NODE (in teardown,
# so also after a failure) puts those back if a test changed them.
change_plugin_args() {
  local saved=$BATS_FILE_TMPDIR/plugin-args-$1
  [[ -f $saved ]] || save_plugin_args "$1" "$saved"
  touch "$BATS_FILE_TMPDIR/plugin-changed-$1"
  plugin_with_args "$@"
}
restore_changed_plugin() {
  [[ -f $BATS_FILE_TMPDIR/plugin-changed-$1 ]] || return 0
  restore_plugin_args "$1" "$BATS_FILE_TMPDIR/plugin-args-$1"
  rm -f "$BATS_FILE_TMPDIR/plugin-changed-$1"
}
