#!/usr/bin/env bats
# MPS sharing on a real node (mock h100-8x on node 1, gate MPSSupport): one claim with a GpuConfig
# of strategy MPS used by two pods. The plugin runs the claim's control daemon as a Deployment in
# its namespace (the release's, $DRIVER_NS), with the driver's own image (the chart's
# IMAGE_NAME); the fake nvidia-cuda-mps-control of the node's mock driver root records the
# settings it was given in <pipe dir>/settings.json and marks the daemon's /dev/shm. The workload containers must see the
# daemon's pipe directory and the same /dev/shm; the GPU must be Exclusive_Process while the claim
# is prepared and Default afterwards. Run through run.sh (it installs the driver with Helm).

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace gpu-mps
  record_baseline "$GPU_NODE"
}

teardown_file() {
  load lib
  kubectl delete namespace "$E2E_NS" --wait=false >/dev/null 2>&1 || true
}

setup() {
  load lib
  load gpu_lib
  KUBELET_DIR=$(node_var "$(node_idx "$GPU_NODE")" KUBELET_DIR)
  MPS_DIR=$KUBELET_DIR/plugins/$DRIVER/mps
}

teardown() {
  clean_node "$GPU_NODE"
  restore_driver
}

# The release with the MPSSupport gate on as well.
plugin_with_mps() { change_driver --set featureGates.MPSSupport=true; }

compute_mode() { node_smi "$GPU_NODE" -q -i "$1" | awk -F': ' '/Compute Mode/ {print $2}'; }

# mps_claim <name>: a claim for one GPU shared through MPS, 50 % of the threads, 10 GiB pinned.
mps_claim() {
  claim "$1" "" "" "{apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 50, defaultPinnedDeviceMemoryLimit: 10Gi}}}"
}

# What a workload container prints: its GPUs, the MPS pipe variable, the pipe directory and the
# files in /dev/shm, then END.
MPS_CMD='nvidia-smi -L; echo PIPE=$CUDA_MPS_PIPE_DIRECTORY; echo PIPEDIR $(ls /tmp/nvidia-mps); echo SHM $(ls /dev/shm); echo END; '"$SLEEP"

wait_end() {
  local deadline=$((SECONDS + 30))
  until k logs "$1" 2>/dev/null | grep -qx END; do
    ((SECONDS < deadline)) || { echo "pod $1 did not print END:" >&2; k logs "$1" >&2; return 1; }
    sleep 0.3
  done
}

# mps_policy_checks <deployment>: the MPS Deployment policy (the chart's
# validatingadmissionpolicy.yaml) with the plugin's own identity on $GPU_NODE (a token bound to its
# pod): a copy of the Deployment it made is allowed (server-side dry run), the same with another
# image, service account, node or an init container is refused; it may delete its own node's MPS
# Deployment, not the release's other Deployments.
mps_policy_checks() {
  local kc pod copy change out other
  pod=$(plugin_pod "$GPU_NODE")
  kc=$(sa_kubeconfig "$DRIVER_NS" "$(kubectl -n "$DRIVER_NS" get pod "$pod" -o jsonpath='{.spec.serviceAccountName}')" "$pod")
  as_plugin() { "$K8S_BIN_DIR/kubectl" --kubeconfig "$kc" --request-timeout=20s -n "$DRIVER_NS" "$@"; }
  copy=$(kubectl -n "$DRIVER_NS" get deployment "$1" -o json |
    jq -c '{apiVersion, kind, metadata: {name: (.metadata.name + "-e2e"), labels: .metadata.labels, annotations: .metadata.annotations}, spec}')
  out=$(as_plugin create --dry-run=server -f - <<<"$copy" 2>&1) || { echo "the plugin's own Deployment shape was refused: $out"; return 1; }
  for change in '.spec.template.spec.containers[0].image = "registry.example/other:v1"' \
    '.spec.template.spec.serviceAccountName = "default" | .spec.template.spec.serviceAccount = "default"' \
    '.spec.template.spec.nodeName = "rbac-e2e-other-node"' \
    '.spec.template.spec.initContainers = [{name: "init", image: .spec.template.spec.containers[0].image, command: ["true"]}]'; do
    if out=$(as_plugin create --dry-run=server -f - <<<"$(jq -c "$change" <<<"$copy")" 2>&1); then
      echo "allowed, want refused: $change"; return 1
    fi
    [[ $out == *"mps-deployments-policy"* ]] || { echo "refused, but not by the MPS policy: $change: $out"; return 1; }
  done
  out=$(as_plugin delete deployment "$1" --dry-run=server 2>&1) || { echo "deleting its own MPS Deployment was refused: $out"; return 1; }
  other=$(kubectl -n "$DRIVER_NS" get deployments -o json |
    jq -r '[.items[] | select(.metadata.labels["app.kubernetes.io/managed-by"] != "gpu-kubelet-plugin")][0].metadata.name // empty')
  if [[ -n $other ]]; then
    if out=$(as_plugin delete deployment "$other" --dry-run=server 2>&1); then echo "allowed, want refused: delete $other"; return 1; fi
    [[ $out == *"mps-deployments-policy"* ]] || { echo "delete $other refused, but not by the MPS policy: $out"; return 1; }
  fi
  echo "# MPS policy: the plugin's Deployment shape allowed; other image, service account, node, init container, and deleting ${other:-(no other Deployment)} refused" >&3
}

