#!/usr/bin/env bats
# Dynamic MIG (docs/dynamic-mig.md) on node 1 (mock h100-8x: MIG off, switches without a reset):
# the driver upgraded with featureGates.DynamicMIG=true publishes partitionable devices (split
# layout on the 1.36 API server); a pod's claim for a 1g.10gb gets a MIG device created at prepare
# (the host lists it, the parent's MIG mode is on, the container gets the parent GPU and exactly the
# two capability nodes of that GPU/compute instance: the mock inside a container does not share the
# host's MIG state, so its nvidia-smi cannot list the new device) and destroyed at unprepare (MIG
# mode back off); and claims go through the real scheduler in the order of docs/dynamic-mig.md.
# Each test uses its own GPU, selected by parentUUID. Run through run.sh.

setup_file() {
  load lib
  load gpu_lib
  setup_changed_driver gpu-dynmig --set featureGates.DynamicMIG=true
}

teardown_file() {
  load lib
  load gpu_lib
  teardown_changed_driver
}

setup() {
  load lib
  load gpu_lib
}

# mig_mode <gpu device name on node 1>: "Enabled" or "Disabled", from the host's nvidia-smi.
mig_mode() {
  node_smi "$GPU_NODE" -q -i "$(slice_uuid "$GPU_NODE/$1")" | grep -A1 'MIG Mode' | awk -F': ' '/Current/ {print $2}'
}

# mig_claim <template> <profile> <gpu device name>: a mig.nvidia.com claim template for <profile>
# on that GPU of node 1.
mig_claim() {
  local a="device.attributes['gpu.nvidia.com']" uuid
  uuid=$(slice_uuid "$GPU_NODE/$3")
  claim_template "$1" mig.nvidia.com \
    "selectors: [{cel: {expression: \"$a.profile == '$2' && $a.parentUUID == '$uuid'\"}}]"
}

# The device allocated to pod $1's claim "mig", without the pool.
device_of() { allocated "$(claim_of "$1" mig)" | sed 's|.*/||'; }

@test "partitionable devices: a counter-set slice, and devices that consume its counters" {
  local slices
  slices=$(kubectl get resourceslices -o json --field-selector "spec.nodeName=$GPU_NODE,spec.driver=$DRIVER")
  # Split layout: one slice with the 8 counter sets and no devices.
  [ "$(jq '[.items[] | select((.spec.sharedCounters // []) | length > 0)] | length' <<<"$slices")" -eq 1 ]
  [ "$(jq '[.items[] | select((.spec.sharedCounters // []) | length > 0) | .spec.sharedCounters[].name] | length' <<<"$slices")" -eq 8 ]
  [ "$(jq '[.items[] | select((.spec.sharedCounters // []) | length > 0) | .spec.devices // [] | length] | add' <<<"$slices")" -eq 0 ]
  # A 3g.40gb at placement 4 consumes memory slices 4..7 of GPU 0's set; it has no uuid yet.
  run jq -c '.items[].spec.devices[]? | select(.name == "gpu-0-mig-3g40gb-9-4") |
    [.consumesCounters[0].counterSet, (.consumesCounters[0].counters | keys | map(select(startswith("memory-slice")))), (.attributes.uuid == null)]' <<<"$slices"
  [ "$output" = '["gpu-0-counter-set",["memory-slice-4","memory-slice-5","memory-slice-6","memory-slice-7"],true]' ]
}

