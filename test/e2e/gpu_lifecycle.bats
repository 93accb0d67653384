#!/usr/bin/env bats
# shellcheck disable=SC2030,SC2031 # each @test runs in its own subshell; running_gpu_pod sets uid there
# Claim lifecycle on a real node: unprepare after the pod goes, nothing leaks over many cycles,
# the plugin survives restarts and crashes without losing prepared claims, and after a reboot
# (simulated: another boot ID in the checkpoint, a kubelet restart, the pod's sandbox killed)
# prepares them afresh.
# Pods run on node 1 (mock h100-8x). The plugin is the Helm-installed DaemonSet pod: a restart
# deletes the pod, a crash is SIGKILL to its process. Run through run.sh.

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace gpu-life
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
}

# running_gpu_pod <pod>: a running pod on $GPU_NODE with one GPU from a template claim; sets uuid
# (the GPU it sees) and uid (its claim's UID) in the caller.
running_gpu_pod() {
  claim_template single-gpu
  pod "$1" "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase "$1" Running 60
  wait_log "$1"
  uuid=$(gpu_uuids "$1")
  uid=$(k get resourceclaim "$(claim_of "$1" gpu)" -o jsonpath='{.metadata.uid}')
}

# restart_sees_gpu <pod> <uuid>: the pod's container exits (SIGTERM to its shell) and the kubelet
# starts it again, from the claim's CDI spec as it is on the node now; the new container must see
# exactly the GPU <uuid>.
restart_sees_gpu() {
  # The exec'd kill runs inside the container, so it may be SIGKILLed with the container before it
  # returns (exit 137): that, too, means the signal was sent; the restart count below decides.
  local rc=0
  k exec "$1" -c ctr -- kill -TERM 1 || rc=$?
  ((rc == 0 || rc == 137)) || return "$rc"
  wait_for 60 "$1's container restarted" eval '[ "$(k get pod '"$1"' -o jsonpath="{.status.containerStatuses[0].restartCount}")" = 1 ]'
  wait_pod_phase "$1" Running 60
  wait_log "$1"
  assert_gpus "$1" 1
  [ "$(gpu_uuids "$1")" = "$2" ]
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
  plugin_logs "$GPU_NODE" | grep -q "\"unprepared claim\" claim=\"$uid\""
}

@test "10 create/delete cycles leak nothing: same devices, no CDI spec or checkpoint entry left" {
  claim_template single-gpu
  local before i lines new
  before=$(slice_device_count "$GPU_NODE")
  lines=$(plugin_logs "$GPU_NODE" | wc -l)
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
  new=$(plugin_logs "$GPU_NODE" | tail -n +$((lines + 1)))
  [ "$(grep -c '"prepared claim"' <<<"$new")" -eq 10 ]
  [ "$(grep -c '"unprepared claim"' <<<"$new")" -eq 10 ]
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

  restart_plugin "$GPU_NODE"
  # The pod kept running in the same container; its claim is still prepared.
  [ "$(k get pod pod1 -o jsonpath='{.status.phase}')" = Running ]
  [ "$(k get pod pod1 -o jsonpath='{.status.containerStatuses[0].state.running.startedAt}')" = "$started" ]
  [ -f "$spec" ]
  [ "$(checkpoint_claims "$GPU_NODE")" -eq $(($(base_cp "$GPU_NODE") + 1)) ]
  assert_gpus pod1 1

  # The new plugin pod unprepares it from its checkpoint.
  k delete pod pod1 --wait=true --timeout=60s
  clean_node "$GPU_NODE"
  [ ! -e "$spec" ]
  plugin_logs "$GPU_NODE" | grep -q "\"unprepared claim\" claim=\"$uid\""
}

