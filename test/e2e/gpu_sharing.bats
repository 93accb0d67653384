#!/usr/bin/env bats
# GPU sharing on a real node (mock h100-8x on node 1): time-slicing set through the driver root's
# nvidia-smi while a claim is prepared and reset after it, and consumable shares (one GPU
# allocated by the kube-scheduler to two claims). The time-slice the plugin set is read back on
# the host with the fake nvidia-smi of the node's mock driver root, i.e. from the mock NVML state
# the plugin's nvidia-smi runs wrote. Run through run.sh (it starts the plugins with
# TimeSlicingSettings=true).

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace gpu-share
  record_baseline "$GPU_NODE"
  # What the plugin runs with now; the consumable-shares test changes it and puts it back.
  [[ $(plugin_gates) == *TimeSlicingSettings=true* ]] || {
    echo "the plugin runs without TimeSlicingSettings=true (FEATURE_GATES=$(plugin_gates)); run this file through test/e2e/run.sh" >&2
    return 1
  }
}

teardown_file() {
  load lib
  kubectl delete namespace "$E2E_NS" --wait=false >/dev/null 2>&1 || true
}

setup() {
  load lib
  load gpu_lib
}

teardown() {
  clean_node "$GPU_NODE"
  restore_driver
}

host_smi() { node_smi "$GPU_NODE" "$@"; }
# "<compute mode>/<time-slice>" of a GPU, as `nvidia-smi -q` on the host reports it.
gpu_setting() {
  host_smi -q -i "$1" | awk -F': ' '/Compute Mode/ {m=$2} /Compute Timeslice/ {t=$2} END {print m "/" t}'
}
# `compute-policy -l` without the line of GPU $1 (by its index on the host).
other_policies() {
  local idx
  idx=$(host_smi -L | grep -F "(UUID: $1)" | sed -E 's/^GPU ([0-9]+):.*/\1/')
  host_smi compute-policy -l | grep -v "^GPU $idx "
}

# sharing_claim <name> <interval or ""> [extra YAML for the request, indented for "exactly:"]
sharing_claim() { claim "$1" "" "${3:-}" "$(ts_config "$2")"; }

@test "a time-sliced claim shared by two pods: same GPU, time-slice Long on the host, reset after" {
  local before uuid
  before=$(host_smi compute-policy -l)
  sharing_claim ts-gpu Long
  pod pod1 "$GPU_NODE" "gpu=claim:ts-gpu"
  pod pod2 "$GPU_NODE" "gpu=claim:ts-gpu"
  wait_pod_phase pod1 Running 60
  wait_pod_phase pod2 Running 60
  wait_log pod1 && wait_log pod2
  assert_gpus pod1 1
  assert_gpus pod2 1
  uuid=$(gpu_uuids pod1)
  [ "$uuid" = "$(gpu_uuids pod2)" ]
  [ "$uuid" = "$(slice_uuid "$(allocated ts-gpu)")" ]

  # The plugin ran `nvidia-smi -c DEFAULT` and `compute-policy --set-timeslice 3` for that GPU.
  echo "# $uuid: $(gpu_setting "$uuid")" >&3
  [ "$(gpu_setting "$uuid")" = "Default/Long" ]
  # Every other GPU is as it was.
  [ "$(other_policies "$uuid")" = "$(grep -v "^GPU $(host_smi -L | grep -F "(UUID: $uuid)" |
    sed -E 's/^GPU ([0-9]+):.*/\1/') " <<<"$before")" ]
  # The checkpoint records that unprepare must reset it.
  local kubelet_dir
  kubelet_dir=$(node_var "$(node_idx "$GPU_NODE")" KUBELET_DIR)
  [ "$(jq -r --arg u "$uuid" '[.data.preparedClaims[].preparedDevices[] | select(.uuid == $u)
    | .timeSliceApplied] | map(tostring) | join(",")' "$kubelet_dir/plugins/$DRIVER/checkpoint.json")" = true ]

  # After the pods and the claim are gone, the GPU is back to the defaults.
  k delete pods pod1 pod2 --wait=false >/dev/null
  k delete resourceclaim ts-gpu --wait=false >/dev/null
  clean_node "$GPU_NODE"
  [ "$(gpu_setting "$uuid")" = "Default/Default" ]
  [ "$(host_smi compute-policy -l)" = "$before" ]
}

@test "a plain claim leaves the time-slice alone; a bad interval is refused by the API types" {
  sharing_claim plain-gpu ""
  pod pod1 "$GPU_NODE" "gpu=claim:plain-gpu"
  wait_pod_phase pod1 Running 60
  wait_log pod1
  assert_gpus pod1 1
  [ "$(gpu_setting "$(gpu_uuids pod1)")" = "Default/Default" ]

  sharing_claim bad-interval Forever
  pod pod2 "$GPU_NODE" "gpu=claim:bad-interval"
  local events
  events=$(pod_events_with pod2 "unknown time-slice interval")
  echo "# pod2: $(grep -o 'unknown time-slice interval[^"]*' <<<"$events" | head -n1)" >&3
  [ "$(k get pod pod2 -o jsonpath='{.status.phase}')" = Pending ]
}

