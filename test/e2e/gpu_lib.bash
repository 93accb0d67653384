# shellcheck shell=bash disable=SC2034 # its variables are read by the files that load it
# Helpers for the GPU scenarios (gpu_*.bats). Load after lib.bash. run.sh installs the driver with
# Helm (hack/cluster/helm-driver.sh): node 1 serves the mock h100-8x profile (8 full GPUs), node 2
# a100-mig-4x (MIG devices only). The kubelet plugin is a DaemonSet pod per node; the tests stop,
# restart, kill and reconfigure it through Kubernetes, as an operator would (below).
# Pods choose their node with a nodeSelector, never with nodeName, so that the kube-scheduler
# still allocates their claims.

GPU_NODE=$DRA_NODE_1_NAME
MIG_NODE=${DRA_NODE_2_NAME:-}
DRIVER=gpu.nvidia.com
# The release run.sh installed, and the namespace of its pods (and of the MPS control daemons).
RELEASE=${DRA_HELM_RELEASE:-dra-driver-nvidia-gpu}
DRIVER_NS=${DRA_HELM_NAMESPACE:-nvidia-dra-driver-gpu}
PLUGIN_SELECTOR=dra-driver-nvidia-gpu-component=kubelet-plugin
GPU_LABEL=nvidia.com/gpu.present
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
# Where node <name>'s plugin serves /metrics: its pod's address, port 8080 (the chart's default).
plugin_metrics_url() { echo "http://$(kubectl -n "$DRIVER_NS" get pod "$(plugin_pod "$1")" -o jsonpath='{.status.podIP}'):8080/metrics"; }

