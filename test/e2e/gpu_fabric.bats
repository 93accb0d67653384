#!/usr/bin/env bats
# Fabric Manager partitions (docs/fabric-manager.md) on node 1 (mock h100-8x, module IDs 1-8):
# its driver root gets the fake libnvfm.so.1 with an HGX-like partition list and a fake NVSwitch
# entry (test/doubles/make-driver-root.sh --fm-partitions), and the driver is upgraded with
# featureGates.FabricManagerPartitioning=true and kubeletPlugin.containers.gpus.hostRoot pointed
# at that driver root (where the NVSwitch entry is). Node 2 (no NVSwitch entry) runs with
# partitions off. Asserted: the partition attributes of node 1's GPUs; a claim for two GPUs of one
# partition (matchAttribute gpu.nvidia.com/partition2, as docs/fabric-manager.md tells workload
# authors) runs its pod and the fake FM has that partition active, inactive again after delete;
# a claim for three GPUs of one 4-GPU partition matches no partition: the prepare fails with the
# spec's message (event FailedPrepareDynamicResources), nothing is activated and the claim leaves
# no CDI spec and no checkpoint record. teardown_file restores the driver's values and takes the
# fake Fabric Manager out of the driver root again. Run through run.sh.

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace gpu-fabric
  record_baseline "$GPU_NODE"
  # HGX H100's shared-NVSwitch partitions: all eight, two halves, four pairs, eight singles.
  local parts=$BATS_FILE_TMPDIR/partitions.json
  cat >"$parts" <<'EOF'
{"partitions": [
  {"id": 0, "gpus": [1, 2, 3, 4, 5, 6, 7, 8]},
  {"id": 1, "gpus": [1, 2, 3, 4]}, {"id": 2, "gpus": [5, 6, 7, 8]},
  {"id": 3, "gpus": [1, 2]}, {"id": 4, "gpus": [3, 4]}, {"id": 5, "gpus": [5, 6]}, {"id": 6, "gpus": [7, 8]},
  {"id": 7, "gpus": [1]}, {"id": 8, "gpus": [2]}, {"id": 9, "gpus": [3]}, {"id": 10, "gpus": [4]},
  {"id": 11, "gpus": [5]}, {"id": 12, "gpus": [6]}, {"id": 13, "gpus": [7]}, {"id": 14, "gpus": [8]}
]}
EOF
  # Same profile as run.sh's prepare-nodes: the mock NVML state and the running plugin are kept;
  # the upgrade below restarts the plugin, which then finds the fabric.
  touch "$BATS_FILE_TMPDIR/fm-installed"
  rm -rf "$(fm_dir)"
  "$REPO_ROOT/test/doubles/make-driver-root.sh" --fm-partitions "$parts" h100-8x \
    "$(node_driver_root "$GPU_NODE")" >/dev/null
  change_driver --set featureGates.FabricManagerPartitioning=true \
    --set kubeletPlugin.containers.gpus.hostRoot=/run/nvidia/driver
  wait_plugin_ready "$GPU_NODE"
}

teardown_file() {
  load lib
  load gpu_lib
  kubectl delete namespace "$E2E_NS" --wait=true --timeout=120s >/dev/null 2>&1 || true
  restore_driver
  # The node's normal driver root again (what prepare-nodes makes): no FM library, partitions or
  # NVSwitch entry. After the restore, so that no plugin with the gate on still uses them.
  if [[ -f $BATS_FILE_TMPDIR/fm-installed ]]; then
    local r
    r=$(node_driver_root "$GPU_NODE")
    find "$r/usr/lib" "$r/lib" "$r/lib64" -maxdepth 2 -name 'libnvfm.so*' -delete 2>/dev/null || true
    rm -rf "$r/var/lib/mock-nvfm" "$r/proc/driver/nvidia-nvswitch"
    rm -f "$BATS_FILE_TMPDIR/fm-installed"
  fi
}

setup() {
  load lib
  load gpu_lib
}

# refused <pod>: prints the pod's FailedPrepareDynamicResources message that is the spec's no-match
# refusal for three GPUs, in the public driver's words (docs/prepare-flow.md "Errors"); fails when
# there is none.
refused() {
  k get events --field-selector "involvedObject.name=$1,reason=FailedPrepareDynamicResources" -o json |
    jq -r '.items[].message' | grep -E 'error preparing devices for claim [^ ]+/[^ ]+:[0-9a-f-]+: .*fabric manager: GPU module set \[[0-9]+ [0-9]+ [0-9]+\] does not match any FM partition; refusing partition activation'
}

fm_dir() { echo "$(node_driver_root "$GPU_NODE")/var/lib/mock-nvfm"; }
# The partitions the fake FM has active, space separated and sorted.
active_partitions() { jq -r '.active // [] | sort | map(tostring) | join(" ")' "$(fm_dir)/state.json" 2>/dev/null || true; }
fm_calls() { grep -c "^$1" "$(fm_dir)/calls.log" 2>/dev/null || true; }
checkpoint_file() { echo "$(node_var "$(node_idx "$GPU_NODE")" KUBELET_DIR)/plugins/$DRIVER/checkpoint.json"; }