@test "a pod sees its new MIG device; the parent's MIG mode goes back off after delete" {
  [ "$(mig_mode gpu-7)" = Disabled ]
  mig_claim small 1g.10gb gpu-7
  pod pod1 "$GPU_NODE" "mig=template:small" "" Always "nvidia-smi -L; ls /dev/nvidia-caps; $SLEEP"
  wait_pod_phase pod1 Running 90
  wait_for 30 "pod1's device listing" eval 'k logs pod1 | grep -q nvidia-cap'
  k logs pod1
  [ "$(device_of pod1)" = gpu-7-mig-1g10gb-19-0 ]
  [ "$(mig_mode gpu-7)" = Enabled ]
  # The host lists the new MIG device under GPU 7; its UUID, GPU and compute instance are in the
  # claim's checkpoint record (step migDevices).
  local uid rec uuid gi ci minors want
  uid=$(k get resourceclaim "$(claim_of pod1 mig)" -o jsonpath='{.metadata.uid}')
  rec=$(jq -c --arg u "$uid" '.data.preparedClaims[$u].steps[] | select(.name == "migDevices") | .undo[0]'     "$(node_var "$(node_idx "$GPU_NODE")" KUBELET_DIR)/plugins/$DRIVER/checkpoint.json")
  uuid=$(jq -r .uuid <<<"$rec") gi=$(jq -r .gi <<<"$rec") ci=$(jq -r .ci <<<"$rec")
  [[ $uuid == MIG-* ]]
  node_smi "$GPU_NODE" -L | grep -q "$uuid"
  # The container got the parent GPU and exactly the two capability nodes of that instance.
  assert_gpus pod1 1
  minors="$(node_driver_root "$GPU_NODE")/proc/driver/nvidia-caps/mig-minors"
  want=$(printf 'nvidia-cap%s\nnvidia-cap%s\n' \
    "$(awk -v k="gpu7/gi$gi/access" '$1 == k {print $2}' "$minors")" \
    "$(awk -v k="gpu7/gi$gi/ci$ci/access" '$1 == k {print $2}' "$minors")" | sort)
  [ "$(k logs pod1 | grep -E '^nvidia-cap[0-9]+$' | sort)" = "$want" ]
  k delete pod pod1 --wait=true --timeout=60s >/dev/null
  wait_for 60 "MIG mode of gpu-7 back off" eval '[[ $(mig_mode gpu-7) == Disabled ]]'
  # (`|| false`: bats does not fail a test on a negated command that is not its last)
  ! node_smi "$GPU_NODE" -L | grep -q "$uuid" || false
}

@test "through the scheduler: 3g then 4g both fit one GPU (first-fit would refuse the 4g)" {
  mig_claim three 3g.40gb gpu-6
  mig_claim four 4g.40gb gpu-6
  pod p3 "$GPU_NODE" "mig=template:three"
  wait_pod_phase p3 Running 90
  [ "$(device_of p3)" = gpu-6-mig-3g40gb-9-4 ]
  pod p4 "$GPU_NODE" "mig=template:four"
  wait_pod_phase p4 Running 90
  [ "$(device_of p4)" = gpu-6-mig-4g40gb-5-0 ]
  k delete pod p3 p4 --wait=true --timeout=60s >/dev/null
  wait_for 60 "MIG mode of gpu-6 back off" eval '[[ $(mig_mode gpu-6) == Disabled ]]'
}

@test "through the scheduler: 1g,1g,3g,1g fit one GPU, the next 3g does not (the table's first row)" {
  mig_claim one5 1g.10gb gpu-5
  mig_claim three5 3g.40gb gpu-5
  local i=0 t
  for t in one5 one5 three5 one5; do
    i=$((i + 1))
    pod "s$i" "$GPU_NODE" "mig=template:$t"
    wait_pod_phase "s$i" Running 90
  done
  [ "$(device_of s1)" = gpu-5-mig-1g10gb-19-0 ]
  [ "$(device_of s2)" = gpu-5-mig-1g10gb-19-1 ]
  [ "$(device_of s3)" = gpu-5-mig-3g40gb-9-4 ]
  [ "$(device_of s4)" = gpu-5-mig-1g10gb-19-2 ]
  pod s5 "$GPU_NODE" "mig=template:three5"
  wait_for 60 "the scheduler to give up on s5" eval \
    '[[ $(k get events --field-selector involvedObject.name=s5,reason=FailedScheduling -o name | wc -l) -ge 1 ]]'
  [ "$(k get pod s5 -o jsonpath='{.status.phase}')" = Pending ]
  k delete pod s1 s2 s3 s4 s5 --wait=true --timeout=90s >/dev/null
  wait_for 60 "MIG mode of gpu-5 back off" eval '[[ $(mig_mode gpu-5) == Disabled ]]'
}