# claim_template <name> [class] [extra YAML under "exactly:"], applied in the test namespace.
claim_template() {
  # shellcheck disable=SC2001 # indents every line of the extra YAML
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

# claim <name> [class] [extra YAML under "exactly:"] [config]: a ResourceClaim (shared by whoever
# names it). [config]: the parameters of an opaque config of gpu.nvidia.com for its request, as one
# line of YAML (e.g. "$(ts_config Long)").
claim() {
  # shellcheck disable=SC2001 # indents every line of the extra YAML
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
${4:+$(printf '    config:\n    - requests: [gpu]\n      opaque: {driver: gpu.nvidia.com, parameters: %s}' "$4")}
EOF
}

# ts_config <interval or "">: a GpuConfig that time-slices with that interval ("": no sharing).
ts_config() {
  [[ -n $1 ]] || { echo "{apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig}"; return; }
  echo "{apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: $1}}}"
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
# A `kubectl logs` that fails (the kubelet's log endpoint under load) is retried twice and then
# fails the caller with kubectl's error, instead of reading as "no GPU lines".
gpu_lines() {
  local out try
  for try in 1 2 3; do
    if out=$(k logs "$1" ${2:+-c "$2"} 2>&1); then
      grep -E '^GPU [0-9]+: .*\(UUID: GPU-[0-9a-f-]+\)$' <<<"$out" || true
      return 0
    fi
    echo "kubectl logs $1${2:+ -c $2} failed (try $try of 3): $out" >&2
    ((try == 3)) || sleep 1
  done
  return 1
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

# pod_events_with <pod> <text> [seconds]: waits (60 s unless given) until a message of one of the
# pod's events contains <text>, then prints the messages of all its events; fails printing them.
pod_events_with() {
  local pod=$1 want=$2 deadline=$((SECONDS + ${3:-60})) events=""
  until [[ $events == *"$want"* ]]; do
    ((SECONDS < deadline)) || { echo "events of $pod: '$events'" >&2; return 1; }
    sleep 0.5
    events=$(k get events --field-selector involvedObject.name="$pod" -o jsonpath='{.items[*].message}')
  done
  echo "$events"
}

# Waits until the pod's log has its `nvidia-smi -L` output (Running means started, not printed).
wait_log() {
  local deadline=$((SECONDS + 30))
  until k logs "$1" ${2:+-c "$2"} 2>/dev/null | grep -qE '^(GPU |No devices|[Ee]rror|Failed)'; do
    ((SECONDS < deadline)) || { echo "pod $1 printed nothing" >&2; return 1; }
    sleep 0.3
  done
}

# nudged <pod> <command...>: runs the command; when it fails, annotates the pod and fails. The
# kubelet retries a failed NodePrepareResources only at the pod's next periodic sync (1 min plus up
# to 50 %); any change of the pod object syncs it at once. For use under wait_for.
nudged() {
  local pod=$1
  shift
  "$@" && return 0
  k annotate pod "$pod" --overwrite "e2e-nudge=$(date +%s%N)" >/dev/null 2>&1 || true
  return 1
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
      '.items[] | select(.spec.pool.name == $p) | .spec.devices[]? | select(.name == $d) | .attributes.uuid.string'
}

# "pool/device claim-namespace/claim-name" for every $DRIVER device some ResourceClaim in the
# cluster has allocated (any namespace: a demo's workloads, another file's leftovers).
device_holders() {
  kubectl get resourceclaims -A -o json | jq -r --arg d "$DRIVER" '.items[] |
    "\(.metadata.namespace)/\(.metadata.name)" as $c | .status.allocation.devices.results[]? |
    select(.driver == $d) | "\(.pool)/\(.device) \($c)"' | sort
}

# free_gpus <node>: the node's full GPUs ("pool/device", in index order) that no ResourceClaim
# has allocated and that carry no taint. A test that pins its claim to one GPU (a CEL selector
# on the uuid) must pin a free one: when another claim holds it, the scheduler's retries (one per
# ResourceSlice change, docs/compatibility.md "When a pod runs after a recovery") all fail, and
# the pod waits for that claim to go or for the scheduler's 5-minute flush.
free_gpus() {
  local held
  held=$(device_holders | cut -d' ' -f1 | jq -R . | jq -sc .)
  kubectl get resourceslices -o json --field-selector "spec.nodeName=$1,spec.driver=$DRIVER" |
    jq -r --argjson held "$held" '.items[] | .spec.pool.name as $p | .spec.devices[] |
      select(.attributes.type.string == "gpu" and ((.taints // []) | length) == 0) |
      "\($p)/\(.name)" | select(IN($held[]) | not)' | sort -V
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
  root=$(node_driver_root "$node")
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

# The node's mock driver root on the host (helm-driver.sh prepare-nodes; the plugin pod sees it
# at /run/nvidia/driver), and its fake nvidia-smi (reads the mock NVML state the node's plugin and
# containers see).
node_driver_root() { echo "$(node_var "$(node_idx "$1")" STATE_DIR)/helm-driver-root"; }
node_smi() { local n=$1; shift; "$(node_driver_root "$n")/usr/bin/nvidia-smi" "$@"; }

# --- The kubelet plugin, through Kubernetes ---------------------------------------------------

plugin_pods() { kubectl -n "$DRIVER_NS" get pods -l "$PLUGIN_SELECTOR" "$@"; }
# The plugin pod on node <name> (the newest one, while an old one terminates).
plugin_pod() {
  plugin_pods -o json --field-selector "spec.nodeName=$1" |
    jq -r '[.items[] | select(.metadata.deletionTimestamp == null)] | sort_by(.metadata.creationTimestamp) | last | .metadata.name // empty'
}
# The log of the plugin container (gpus) of node <name>'s plugin pod, since it started.
plugin_logs() { kubectl -n "$DRIVER_NS" logs "$(plugin_pod "$1")" -c gpus; }
# plugin_log_glob <node>: a glob of the gpus container's log files of the node's plugin pod in the
# node's pod-logs folder on the host; they stay readable while the API server is down (resolve the
# glob before it goes).
plugin_log_glob() {
  echo "$(node_var "$(node_idx "$1")" STATE_DIR)/pod-logs/${DRIVER_NS}_$(plugin_pod "$1")_*/gpus/*.log"
}
plugin_restarts() {
  kubectl -n "$DRIVER_NS" get pod "$(plugin_pod "$1")" -o jsonpath='{.status.containerStatuses[?(@.name=="gpus")].restartCount}'
}
# The FEATURE_GATES the DaemonSet gives the plugin container ("A=true,B=false").
plugin_gates() {
  kubectl -n "$DRIVER_NS" get daemonsets -o json | jq -r '.items[].spec.template |
    select(.metadata.labels["dra-driver-nvidia-gpu-component"] == "kubelet-plugin") | .spec.containers[] |
    select(.name == "gpus") | .env[] | select(.name == "FEATURE_GATES") | .value'
}
# Node <name> has a Ready plugin pod, a new one when [old pod] is given, the kubelet has registered
# its current container (the plugin logs the kubelet's NotifyRegistrationStatus; Ready alone only
# says that the sockets answer, and a claim prepared before the registration fails with "driver is
# not registered"), and the node publishes devices.
plugin_ready() {
  local pod; pod=$(plugin_pod "$1")
  [[ -n $pod && $pod != "${2:-}" ]] || return 1
  [[ $(kubectl -n "$DRIVER_NS" get pod "$pod" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]] &&
    kubectl -n "$DRIVER_NS" logs "$pod" -c gpus 2>/dev/null | grep -q '"plugin registered with kubelet"' &&
    (($(slice_device_count "$1") > 0))
}
wait_plugin_ready() {
  wait_for 120 "a Ready plugin pod on $1" plugin_ready "$@" || {
    plugin_pods -o wide >&2; kubectl -n "$DRIVER_NS" describe pods -l "$PLUGIN_SELECTOR" >&2; return 1
  }
}
# restart_plugin <node>: deletes the node's plugin pod (graceful, SIGTERM); the DaemonSet makes a
# new one. Returns when the new pod is Ready.
restart_plugin() {
  local old; old=$(plugin_pod "$1")
  kubectl -n "$DRIVER_NS" delete pod "$old" --wait=true --timeout=60s >/dev/null
  wait_plugin_ready "$1" "$old"
}
# The pid of node $1's gpu-kubelet-plugin process, from the host (its NODE_NAME).
plugin_pid() {
  local p
  for p in $(pgrep -f "(^|/)gpu-kubelet-plugin( |\$)"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "NODE_NAME=$1" && { echo "$p"; return 0; }
  done
  return 1
}
# kill_plugin <node>: SIGKILL to the plugin process, from the host (a crash: no shutdown code
# runs). The kubelet restarts the container in the same pod. Returns when it is Ready again.
kill_plugin() {
  local n=$1 before pid
  before=$(plugin_restarts "$n")
  pid=$(plugin_pid "$n") || { echo "no gpu-kubelet-plugin process of $n found" >&2; return 1; }
  kill -9 "$pid"
  wait_for 90 "the kubelet to restart the plugin container on $n" eval '(( $(plugin_restarts '"$n"') > before ))'
  wait_plugin_ready "$n"
}
# stop_plugin <node> / start_plugin <node>: takes the plugin off the node and back, the way an
# operator does: the DaemonSet's node affinity follows the label nvidia.com/gpu.present.
stop_plugin() {
  kubectl label node "$1" "$GPU_LABEL-" >/dev/null
  wait_for 60 "the plugin pod on $1 to go" eval '[[ -z $(plugin_pods -o name --field-selector spec.nodeName='"$1"') ]]'
}
start_plugin() {
  kubectl label node "$1" "$GPU_LABEL=true" --overwrite >/dev/null
  wait_plugin_ready "$1"
}

# change_driver [HELM ARGS...]: `helm upgrade` of the release with these on top of run.sh's values
# (e.g. --set featureGates.MPSSupport=true), waiting for the rollout; restore_driver (in a
# teardown, so also after a failure) goes back to run.sh's values if a test changed them.
change_driver() {
  touch "$BATS_FILE_TMPDIR/driver-changed"
  "$REPO_ROOT/hack/cluster/helm-driver.sh" install "$@" >&3
}
restore_driver() {
  [[ -f $BATS_FILE_TMPDIR/driver-changed ]] || return 0
  "$REPO_ROOT/hack/cluster/helm-driver.sh" install >&3
  rm -f "$BATS_FILE_TMPDIR/driver-changed"
}

# setup_changed_driver <namespace> [HELM ARGS...] / teardown_changed_driver: the setup_file and
# teardown_file of a file whose tests run with the driver changed (e.g. a feature gate on): its
# namespace, change_driver, the plugin of GPU_NODE ready; then the namespace deleted and the
# driver restored.
setup_changed_driver() {
  make_test_namespace "$1"
  shift
  change_driver "$@"
  wait_plugin_ready "$GPU_NODE"
}
teardown_changed_driver() {
  kubectl delete namespace "$E2E_NS" --wait=true --timeout=120s >/dev/null 2>&1 || true
  restore_driver
}

# --- Our checkpoint, for the reboot test ----------------------------------------------------------

# checkpoint_checksum: "fnv1a64:<16 hex digits>" of the bytes on stdin: FNV-1a 64, which our
# checkpoint stores over the canonical text of its "data" (docs/checkpoint-format.md), the text
# `jq -cjS .data` prints. Computed in two 32-bit halves: bash arithmetic is signed 64-bit.
checkpoint_checksum() {
  local hi=$((0xcbf29ce4)) lo=$((0x84222325)) b a
  for b in $(od -An -v -tu1); do
    lo=$((lo ^ b))
    # h * (2^40 + 0x1b3) mod 2^64 = h * 0x1b3 + (lo << 40); lo << 40 adds lo << 8 to the high half.
    a=$((lo * 0x1b3))
    hi=$(((hi * 0x1b3 + (a >> 32) + (lo << 8)) & 0xFFFFFFFF))
    lo=$((a & 0xFFFFFFFF))
  done
  printf 'fnv1a64:%08x%08x\n' "$hi" "$lo"
}

# set_checkpoint_boot_id <checkpoint.json> <boot id>: the file as a reboot leaves it to the plugin:
# written in another boot, with a valid checksum. Only while the plugin is off. Refuses a file whose
# stored checksum it does not reproduce (jq 1.6 rewrites floats and integers beyond 2^53, which the
# plugin's checkpoints do not hold) rather than write one the plugin would find corrupt.
set_checkpoint_boot_id() {
  local f=$1 id=$2 data
  [[ $(jq -r .checksum "$f") == "$(jq -cjS .data "$f" | checkpoint_checksum)" ]] ||
    { echo "set_checkpoint_boot_id: cannot reproduce the checksum of $f" >&2; return 1; }
  data=$(jq -cS --arg b "$id" '.data.nodeBootID = $b | .data' "$f")
  jq --arg c "$(printf '%s' "$data" | checkpoint_checksum)" --argjson d "$data" \
    '.checksum = $c | .data = $d' "$f" >"$f.tmp"
  mv "$f.tmp" "$f"
}

# --- The public Go driver's checkpoint, for the switch-over test -------------------------------

# go_checksum: FNV-1a 32 of go-spew's rendering "([]uint8)[b0 b1 ...]" of the bytes on stdin, the
# checksum the Go driver stores (docs/checkpoint-format.md, "The public Go driver's checkpoint").
go_checksum() {
  local spew h=2166136261 i c
  spew="([]uint8)[$(od -An -v -tu1 | xargs)]"
  for ((i = 0; i < ${#spew}; i++)); do
    printf -v c '%d' "'${spew:i:1}"
    h=$(((h ^ c) * 16777619 & 0xFFFFFFFF))
  done
  echo "$h"
}

# go_checkpoint_from_ours <our checkpoint.json>: prints the same prepared full-GPU claims as the
# Go driver writes them ("v1" and "v2" with their checksums), written here from the format facts.
go_checkpoint_from_ours() {
  local ours=$1 v2claims v1claims boot c1 c2
  boot=$(jq -r '.data.nodeBootID' "$ours")
  v2claims=$(jq -cj '.data.preparedClaims | map_values({checkpointState: "PrepareCompleted",
      status: {allocation: .allocation},
      preparedDevices: [{devices: [.preparedDevices[] | {gpu: {info: {uuid: .uuid},
        device: {Requests: .requests, PoolName: .pool, DeviceName: .device, CDIDeviceIDs: .cdiDeviceIDs}},
        mig: null}], configState: {}}],
      name: .name, namespace: .namespace})' "$ours")
  v1claims=$(jq -cj 'map_values({status, preparedDevices})' <<<"$v2claims")
  c2=$(jq -cj --arg b "$boot" '{checksum: 0, preparedClaims: ., nodeBootID: $b}' <<<"$v2claims" | go_checksum)
  c1=$(jq -cj '{checksum: 0, v1: {preparedClaims: .}}' <<<"$v1claims" | go_checksum)
  jq -cj --argjson c1 "$c1" --argjson c2 "$c2" --arg b "$boot" --argjson v2 "$v2claims" \
    '{checksum: $c1, v1: {preparedClaims: .}, v2: {checksum: $c2, preparedClaims: $v2, nodeBootID: $b}}' <<<"$v1claims"
}
