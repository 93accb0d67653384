#!/usr/bin/env bats
# All four GPU gates that the public driver keeps apart, on at once on node 1 (mock h100-8x):
# DynamicMIG, MPSSupport, PassthroughSupport and NVMLDeviceHealthCheck (docs/compatibility.md "All
# GPU feature gates on one node"), with the fake VFIO host of vfio_lib.bash and a short health
# recovery quiet period. Side by side: a pod whose dynamic MIG device (1g.10gb on gpu-7) is shared
# through MPS, and a VFIO pod on gpu-6; the VFIO device of gpu-7 cannot be allocated while its MIG
# device is (the VFIO device consumes the GPU's whole counter set); an XID injected on the MIG
# device taints that device and no other, and the taint goes after the quiet period. Run through
# run.sh.

QUIET=10

setup_file() {
  load lib
  load gpu_lib
  load vfio_lib
  vfio_host_up
  setup_changed_driver gpu-all-gates --set featureGates.DynamicMIG=true \
    --set featureGates.MPSSupport=true --set featureGates.PassthroughSupport=true \
    --set featureGates.NVMLDeviceHealthCheck=true \
    --set kubeletPlugin.containers.gpus.hostRoot="$HOST_ROOT_AT" \
    --set-string kubeletPlugin.containers.gpus.healthRecoveryQuietPeriod=${QUIET}s
}

teardown_file() {
  load lib
  load gpu_lib
  load vfio_lib
  teardown_changed_driver
  vfio_host_down
}

setup() {
  load lib
  load gpu_lib
  load vfio_lib
}

# Every tainted device of node 1's slices, as "<device> <key>=<value>:<effect>" lines.
node1_taints() {
  kubectl get resourceslices -o json --field-selector "spec.nodeName=$GPU_NODE,spec.driver=$DRIVER" |
    jq -r '.items[].spec.devices[]? | .name as $d | .taints[]? | "\($d) \(.key)=\(.value // ""):\(.effect)"'
}

@test "MIG+MPS pod and VFIO pod side by side; an XID on the MIG device taints it alone, then it recovers" {
  local a="device.attributes['gpu.nvidia.com']" parent vfio_bus mig_bus
  parent=$(slice_uuid "$GPU_NODE/gpu-7")
  mig_bus=$(bus_of gpu-7)
  vfio_bus=$(bus_of gpu-6)
  [[ $parent == GPU-* && -n $mig_bus && -n $vfio_bus ]]
  # A 1g.10gb on gpu-7, shared through MPS (a template's spec cannot be patched: one apply).
  k apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: mig-mps}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: mig.nvidia.com
          selectors: [{cel: {expression: "$a.profile == '1g.10gb' && $a.parentUUID == '$parent'"}}]
      config:
      - requests: [gpu]
        opaque: {driver: gpu.nvidia.com, parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: MigDeviceConfig, sharing: {strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 50}}}}
EOF
  claim_template vfio vfio.gpu.nvidia.com \
    "selectors: [{cel: {expression: \"device.attributes['resource.kubernetes.io'].pciBusID == '$vfio_bus'\"}}]"
  pod mig "$GPU_NODE" "gpu=template:mig-mps" "" Always \
    'echo PIPE=$CUDA_MPS_PIPE_DIRECTORY; ls /dev/nvidia-caps; echo END; '"$SLEEP"
  pod vfio "$GPU_NODE" "gpu=template:vfio" "" Always "ls -l /dev/vfio; $SLEEP"
  wait_pod_phase mig Running 120
  wait_pod_phase vfio Running 90

  # The MIG device was created for the claim and is shared through its MPS daemon.
  local dev uid rec mig_uuid gi ci
  dev=$(allocated "$(claim_of mig gpu)" | sed 's|.*/||')
  [[ $dev == gpu-7-mig-1g10gb-19-* ]]
  wait_for 30 "the MIG pod's output" eval 'k logs mig | grep -qx END'
  k logs mig | grep -qx 'PIPE=/tmp/nvidia-mps'
  [ "$(k logs mig | grep -cE '^nvidia-cap[0-9]+$')" -eq 2 ]
  uid=$(k get resourceclaim "$(claim_of mig gpu)" -o jsonpath='{.metadata.uid}')
  rec=$(jq -c --arg u "$uid" '.data.preparedClaims[$u].steps[] | select(.name == "migDevices") | .undo[0]' \
    "$(node_var "$(node_idx "$GPU_NODE")" KUBELET_DIR)/plugins/$DRIVER/checkpoint.json")
  mig_uuid=$(jq -r .uuid <<<"$rec") gi=$(jq -r .gi <<<"$rec") ci=$(jq -r .ci <<<"$rec")
  [[ $mig_uuid == MIG-* ]]
  # Its daemon got the created device's UUID.
  kubectl -n "$DRIVER_NS" get deployments -o json |
    jq -e --arg u "$mig_uuid" '[.items[].spec.template.spec.containers[].env[]? | select(.name == "CUDA_VISIBLE_DEVICES" and .value == $u)] | length == 1' >/dev/null

  # The VFIO pod's GPU is on vfio-pci and the container sees its group.
  [ "$(driver_of "$vfio_bus")" = vfio-pci ]
  wait_for 30 "the VFIO pod's group listing" sees_group vfio "$(group_of "$vfio_bus")"

  # gpu-7's VFIO device consumes the counters its MIG device holds: the scheduler cannot place it.
  claim_template vfio7 vfio.gpu.nvidia.com \
    "selectors: [{cel: {expression: \"device.attributes['resource.kubernetes.io'].pciBusID == '$mig_bus'\"}}]"
  pod vfio7 "$GPU_NODE" "gpu=template:vfio7" "" Always "$SLEEP"
  wait_for 30 "a scheduling failure for vfio7" eval \
    'k get events -o json --field-selector involvedObject.name=vfio7,reason=FailedScheduling | jq -e ".items | length > 0" >/dev/null'
  [ "$(driver_of "$mig_bus")" = nvidia ]
  k delete pod vfio7 --wait=false >/dev/null

  # An XID on the MIG device (its GPU and compute instance): that device alone is tainted.
  [ -z "$(node1_taints)" ]
  node_smi "$GPU_NODE" --mock-inject-xid "$parent" 48 "$gi" "$ci"
  wait_for 30 "the taint on $dev" eval '[ "$(node1_taints)" = "$dev gpu.nvidia.com/xid=48:NoSchedule" ]'
  [ "$(k get pod mig -o jsonpath='{.status.phase}')" = Running ]
  # No further XID: after the quiet period the taint goes.
  wait_for $((QUIET * 3)) "the taint on $dev to go" eval '[ -z "$(node1_taints)" ]'

  k delete pod mig vfio --wait=true --timeout=60s >/dev/null
  wait_for 30 "gpu-6 back on nvidia" eval '[ "$(driver_of "$vfio_bus")" = nvidia ]'
  wait_for 30 "the MIG device to be destroyed" eval '[ "$(node_smi "$GPU_NODE" -L | grep -c "$mig_uuid")" -eq 0 ]'
}