@test "kill -9 of the plugin while a claim is prepared: restarted in its pod, nothing lost, new pods work" {
  claim_template single-gpu
  pod pod1 "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase pod1 Running 60
  wait_log pod1
  local before pod uid
  before=$(slice_device_count "$GPU_NODE")
  pod=$(plugin_pod "$GPU_NODE")
  uid=$(k get resourceclaim "$(claim_of pod1 gpu)" -o jsonpath='{.metadata.uid}')

  kill_plugin "$GPU_NODE"
  # The kubelet restarted the container in the same pod; its checkpoint still holds the claim.
  [ "$(plugin_pod "$GPU_NODE")" = "$pod" ]
  [ "$(slice_device_count "$GPU_NODE")" -eq "$before" ]
  [ -f "$(cdi_spec "$GPU_NODE" "$uid")" ]
  [ "$(checkpoint_claims "$GPU_NODE")" -eq $(($(base_cp "$GPU_NODE") + 1)) ]
  [ "$(k get pod pod1 -o jsonpath='{.status.phase}')" = Running ]

  pod pod2 "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase pod2 Running 60
  wait_log pod2
  assert_gpus pod2 1
  [ "$(gpu_uuids pod1)" != "$(gpu_uuids pod2)" ]
  # The restarted process unprepares the claim it did not prepare itself.
  k delete pod pod1 --wait=true --timeout=60s >/dev/null
  wait_for 60 "CDI spec of claim $uid removed" test ! -e "$(cdi_spec "$GPU_NODE" "$uid")"
  plugin_logs "$GPU_NODE" | grep -q "\"unprepared claim\" claim=\"$uid\""
}

@test "a corrupt checkpoint under a running pod: its claim is rebuilt, its container restarts with its GPU, unprepare is clean" {
  local dir uid spec uuid
  dir="$(node_var "$(node_idx "$GPU_NODE")" KUBELET_DIR)/plugins/$DRIVER"
  running_gpu_pod pod1
  spec=$(cdi_spec "$GPU_NODE" "$uid")

  # The plugin leaves the node, its checkpoint is damaged, the plugin comes back.
  stop_plugin "$GPU_NODE"
  printf '{"checksum": 1, "data": {"preparedClaims": {tru' >"$dir/checkpoint.json"
  start_plugin "$GPU_NODE"
  # The claim is in use on this node (the API server says so), so its CDI spec stays and its
  # record is rebuilt from the spec; the Node event says so.
  wait_for 30 "the claim's record rebuilt" eval '[ "$(checkpoint_claims "$GPU_NODE")" -eq $(($(base_cp "$GPU_NODE") + 1)) ]'
  [ -f "$spec" ]
  jq -e --arg u "$uid" '.data.preparedClaims[$u].state == "PrepareCompleted"' "$dir/checkpoint.json" >/dev/null
  wait_for 30 "a CheckpointCorrupt event that says what was rebuilt" eval \
    'kubectl get events -A -o json --field-selector involvedObject.kind=Node,involvedObject.name=$GPU_NODE,reason=CheckpointCorrupt |
       jq -e "[.items[] | select(.message | test(\"rebuilt [1-9][0-9]* \"))] | length > 0" >/dev/null'

  # The workload's container exits and the kubelet starts it again from the same CDI spec.
  restart_sees_gpu pod1 "$uuid"

  # The rebuilt record unprepares like any other.
  k delete pod pod1 --wait=true --timeout=60s >/dev/null
  wait_for 60 "CDI spec of claim $uid removed" test ! -e "$spec"
  plugin_logs "$GPU_NODE" | grep -q "\"unprepared claim\" claim=\"$uid\""
  rm -f "$dir"/checkpoint.json.corrupt-*
}