# partition_claim <template> <count> <attribute>: <count> GPUs of node 1's gpu class that agree on
# the attribute gpu.nvidia.com/<attribute>, the way docs/fabric-manager.md asks for the GPUs of one
# partition.
partition_claim() {
  k apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $1}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly: {deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: $2}
      constraints:
      - {requests: [gpus], matchAttribute: gpu.nvidia.com/$3}
EOF
}

# The value of attribute $2 of node 1's device $1 (a pool/device as `allocated` prints it).
attr_of() {
  kubectl get resourceslices -o json --field-selector "spec.nodeName=$GPU_NODE,spec.driver=$DRIVER" |
    jq -r --arg d "${1#*/}" --arg a "$2" '.items[].spec.devices[]? | select(.name == $d) | .attributes[$a].int'
}

@test "node 1's GPUs carry gpuModuleID and the ID of their partition of each size" {
  local got
  got=$(kubectl get resourceslices -o json --field-selector "spec.nodeName=$GPU_NODE,spec.driver=$DRIVER" |
    jq -r '.items[].spec.devices[]? | select(.attributes.type.string == "gpu") | .attributes |
      "\(.gpuModuleID.int) \(.partition8.int) \(.partition4.int) \(.partition2.int) \(.partition1.int)"' | sort -n)
  [ "$got" = "$(printf '%s\n' '1 0 1 3 7' '2 0 1 3 8' '3 0 1 4 9' '4 0 1 4 10' \
    '5 0 2 5 11' '6 0 2 5 12' '7 0 2 6 13' '8 0 2 6 14')" ]
  # Node 2 has no fabric: no partition attributes there.
  [ -z "$MIG_NODE" ] || [ "$(kubectl get resourceslices -o json --field-selector "spec.nodeName=$MIG_NODE,spec.driver=$DRIVER" |
    jq '[.items[].spec.devices[]? | select(.attributes.partition2 != null)] | length')" -eq 0 ]
}

@test "two GPUs of one partition: the pod runs with the partition active; deactivated after delete" {
  [ -z "$(active_partitions)" ]
  partition_claim pair 2 partition2
  pod pair1 "$GPU_NODE" "gpus=template:pair"
  wait_pod_phase pair1 Running 90
  wait_log pair1
  assert_gpus pair1 2
  local devs p uid
  devs=$(allocated "$(claim_of pair1 gpus)")
  [ "$(grep -c . <<<"$devs")" -eq 2 ]
  p=$(attr_of "$(head -n1 <<<"$devs")" partition2)
  [ "$(attr_of "$(tail -n1 <<<"$devs")" partition2)" = "$p" ]
  [ "$(active_partitions)" = "$p" ]
  grep -qx "fmActivateFabricPartition $p" "$(fm_dir)/calls.log"
  # The claim's checkpoint record names the partition (the step's undo data).
  uid=$(k get resourceclaim "$(claim_of pair1 gpus)" -o jsonpath='{.metadata.uid}')
  [ "$(jq -r --arg u "$uid" '.data.preparedClaims[$u].steps[] | select(.name == "fabricPartition") | .undo.partition' \
    "$(checkpoint_file)")" = "$p" ]
  k delete pod pair1 --wait=true --timeout=60s >/dev/null
  wait_for 60 "partition $p deactivated" eval '[[ -z $(active_partitions) ]]'
  grep -qx "fmDeactivateFabricPartition $p" "$(fm_dir)/calls.log"
  clean_node
}

@test "three GPUs of a 4-GPU partition match none: the prepare fails with the spec's message and leaves nothing" {
  local activations uid claim
  activations=$(fm_calls fmActivateFabricPartition)
  partition_claim three 3 partition4
  pod odd1 "$GPU_NODE" "gpus=template:three"
  wait_for 90 "odd1's prepare to fail with the spec's message" refused odd1
  refused odd1
  claim=$(claim_of odd1 gpus)
  [ "$(allocated "$claim" | grep -c .)" -eq 3 ]
  [ "$(k get pod odd1 -o jsonpath='{.status.phase}')" = Pending ]
  uid=$(k get resourceclaim "$claim" -o jsonpath='{.metadata.uid}')
  # Nothing changed: no partition active or asked for, no CDI spec, no checkpoint record.
  [ -z "$(active_partitions)" ]
  [ "$(fm_calls fmActivateFabricPartition)" = "$activations" ]
  [ ! -e "$(cdi_spec "$GPU_NODE" "$uid")" ]
  [ "$(jq --arg u "$uid" '.data.preparedClaims | has($u)' "$(checkpoint_file)")" = false ]
  clean_node
}
