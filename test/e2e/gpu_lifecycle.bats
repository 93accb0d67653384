#!/usr/bin/env bats
# Claim lifecycle on a real node: unprepare after the pod goes, nothing leaks over many cycles,
# and the plugin survives restarts and crashes without losing prepared claims. Pods run on node 1
# (mock h100-8x). Run through run.sh.

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace gpu-life
  record_baseline "$GPU_NODE"
}

teardown_file() {
  load lib
  load gpu_lib
  # A test that failed half-way must not leave the node's plugin stopped.
  "$REPO_ROOT/hack/cluster/gpu-plugin.sh" start "$GPU_NODE" >/dev/null
  kubectl delete namespace "$E2E_NS" --wait=false >/dev/null 2>&1 || true
}

setup() {
  load lib
  load gpu_lib
}

teardown() {
  clean_node "$GPU_NODE"
}

@test "after the pod is deleted its claim is deallocated, unprepared and its CDI spec removed" {
  claim one-gpu
  pod pod1 "$GPU_NODE" "gpu=claim:one-gpu"
  wait_pod_phase pod1 Running 60
  local uid spec
  uid=$(k get resourceclaim one-gpu -o jsonpath='{.metadata.uid}')
  spec=$(cdi_spec "$GPU_NODE" "$uid")
  [ -f "$spec" ]
  [ "$(checkpoint_claims "$GPU_NODE")" -eq $(($(base_cp "$GPU_NODE") + 1)) ]
  [ -n "$(allocated one-gpu)" ]

  k delete pod pod1 --wait=true --timeout=60s
  # The claim outlives the pod (it is not from a template), without allocation or consumers.
  local deadline=$((SECONDS + 30))
  until [[ -z $(allocated one-gpu) && -z $(k get resourceclaim one-gpu -o jsonpath='{.status.reservedFor}') ]]; do
    ((SECONDS < deadline)) || { k get resourceclaim one-gpu -o yaml; false; }
    sleep 0.3
  done
  [ ! -e "$spec" ]
  [ "$(checkpoint_claims "$GPU_NODE")" -eq "$(base_cp "$GPU_NODE")" ]
  grep -q "\"unprepared claim\" claim=\"$uid\"" "$(plugin_log "$GPU_NODE")"
}

@test "10 create/delete cycles leak nothing: same devices, no CDI spec or checkpoint entry left" {
  claim_template single-gpu
  local before i log lines
  before=$(slice_device_count "$GPU_NODE")
  log=$(plugin_log "$GPU_NODE")
  lines=$(wc -l <"$log")
  for i in $(seq 10); do
    pod "cycle$i" "$GPU_NODE" "gpu=template:single-gpu" "" Never "nvidia-smi -L"
    wait_pod_phase "cycle$i" Succeeded 60
    assert_gpus "cycle$i" 1
    k delete pod "cycle$i" --wait=false >/dev/null
  done
  clean_node "$GPU_NODE"
  [ "$(slice_device_count "$GPU_NODE")" -eq "$before" ]
  [ "$(cdi_count "$GPU_NODE")" -eq "$(base_cdi "$GPU_NODE")" ]
  [ "$(checkpoint_claims "$GPU_NODE")" -eq "$(base_cp "$GPU_NODE")" ]
  # Ten prepares, each with its unprepare.
  [ "$(tail -n +$((lines + 1)) "$log" | grep -c '"prepared claim"')" -eq 10 ]
  [ "$(tail -n +$((lines + 1)) "$log" | grep -c '"unprepared claim"')" -eq 10 ]
}

@test "a plugin restart between prepare and unprepare loses nothing" {
  claim_template single-gpu
  pod pod1 "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase pod1 Running 60
  wait_log pod1
  local uid spec started
  uid=$(k get resourceclaim "$(claim_of pod1 gpu)" -o jsonpath='{.metadata.uid}')
  spec=$(cdi_spec "$GPU_NODE" "$uid")
  started=$(k get pod pod1 -o jsonpath='{.status.containerStatuses[0].state.running.startedAt}')

  "$REPO_ROOT/hack/cluster/gpu-plugin.sh" restart "$GPU_NODE"
  # The pod kept running in the same container; its claim is still prepared.
  [ "$(k get pod pod1 -o jsonpath='{.status.phase}')" = Running ]
  [ "$(k get pod pod1 -o jsonpath='{.status.containerStatuses[0].state.running.startedAt}')" = "$started" ]
  [ -f "$spec" ]
  [ "$(checkpoint_claims "$GPU_NODE")" -eq $(($(base_cp "$GPU_NODE") + 1)) ]
  assert_gpus pod1 1

  # The new plugin process unprepares it from its checkpoint.
  k delete pod pod1 --wait=true --timeout=60s
  clean_node "$GPU_NODE"
  [ ! -e "$spec" ]
  local log line
  log=$(plugin_log "$GPU_NODE")
  line=$(grep -n '^==== .* starting ' "$log" | tail -n 1 | cut -d: -f1)
  tail -n +"$line" "$log" | grep -q "\"unprepared claim\" claim=\"$uid\""
}

@test "kill -9 of the plugin, slices wiped, restart: slices republished and new pods work" {
  local before
  before=$(slice_device_count "$GPU_NODE")
  "$REPO_ROOT/hack/cluster/gpu-plugin.sh" stop --kill "$GPU_NODE"
  # A crash leaves its sockets; the kubelet wipes the node's slices 30 s after losing the driver.
  [ -S "$(node_var 1 KUBELET_DIR)/plugins_registry/gpu.nvidia.com-reg.sock" ]
  kubectl delete resourceslices --field-selector "spec.nodeName=$GPU_NODE,spec.driver=$DRIVER" >/dev/null
  [ "$(slice_device_count "$GPU_NODE")" -eq 0 ]

  "$REPO_ROOT/hack/cluster/gpu-plugin.sh" start "$GPU_NODE"
  [ "$(slice_device_count "$GPU_NODE")" -eq "$before" ]
  claim_template single-gpu
  pod pod1 "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase pod1 Running 60
  wait_log pod1
  assert_gpus pod1 1
}
