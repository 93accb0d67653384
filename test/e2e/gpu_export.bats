#!/usr/bin/env bats
# The way back to the public Go driver (docs/compatibility.md "Going back to the public driver"):
# with a pod holding a GPU, `gpu-kubelet-plugin export-go-checkpoint` is refused while the node's
# plugin serves; with the plugin taken off the node, a pod of the driver image run on the node
# writes the node's checkpoint in the public driver's format, which verifies (the plugin binary's
# --verify, by the format's rules) and lists the pod's claim, while the claim's CDI spec stays.
# Then the plugin comes back, adopts the file again (a node switched from the public driver) and
# unprepares the claim as its own, so that the node is as before.
# Pods run on node 1 (mock h100-8x). Run through run.sh.

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace gpu-export
  record_baseline "$GPU_NODE"
}

teardown_file() {
  load lib
  load gpu_lib
  # A test that failed half-way must not leave the node without its plugin; whatever the
  # checkpoint holds then (ours or the exported file) the plugin reads.
  start_plugin "$GPU_NODE" >/dev/null
  kubectl delete namespace "$E2E_NS" --wait=false >/dev/null 2>&1 || true
}

setup() {
  load lib
  load gpu_lib
  PLUGIN_DATA_DIR="$(node_var "$(node_idx "$GPU_NODE")" KUBELET_DIR)/plugins/$DRIVER"
}

teardown() {
  k delete pod go-export --wait=false >/dev/null 2>&1 || true
  clean_node "$GPU_NODE"
  rm -f "$PLUGIN_DATA_DIR"/checkpoint.json.cpp-driver-* "$PLUGIN_DATA_DIR"/checkpoint.json.go-driver-* \
    "$PLUGIN_DATA_DIR"/go-export-preview.json
}

# The image the chart runs the plugin from.
driver_image() {
  kubectl -n "$DRIVER_NS" get daemonsets -o json | jq -r '[.items[].spec.template.spec.containers[] |
    select(.name == "gpus") | .image] | first'
}

# export_pod: the operator's step on a node whose plugin has stopped: the driver image, the
# kubelet's plugin directory mounted at the same path, the subcommand, then --verify of the file it
# wrote.
export_pod() {
  k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: go-export}
spec:
  restartPolicy: Never
  nodeSelector: {kubernetes.io/hostname: $GPU_NODE}
  containers:
  - name: export
    image: $(driver_image)
    imagePullPolicy: IfNotPresent
    securityContext: {runAsUser: 0}
    command: [sh, -c, "gpu-kubelet-plugin export-go-checkpoint && gpu-kubelet-plugin export-go-checkpoint --verify /var/lib/kubelet/plugins/$DRIVER/checkpoint.json"]
    volumeMounts: [{name: plugins, mountPath: /var/lib/kubelet/plugins}]
  volumes:
  - {name: plugins, hostPath: {path: /var/lib/kubelet/plugins, type: Directory}}
EOF
}

@test "going back to the public driver: the node's checkpoint in its format, verified, the pod's claim in it, the CDI spec kept" {
  local uid claim spec out plugin
  claim_template single-gpu
  pod pod1 "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase pod1 Running 60
  wait_log pod1
  claim=$(claim_of pod1 gpu)
  uid=$(k get resourceclaim "$claim" -o jsonpath='{.metadata.uid}')
  spec=$(cdi_spec "$GPU_NODE" "$uid")
  [ -f "$spec" ]

  # While the plugin serves, writing over its checkpoint is refused (it would adopt the file
  # back), and the checkpoint stays ours; a preview elsewhere is written and verifies.
  plugin=$(plugin_pod "$GPU_NODE")
  run kubectl -n "$DRIVER_NS" exec "$plugin" -c gpus -- gpu-kubelet-plugin export-go-checkpoint
  echo "$output"
  [ "$status" -eq 1 ]
  [[ $output == *"a gpu-kubelet-plugin serves on"* ]]
  jq -e --arg u "$uid" '.version == 1 and .data.preparedClaims[$u].state == "PrepareCompleted"' \
    "$PLUGIN_DATA_DIR/checkpoint.json" >/dev/null
  kubectl -n "$DRIVER_NS" exec "$plugin" -c gpus -- gpu-kubelet-plugin export-go-checkpoint \
    --output "/var/lib/kubelet/plugins/$DRIVER/go-export-preview.json"
  out=$(kubectl -n "$DRIVER_NS" exec "$plugin" -c gpus -- gpu-kubelet-plugin export-go-checkpoint \
    --verify "/var/lib/kubelet/plugins/$DRIVER/go-export-preview.json")
  echo "$out"
  [[ $out == *"$uid PrepareCompleted $E2E_NS/$claim devices=1"* ]]

  # The operator takes the plugin off the node and runs the step there.
  stop_plugin "$GPU_NODE"
  export_pod
  wait_pod_phase go-export Succeeded 90
  out=$(k logs go-export)
  echo "$out"
  [[ $out == *"in the public driver's format"* ]]
  [[ $out == *"checksums verified"* ]]
  [[ $out == *"$uid PrepareCompleted $E2E_NS/$claim devices=1"* ]]

  # The files on the node: the public driver's checkpoint where it reads it (verified again by the
  # plugin binary of this build, from the host), its claim with the pod's GPU and CDI device; our
  # checkpoint kept beside it; the claim's CDI spec where it was; the pod still running.
  "$REPO_ROOT/build/default/cmd/gpu-kubelet-plugin/gpu-kubelet-plugin" export-go-checkpoint \
    --verify "$PLUGIN_DATA_DIR/checkpoint.json"
  jq -e --arg u "$uid" --arg d "$(allocated "$claim" | cut -d/ -f2)" '
    (keys_unsorted == ["checksum", "v1", "v2", "v3"]) and
    (.v2.preparedClaims[$u] | .checkpointState == "PrepareCompleted" and
      .preparedDevices[0].devices[0].gpu.device.DeviceName == $d and
      .preparedDevices[0].devices[0].gpu.device.CDIDeviceIDs == ["k8s.gpu.nvidia.com/claim=\($u)-\($d)"]) and
    (.v3.preparedClaims[$u].preparedDevices[0].devices[0].gpu.device.deviceName == $d) and
    (.v1.preparedClaims[$u] != null)' "$PLUGIN_DATA_DIR/checkpoint.json" >/dev/null
  jq -e --arg u "$uid" '.version == 1 and .data.preparedClaims[$u] != null' \
    "$(find "$PLUGIN_DATA_DIR" -maxdepth 1 -name 'checkpoint.json.cpp-driver-*' | head -n1)" >/dev/null
  [ -f "$spec" ]
  [ "$(k get pod pod1 -o jsonpath='{.status.phase}')" = Running ]

  # Back to this driver (the cluster as before): the plugin adopts the exported file as a node
  # switched from the public driver, and unprepares the claim when the pod goes.
  start_plugin "$GPU_NODE"
  wait_for 30 "the checkpoint read back into our format" jq -e --arg u "$uid" \
    '.version == 1 and .data.preparedClaims[$u].state == "PrepareCompleted"' "$PLUGIN_DATA_DIR/checkpoint.json"
  k delete pod pod1 --wait=true --timeout=60s >/dev/null
  wait_for 60 "CDI spec of claim $uid removed" test ! -e "$spec"
  plugin_logs "$GPU_NODE" | grep -q "\"unprepared claim\" claim=\"$uid\""
}
