#!/usr/bin/env bats
# What the GPU plugin tells the cluster when something is wrong on the node: a corrupt checkpoint
# (Warning Event on the Node, metric, the plugin carries on), and with the feature gate
# NVMLDeviceHealthCheck, XID events (device taints the kube-scheduler honours, device health the
# kubelet reports in pod status). XIDs are injected with the mock's nvidia-smi --mock-inject-xid
# into the node's mock NVML state, which the plugin's NVML event wait reads. Pods run on node 1
# (mock h100-8x). Run through run.sh.

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace gpu-health
  record_baseline "$GPU_NODE"
}

teardown_file() {
  load lib
  load gpu_lib
  # A test that failed half-way must not leave the node without its plugin.
  start_plugin "$GPU_NODE" >/dev/null
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

# "<key>=<value>:<effect>" of every taint of a published device (pool/device).
slice_taints() {
  kubectl get resourceslices -o json --field-selector "spec.driver=$DRIVER" |
    jq -r --arg p "${1%%/*}" --arg d "${1#*/}" '.items[] | select(.spec.pool.name == $p)
      | .spec.devices[] | select(.name == $d) | .taints[]? | "\(.key)=\(.value // ""):\(.effect)"'
}

# The health the kubelet reports for a device (pool/device) in the pod's container statuses. The
# kubelet names a device by its CDI device ID, "k8s.gpu.nvidia.com/claim=<claim UID>-<device>".
pod_device_health() {
  k get pod "$1" -o json | jq -r --arg suffix "-${2#*/}" \
    '[.status.containerStatuses[]?.allocatedResourcesStatus[]?.resources[]? | select(.resourceID | endswith($suffix)) | .health] | first // ""'
}

# The node's CheckpointCorrupt events (JSON list) and how many times they were reported.
corrupt_events() {
  kubectl get events -A -o json \
    --field-selector "involvedObject.kind=Node,involvedObject.name=$GPU_NODE,reason=CheckpointCorrupt"
}
corrupt_event_count() { corrupt_events | jq '[.items[] | .count // 1] | add // 0'; }

plugin_metric() {
  curl -sf -m 5 "$(plugin_metrics_url "$1")" |
    awk -v m="$2" '$1 == m {print $2}'
}

@test "a corrupt checkpoint is moved aside, reported as a Node event and a metric, and the plugin works on" {
  local dir cp before_events
  dir="$(node_var "$(node_idx "$GPU_NODE")" KUBELET_DIR)/plugins/$DRIVER"
  cp="$dir/checkpoint.json"
  # shellcheck disable=SC2034 # read by the eval of wait_for below
  before_events=$(corrupt_event_count)

  # The plugin leaves the node (its label removed), the file is damaged, the plugin comes back.
  stop_plugin "$GPU_NODE"
  rm -f "$dir"/checkpoint.json.corrupt-*
  printf '{"checksum": 1, "data": {"preparedClaims": {tru' >"$cp"
  start_plugin "$GPU_NODE"

  # The corrupt bytes are kept for a post-mortem, and a fresh checkpoint took their place.
  local moved
  moved=$(find "$dir" -maxdepth 1 -name 'checkpoint.json.corrupt-*' | head -n 1)
  [ -n "$moved" ]
  grep -q 'preparedClaims": {tru' "$moved"
  jq -e '.data.preparedClaims' "$cp" >/dev/null

  # The Node carries a Warning event that says what happened and where the file went.
  wait_for 20 "a CheckpointCorrupt event on $GPU_NODE" eval '(($(corrupt_event_count) > before_events))'
  local events
  events=$(corrupt_events)
  jq -e --arg m "$(basename "$moved")" \
    '[.items[] | select(.type == "Warning" and (.message | contains($m)))] | length > 0' <<<"$events"
  [ "$(plugin_metric "$GPU_NODE" nvidia_dra_checkpoint_corruptions_total)" = 1 ]

  # The plugin goes on preparing claims.
  claim_template single-gpu
  pod pod1 "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase pod1 Running 60
  wait_log pod1
  assert_gpus pod1 1
  rm -f "$dir"/checkpoint.json.corrupt-*
}

@test "NVMLDeviceHealthCheck: XIDs taint devices, the kubelet reports the device unhealthy, the scheduler avoids it" {
  # Recovery off (as in the Go driver): the taints hold however quiet the GPUs stay.
  change_driver --set featureGates.NVMLDeviceHealthCheck=true \
    --set-string kubeletPlugin.containers.gpus.healthRecoveryQuietPeriod=0s

  claim one-gpu
  pod pod1 "$GPU_NODE" "gpu=claim:one-gpu"
  wait_pod_phase pod1 Running 60
  local used used_uuid
  used=$(allocated one-gpu)
  used_uuid=$(slice_uuid "$used")
  # Before any event the device is healthy and untainted.
  wait_for 30 "the kubelet to report $used healthy" eval '[ "$(pod_device_health pod1 "$used")" = Healthy ]'
  [ -z "$(slice_taints "$used")" ]

  # Two free GPUs (no claim holds them, pod1's included): one gets a critical XID, the other one
  # that only says an application failed.
  local free bad ok bad_uuid ok_uuid
  free=$(free_gpus "$GPU_NODE")
  bad=$(sed -n 1p <<<"$free")
  ok=$(sed -n 2p <<<"$free")
  [ -n "$ok" ] || { echo "not 2 free GPUs on $GPU_NODE; allocated: $(device_holders)"; false; }
  bad_uuid=$(slice_uuid "$bad")
  ok_uuid=$(slice_uuid "$ok")

  node_smi "$GPU_NODE" --mock-inject-xid "$used_uuid" 79
  node_smi "$GPU_NODE" --mock-inject-xid "$bad_uuid" 48
  node_smi "$GPU_NODE" --mock-inject-xid "$ok_uuid" 13
  wait_for 30 "the taint on $used" eval '[ "$(slice_taints "$used")" = "gpu.nvidia.com/xid=79:NoSchedule" ]'
  wait_for 30 "the taint on $bad" eval '[ "$(slice_taints "$bad")" = "gpu.nvidia.com/xid=48:NoSchedule" ]'
  wait_for 30 "the taint on $ok" eval '[ "$(slice_taints "$ok")" = "gpu.nvidia.com/xid=13:None" ]'
  # The kubelet learns it through the DRAResourceHealth stream and shows it in the pod's status.
  wait_for 30 "the kubelet to report $used unhealthy" eval '[ "$(pod_device_health pod1 "$used")" = Unhealthy ]'
  [ "$(k get pod pod1 -o jsonpath='{.status.phase}')" = Running ]

  # The scheduler does not hand out the NoSchedule-tainted GPU; the None-tainted one is fine.
  claim want-ok gpu.nvidia.com "selectors: [{cel: {expression: 'device.attributes[\"gpu.nvidia.com\"].uuid == \"$ok_uuid\"'}}]"
  claim want-bad gpu.nvidia.com "selectors: [{cel: {expression: 'device.attributes[\"gpu.nvidia.com\"].uuid == \"$bad_uuid\"'}}]"
  pod pod-ok "$GPU_NODE" "gpu=claim:want-ok"
  pod pod-bad "$GPU_NODE" "gpu=claim:want-bad"
  wait_pod_phase pod-ok Running 60
  wait_log pod-ok
  [ "$(gpu_uuids pod-ok)" = "$ok_uuid" ]
  wait_for 30 "a scheduling failure for pod-bad" eval \
    'k get events -o json --field-selector involvedObject.name=pod-bad,reason=FailedScheduling | jq -e ".items | length > 0" >/dev/null'
  [ "$(k get pod pod-bad -o jsonpath='{.status.phase}')" = Pending ]
  [ -z "$(allocated want-bad)" ]

  # With recovery off, taints last until the plugin restarts (an operator's signal that the GPU
  # was looked after).
  k delete pod pod-bad --wait=false
  restore_driver
  wait_for 30 "the taints to go" eval '[ -z "$(slice_taints "$used")$(slice_taints "$bad")$(slice_taints "$ok")" ]'
}

# How often the Node's Normal DeviceHealthRecovered events reported device $1.
recovered_count() {
  kubectl get events -A -o json \
    --field-selector "involvedObject.kind=Node,involvedObject.name=$GPU_NODE,reason=DeviceHealthRecovered" |
    jq --arg d "device $1 " '[.items[] | select(.type == "Normal" and (.message | startswith($d))) | .count // 1] | add // 0'
}

@test "health recovery: a tainted GPU that stays quiet is untainted, reported healthy and scheduled again" {
  local quiet=20
  change_driver --set featureGates.NVMLDeviceHealthCheck=true \
    --set-string kubeletPlugin.containers.gpus.healthRecoveryQuietPeriod=${quiet}s
  claim one-gpu
  pod pod1 "$GPU_NODE" "gpu=claim:one-gpu"
  wait_pod_phase pod1 Running 60
  local used used_uuid bad bad_uuid
  used=$(allocated one-gpu)
  used_uuid=$(slice_uuid "$used")
  wait_for 30 "the kubelet to report $used healthy" eval '[ "$(pod_device_health pod1 "$used")" = Healthy ]'
  # A GPU no claim holds (pod1's included). One that another claim held (a demo's workload,
  # another file's leftover) would keep pod-bad Pending after the recovery: the scheduler retries
  # it when the slice changes, and that retry fails for the other claim.
  bad=$(free_gpus "$GPU_NODE" | head -n 1)
  [ -n "$bad" ] || { echo "no free GPU on $GPU_NODE; allocated: $(device_holders)"; false; }
  bad_uuid=$(slice_uuid "$bad")
  local used_events bad_events
  # shellcheck disable=SC2034 # read by the eval of wait_for below
  used_events=$(recovered_count "${used#*/}")
  # shellcheck disable=SC2034 # read by the eval of wait_for below
  bad_events=$(recovered_count "${bad#*/}")

  # A critical XID on the running pod's GPU and on a free one.
  node_smi "$GPU_NODE" --mock-inject-xid "$used_uuid" 79
  node_smi "$GPU_NODE" --mock-inject-xid "$bad_uuid" 48
  wait_for 30 "the taint on $used" eval '[ "$(slice_taints "$used")" = "gpu.nvidia.com/xid=79:NoSchedule" ]'
  wait_for 30 "the taint on $bad" eval '[ "$(slice_taints "$bad")" = "gpu.nvidia.com/xid=48:NoSchedule" ]'
  wait_for 30 "the kubelet to report $used unhealthy" eval '[ "$(pod_device_health pod1 "$used")" = Unhealthy ]'

  # While it is tainted, a claim that wants the free GPU cannot be scheduled.
  claim want-bad gpu.nvidia.com "selectors: [{cel: {expression: 'device.attributes[\"gpu.nvidia.com\"].uuid == \"$bad_uuid\"'}}]"
  pod pod-bad "$GPU_NODE" "gpu=claim:want-bad"
  wait_for 30 "a scheduling failure for pod-bad" eval \
    'k get events -o json --field-selector involvedObject.name=pod-bad,reason=FailedScheduling | jq -e ".items | length > 0" >/dev/null'
  [ -z "$(allocated want-bad)" ]

  # A second critical XID on the free GPU restarts its quiet period: half a period later the
  # first GPU may recover, this one must still be tainted.
  sleep $((quiet / 2))
  node_smi "$GPU_NODE" --mock-inject-xid "$bad_uuid" 48
  local reinjected=$SECONDS
  wait_for $((quiet * 3)) "the taint on $used to go" eval '[ -z "$(slice_taints "$used")" ]'
  if ((SECONDS - reinjected < quiet - 2)); then
    [ "$(slice_taints "$bad")" = "gpu.nvidia.com/xid=48:NoSchedule" ]
  fi

  # No more XIDs: after the quiet period both are untainted and healthy again.
  wait_for $((quiet * 3)) "the taint on $bad to go" eval '[ -z "$(slice_taints "$bad")" ]'
  wait_for 30 "the kubelet to report $used healthy again" eval '[ "$(pod_device_health pod1 "$used")" = Healthy ]'
  [ "$(k get pod pod1 -o jsonpath='{.status.phase}')" = Running ]

  # The scheduler places the waiting pod on the recovered GPU: the untaint is a ResourceSlice
  # update, on which kube-scheduler retries every pod a DRA filter turned down (after the pod's
  # backoff, at most 10 s); docs/compatibility.md "When a pod runs after a recovery".
  wait_pod_phase pod-bad Running 60 || { echo "allocated: $(device_holders)"; false; }
  wait_log pod-bad
  [ "$(gpu_uuids pod-bad)" = "$bad_uuid" ]

  # Each recovery is recorded: a Normal event on the Node and the counter per device.
  wait_for 20 "a DeviceHealthRecovered event for $used" eval '(($(recovered_count "${used#*/}") > used_events))'
  wait_for 20 "a DeviceHealthRecovered event for $bad" eval '(($(recovered_count "${bad#*/}") > bad_events))'
  [ "$(plugin_metric "$GPU_NODE" "nvidia_dra_device_health_recoveries_total{device=\"${used#*/}\"}")" = 1 ]
  [ "$(plugin_metric "$GPU_NODE" "nvidia_dra_device_health_recoveries_total{device=\"${bad#*/}\"}")" = 1 ]
  plugin_logs "$GPU_NODE" | grep -q "device recovered.*${bad#*/}"
}