@test "consumable shares: two claims get the same GPU; equal configs both run, a conflicting one is refused" {
  change_driver --set featureGates.ConsumableShares=true --set consumableShares=memory
  # The claims below pin one GPU, which must be free: a claim that already holds it (a demo's
  # workload, another file's leftover) got it whole, before the upgrade, and no share fits beside
  # it; the scheduler would retry pa at every slice change and fail each time.
  local gpu
  gpu=$(free_gpus "$GPU_NODE" | head -n 1)
  [ -n "$gpu" ] || { echo "no free GPU on $GPU_NODE; allocated: $(device_holders)"; false; }
  gpu=${gpu#*/}
  # The slice now announces shareable devices with a memory request policy.
  local dev deadline=$((SECONDS + 30))
  until dev=$(kubectl get resourceslices -o json --field-selector "spec.nodeName=$GPU_NODE,spec.driver=$DRIVER" |
    jq -c --arg g "$gpu" '.items[].spec.devices[] | select(.name == $g)') &&
    [[ $(jq -r '.allowMultipleAllocations' <<<"$dev") == true ]]; do
    ((SECONDS < deadline)) || { echo "$gpu not shareable in the slice: $dev"; false; }
    sleep 0.5
  done
  echo "# $gpu memory: $(jq -c '.capacity.memory' <<<"$dev")" >&3
  [ "$(jq -r '.capacity.memory.requestPolicy.validRange.step' <<<"$dev")" = 1Mi ]
  [ "$(jq -r '.capacity.memory.requestPolicy.default' <<<"$dev")" = "$(jq -r '.capacity.memory.value' <<<"$dev")" ]

  # Three claims for 8Gi of the same GPU each; a and b configure it alike, c differently.
  local uuid sel
  uuid=$(jq -r '.attributes.uuid.string' <<<"$dev")
  sel=$(printf 'capacity: {requests: {memory: 8Gi}}\nselectors: [{cel: {expression: "device.attributes[%s].uuid == %s"}}]' \
    "'gpu.nvidia.com'" "'$uuid'")
  sharing_claim share-a Medium "$sel"
  sharing_claim share-b Medium "$sel"
  sharing_claim share-c Short "$sel"
  pod pa "$GPU_NODE" "gpu=claim:share-a"
  pod pb "$GPU_NODE" "gpu=claim:share-b"
  wait_pod_phase pa Running 60 || { echo "allocated: $(device_holders)"; false; }
  wait_pod_phase pb Running 60 || { echo "allocated: $(device_holders)"; false; }
  wait_log pa && wait_log pb
  assert_gpus pa 1
  assert_gpus pb 1
  [ "$(gpu_uuids pa)" = "$uuid" ]
  [ "$(gpu_uuids pb)" = "$uuid" ]
  # The scheduler allocated that GPU to both claims, each with its share of the memory.
  [ "$(allocated share-a)" = "$GPU_NODE/$gpu" ]
  [ "$(allocated share-b)" = "$GPU_NODE/$gpu" ]
  local r
  for c in share-a share-b; do
    r=$(k get resourceclaim "$c" -o json | jq -c '.status.allocation.devices.results[0]')
    echo "# $c: $r" >&3
    [ "$(jq -r '.consumedCapacity.memory' <<<"$r")" = 8Gi ]
    [ -n "$(jq -r '.shareID // empty' <<<"$r")" ]
  done
  [ "$(gpu_setting "$uuid")" = "Default/Medium" ]

  # share-c is allocated the same GPU too, but its prepare is refused.
  pod pc "$GPU_NODE" "gpu=claim:share-c"
  local events cuid
  events=$(pod_events_with pc "conflicting configuration with already prepared claim")
  echo "# pc: $(grep -o 'requested device [^"]*claim [0-9a-f-]*' <<<"$events" | head -n1)" >&3
  [[ $events == *"requested device $gpu has conflicting configuration with already prepared claim"* ]]
  [ "$(allocated share-c)" = "$GPU_NODE/$gpu" ]
  [ "$(k get pod pc -o jsonpath='{.status.phase}')" = Pending ]
  [ "$(gpu_setting "$uuid")" = "Default/Medium" ]

  # Reference counting: the GPU keeps its time-slice while one claim still holds it.
  k delete pod pa --wait=true --timeout=60s >/dev/null
  k delete resourceclaim share-a --wait=true --timeout=60s >/dev/null
  cuid=$(k get resourceclaim share-b -o jsonpath='{.metadata.uid}')
  deadline=$((SECONDS + 30))
  until [[ $(checkpoint_claims "$GPU_NODE") == $(($(base_cp "$GPU_NODE") + 1)) ]]; do
    ((SECONDS < deadline)) || { echo "share-a not unprepared"; false; }
    sleep 0.3
  done
  [ -f "$(cdi_spec "$GPU_NODE" "$cuid")" ]
  [ "$(gpu_setting "$uuid")" = "Default/Medium" ]
  k delete pods pb pc --wait=false >/dev/null
  k delete resourceclaims --all --wait=false >/dev/null
  clean_node "$GPU_NODE"
  [ "$(gpu_setting "$uuid")" = "Default/Default" ]
}
