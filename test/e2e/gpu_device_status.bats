#!/usr/bin/env bats
# Device status on claims (KEP-4817, docs/prepare-flow.md "Device status"): once the plugin has
# prepared a claim, the claim's status.devices shows, for each allocated device, the physical GPU
# (data.uuid = what `nvidia-smi -L` prints in the container, data.productName; for MIG the parent
# UUID and the profile) with a Ready condition, written by the plugin's own field manager; the
# plugin removes its entries when it unprepares the claim. Both happen in the background, shortly
# after the kubelet's call returned (lib/gpuplugin/status/device_status_queue.h), so the test waits for them.
# Node 1: mock h100-8x; node 2: a100-mig-4x. Run through run.sh.

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace gpu-status
  record_baseline "$GPU_NODE"
  [[ -z $MIG_NODE ]] || record_baseline "$MIG_NODE"
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
  [[ -z $MIG_NODE ]] || clean_node "$MIG_NODE"
}

# This driver's status.devices entries of claim $1, one JSON object per line.
our_entries() {
  k get resourceclaim "$1" -o json | jq -c --arg d "$DRIVER" '.status.devices[]? | select(.driver == $d)'
}
no_entries() { [[ -z $(our_entries "$1") ]]; }
# The plugin's count of status removals that reached the API server on node $1.
removals() {
  curl -sf -m 5 "$(plugin_metrics_url "$1")" |
    awk '/^nvidia_dra_device_status_writes_total\{operation="remove",result="success"\}/ {print $2; f=1} END {if (!f) print 0}'
}
# Fails (printing the entries) unless claim $1 has one entry of this driver for device $2 with
# data.uuid $3 and a Ready=True condition, written by the field manager of node $4.
assert_entry() {
  local claim=$1 device=$2 uuid=$3 node=$4 entries
  entries=$(our_entries "$claim")
  [ "$(grep -c . <<<"$entries")" -eq 1 ] || { echo "entries of $claim: $entries" >&2; return 1; }
  [ "$(jq -r .device <<<"$entries")" = "$device" ] || { echo "entry: $entries" >&2; return 1; }
  [ "$(jq -r .pool <<<"$entries")" = "$node" ] || { echo "entry: $entries" >&2; return 1; }
  [ "$(jq -r .data.uuid <<<"$entries")" = "$uuid" ] || { echo "entry: $entries, want uuid $uuid" >&2; return 1; }
  [ "$(jq -r '.conditions[] | select(.type == "Ready") | .status' <<<"$entries")" = True ] ||
    { echo "no Ready=True condition: $entries" >&2; return 1; }
  k get resourceclaim "$claim" --show-managed-fields -o json |
    jq -e --arg m "$DRIVER/$node" '[.metadata.managedFields[] | select(.manager == $m and .subresource == "status")] | length == 1' >/dev/null ||
    { echo "no status field manager $DRIVER/$node on $claim" >&2; return 1; }
}

@test "a shared claim shows the pod's GPU with Ready while prepared, and nothing after its last pod" {
  claim shared-gpu
  pod pod1 "$GPU_NODE" "gpu=claim:shared-gpu"
  pod pod2 "$GPU_NODE" "gpu=claim:shared-gpu"
  wait_pod_phase pod1 Running 60
  wait_pod_phase pod2 Running 60
  wait_log pod1
  assert_gpus pod1 1
  local uuid dev before
  uuid=$(gpu_uuids pod1)
  dev=$(allocated shared-gpu)
  # The plugin writes the entries in the background after its prepare returned
  # (lib/gpuplugin/status/device_status_queue.h): usually before the container runs, but not necessarily.
  wait_for 15 "the device status of shared-gpu" assert_entry shared-gpu "${dev#*/}" "$uuid" "$GPU_NODE"
  [[ $(jq -r .data.productName <<<"$(our_entries shared-gpu)") == "NVIDIA H100"* ]]
  before=$(removals "$GPU_NODE")

  # Still used by pod2: still prepared, the entry stays.
  k delete pod pod1 --wait=true --timeout=60s >/dev/null
  assert_entry shared-gpu "${dev#*/}" "$uuid" "$GPU_NODE"

  # The last pod goes: the kubelet unprepares the claim (it outlives the pod), the plugin removes
  # its entry.
  k delete pod pod2 --wait=true --timeout=60s >/dev/null
  wait_for 30 "the device status of shared-gpu to go" no_entries shared-gpu
  k get resourceclaim shared-gpu >/dev/null
  # Removed by the plugin's unprepare, not by some other writer (counted once the apply returned).
  removed_once() { [ "$(removals "$GPU_NODE")" -eq $((before + 1)) ]; }
  wait_for 5 "the plugin to count the removal" removed_once
}

@test "a MIG claim's entry names the MIG device, its parent GPU and its profile" {
  [[ -n $MIG_NODE ]] || skip "needs 2 nodes (hack/cluster/up.sh --nodes 2)"
  claim one-mig mig.nvidia.com
  pod pod1 "$MIG_NODE" "mig=claim:one-mig"
  wait_pod_phase pod1 Running 60
  wait_log pod1
  local dev mig parent entry profile
  dev=$(allocated one-mig)
  mig=$(k logs pod1 | grep -oE 'MIG-[0-9a-f-]+')
  parent=$(gpu_uuids pod1)
  [ -n "$mig" ] && [ -n "$parent" ]
  wait_for 15 "the device status of one-mig" assert_entry one-mig "${dev#*/}" "$mig" "$MIG_NODE"
  entry=$(our_entries one-mig)
  [ "$(jq -r .data.parentUUID <<<"$entry")" = "$parent" ]
  profile=$(jq -r .data.profile <<<"$entry")
  # Device names carry the profile without dots (gpu-0-mig-1g5gb-19-0); nvidia-smi -L prints it.
  [[ ${dev#*/} == *"-mig-${profile//./}-"* ]] || { echo "profile $profile, device $dev" >&2; false; }
  k logs pod1 | grep -qE "^  MIG ${profile//./\\.} +Device" || { echo "profile $profile"; k logs pod1; false; }
}