@test "an MPS claim shared by two pods: one control daemon with the claim's settings, pipe and /dev/shm in both, exclusive GPU; all gone after" {
  plugin_with_mps
  mps_claim mps-gpu
  pod_yaml pod1 "$GPU_NODE" "gpu=claim:mps-gpu" "" Always "$MPS_CMD" | k apply -f - >/dev/null
  pod_yaml pod2 "$GPU_NODE" "gpu=claim:mps-gpu" "" Always "$MPS_CMD" | k apply -f - >/dev/null
  wait_pod_phase pod1 Running 90
  wait_pod_phase pod2 Running 90
  wait_end pod1 && wait_end pod2
  assert_gpus pod1 1
  assert_gpus pod2 1
  local uuid uid id log
  uuid=$(gpu_uuids pod1)
  [ "$uuid" = "$(gpu_uuids pod2)" ]
  [ "$uuid" = "$(slice_uuid "$(allocated mps-gpu)")" ]

  # The daemon id: claim UID and the first 5 hex digits of sha256 of the group's UUIDs.
  uid=$(k get resourceclaim mps-gpu -o jsonpath='{.metadata.uid}')
  id="$uid-$(printf '%s' "$uuid" | sha256sum | cut -c1-5)"
  echo "# GPU $uuid, daemon $id" >&3
  # The checkpoint records it with the claim.
  [ "$(jq -r --arg u "$uid" '.data.preparedClaims[$u].preparedDevices[0].mpsDaemon.id' \
    "$KUBELET_DIR/plugins/$DRIVER/checkpoint.json")" = "$id" ]

  # Its Deployment runs, ready, on this node.
  [ "$(kubectl -n "$DRIVER_NS" get deployment "mps-control-daemon-$id" -o jsonpath='{.status.readyReplicas}')" = 1 ]
  [ "$(kubectl -n "$DRIVER_NS" get pods -l "app=mps-control-daemon-$id" -o jsonpath='{.items[*].spec.nodeName}')" = "$GPU_NODE" ]
  mps_policy_checks "mps-control-daemon-$id"

  # Both containers: the pipe variable, the daemon's control socket, and its /dev/shm marker.
  for p in pod1 pod2; do
    log=$(k logs "$p")
    grep -qx 'PIPE=/tmp/nvidia-mps' <<<"$log"
    grep -E '^PIPEDIR ' <<<"$log" | grep -qw control
    grep -E '^SHM ' <<<"$log" | grep -qE 'nvidia-mps-control-daemon\.[0-9]+'
  done

  # What the daemon was told, as the fake recorded it on the host.
  local settings=$MPS_DIR/$id/pipe/settings.json
  echo "# $(jq -c 'del(.pid)' "$settings")" >&3
  [ "$(jq -r '.defaultActiveThreadPercentage' "$settings")" = 50 ]
  [ "$(jq -r --arg u "$uuid" '.defaultDevicePinnedMemLimits[$u]' "$settings")" = 10240M ]
  [ "$(jq -c '.defaultDevicePinnedMemLimits | keys' "$settings")" = "[\"$uuid\"]" ]
  [ "$(jq -c '.visibleDevices' "$settings")" = "[\"$uuid\"]" ]
  [ "$(jq -r '.multiUser' "$settings")" = false ]
  [ "$(compute_mode "$uuid")" = Exclusive_Process ]

  # After the pods and the claim: no Deployment, no daemon pod, no directory, compute mode back.
  k delete pods pod1 pod2 --wait=false >/dev/null
  k delete resourceclaim mps-gpu --wait=false >/dev/null
  clean_node "$GPU_NODE"
  run kubectl -n "$DRIVER_NS" get deployment "mps-control-daemon-$id"
  [ "$status" -ne 0 ]
  [[ $output == *NotFound* || $output == *"not found"* ]]
  [ -z "$(kubectl -n "$DRIVER_NS" get pods -l "app=mps-control-daemon-$id" -o name)" ]
  [ ! -e "$MPS_DIR/$id" ]
  [ "$(compute_mode "$uuid")" = Default ]
}

@test "without the MPSSupport gate an MPS claim is refused with the gate's message" {
  # run.sh's values leave the gate off.
  if [[ $(plugin_gates) == *MPSSupport=true* ]]; then restore_driver; fi
  [[ $(plugin_gates) != *MPSSupport=true* ]] || { echo "the plugin runs with MPSSupport=true: $(plugin_gates)"; false; }
  mps_claim mps-off
  pod_yaml pod1 "$GPU_NODE" "gpu=claim:mps-off" "" Always "$MPS_CMD" | k apply -f - >/dev/null
  local deadline=$((SECONDS + 60)) events=""
  until grep -q 'MPSSupport' <<<"$events"; do
    ((SECONDS < deadline)) || { echo "no event names the gate; events: $events" >&2; k describe pod pod1 >&2; return 1; }
    sleep 1
    events=$(k get events --field-selector involvedObject.name=pod1 -o json | jq -r '.items[].message')
  done
  echo "# $(grep -m1 MPSSupport <<<"$events")" >&3
  grep -q '"MPS" is selected as the GPU sharing strategy, but the "MPSSupport" feature gate is not enabled' <<<"$events"
  [ "$(k get pod pod1 -o jsonpath='{.status.phase}')" = Pending ]
  [ -z "$(kubectl -n "$DRIVER_NS" get deployments -o name | grep "mps-control-daemon-$(k get resourceclaim mps-off -o jsonpath='{.metadata.uid}')" || true)" ]
}