@test "a reboot with the CDI directory kept: nothing is rebuilt from the old spec, the claim is prepared afresh" {
  local dir uid spec uuid lines i pod_uid sandbox
  dir="$(node_var "$(node_idx "$GPU_NODE")" KUBELET_DIR)/plugins/$DRIVER"
  i=$(node_idx "$GPU_NODE")
  running_gpu_pod pod1
  spec=$(cdi_spec "$GPU_NODE" "$uid")

  # The plugin leaves the node and its checkpoint becomes what a reboot leaves: valid, written in
  # another boot. The CDI directory keeps the claim's spec, as where it is no tmpfs.
  stop_plugin "$GPU_NODE"
  set_checkpoint_boot_id "$dir/checkpoint.json" "e2e-boot-before-$uid"
  [ -f "$spec" ]
  start_plugin "$GPU_NODE"
  # The records are dropped and the specs written before the boot go with them, before serving.
  plugin_logs "$GPU_NODE" | grep -q '"invalidating checkpoint: node rebooted since it was written"'
  plugin_logs "$GPU_NODE" | grep -q '"removed the CDI specs written before the node rebooted"'
  [ ! -e "$spec" ]
  [ "$(jq --arg u "$uid" '.data.preparedClaims | has($u)' "$dir/checkpoint.json")" = false ]

  # What follows a reboot on the node: the kubelet starts again (a restarted kubelet no longer
  # counts its claims as prepared) and finds the pod's sandbox gone; it prepares the pod's claims
  # before it creates a new sandbox. A kubelet restart alone prepares nothing: the kubelet prepares
  # claims only on its way to a new sandbox, so the sandbox's pause task is killed here.
  lines=$(plugin_logs "$GPU_NODE" | wc -l)
  "$REPO_ROOT/hack/cluster/node.sh" restart-kubelet "$GPU_NODE" >&3
  pod_uid=$(k get pod pod1 -o jsonpath='{.metadata.uid}')
  sandbox=$(node_ctr "$i" containers ls -q "labels.\"io.kubernetes.pod.uid\"==$pod_uid,labels.\"io.cri-containerd.kind\"==sandbox")
  [ -n "$sandbox" ]
  node_ctr "$i" tasks kill -s SIGKILL "$sandbox"
  wait_for 90 "the claim prepared afresh" eval '[ -f "$spec" ] && jq -e --arg u "$uid" ".data.preparedClaims[\$u].state == \"PrepareCompleted\"" "$dir/checkpoint.json" >/dev/null'
  plugin_logs "$GPU_NODE" | tail -n +$((lines + 1)) | grep -q "\"prepared claim\" claim=\"$uid\""
  [ "$(plugin_logs "$GPU_NODE" | grep -c '"rebuilt the checkpoint record of a prepared claim"')" -eq 0 ]

  # The workload's container runs again in the new sandbox, from the new spec, with its GPU.
  wait_for 90 "pod1's container running again" eval '[ "$(k get pod pod1 -o jsonpath="{.status.containerStatuses[0].restartCount}/{.status.containerStatuses[0].ready}")" = 1/true ]'
  wait_log pod1
  assert_gpus pod1 1
  [ "$(gpu_uuids pod1)" = "$uuid" ]
  k delete pod pod1 --wait=true --timeout=60s >/dev/null
  wait_for 60 "CDI spec of claim $uid removed" test ! -e "$spec"
  plugin_logs "$GPU_NODE" | grep -q "\"unprepared claim\" claim=\"$uid\""
}

@test "switching from the Go driver: its checkpoint and CDI spec are adopted, the pod's container restarts, unprepare is clean" {
  local dir uid json yaml uuid before_events
  dir="$(node_var "$(node_idx "$GPU_NODE")" KUBELET_DIR)/plugins/$DRIVER"
  running_gpu_pod pod1
  json=$(cdi_spec "$GPU_NODE" "$uid")
  yaml=${json%.json}.yaml
  # shellcheck disable=SC2034 # read by the eval of wait_for below
  before_events=$(kubectl get events -A -o json --field-selector "involvedObject.name=$GPU_NODE,reason=CheckpointAdopted" | jq '.items | length')

  # The node as the Go driver leaves it: its checkpoint format, its spec file name (CDI specs are
  # YAML or JSON; JSON is YAML).
  stop_plugin "$GPU_NODE"
  rm -f "$dir"/checkpoint.json.go-driver-*
  go_checkpoint_from_ours "$dir/checkpoint.json" >"$dir/checkpoint.json.tmp"
  mv "$dir/checkpoint.json.tmp" "$dir/checkpoint.json"
  jq -e --arg u "$uid" '.v2.preparedClaims[$u].checkpointState == "PrepareCompleted"' "$dir/checkpoint.json" >/dev/null
  mv "$json" "$yaml"
  start_plugin "$GPU_NODE"

  # Adopted: our format now, the claim completed, the Go file kept for a rollback, the Go spec
  # kept, a Node event.
  wait_for 30 "the checkpoint rewritten in our format" jq -e --arg u "$uid" \
    '.version == 1 and .data.preparedClaims[$u].state == "PrepareCompleted"' "$dir/checkpoint.json"
  [ -n "$(find "$dir" -maxdepth 1 -name 'checkpoint.json.go-driver-*')" ]
  [ -f "$yaml" ]
  wait_for 30 "a CheckpointAdopted event" eval '(( $(kubectl get events -A -o json --field-selector "involvedObject.name=$GPU_NODE,reason=CheckpointAdopted" | jq ".items | length") > before_events ))'

  # The workload's container exits and starts again from the Go driver's spec.
  restart_sees_gpu pod1 "$uuid"

  # Our plugin unprepares the adopted claim and removes the Go driver's spec file.
  k delete pod pod1 --wait=true --timeout=60s >/dev/null
  wait_for 60 "the Go driver's CDI spec of claim $uid removed" test ! -e "$yaml"
  plugin_logs "$GPU_NODE" | grep -q "\"unprepared claim\" claim=\"$uid\""
  rm -f "$dir"/checkpoint.json.go-driver-*
}
