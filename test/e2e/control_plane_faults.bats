#!/usr/bin/env bats
# Control-plane faults under a running GPU plugin (node 1, mock h100-8x): the kube-apiserver killed
# mid-watch and mid-prepare, an etcd restart, and the node's kubelet restarted under running GPU
# pods. Each test asserts what must survive: the plugin's watches resume (a slice deleted after
# the fault is republished), a device change made while the API server is down is published
# once it is back, prepares finish, running pods keep their containers and devices, and the
# plugin does not crash. These tests stop shared components of the local cluster: run them only
# under the e2e lock (test/e2e/run.sh under flock /tmp/dra-e2e.lock); teardown_file brings every
# component back, whatever failed. The 429/500 answers of an overloaded API server are covered by
# lib/k8s/client_test.cc (ClientRetryTest). Run through run.sh.

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace cp-faults
  record_baseline "$GPU_NODE"
}

teardown_file() {
  load lib
  load gpu_lib
  restore_control_plane
  start_plugin "$GPU_NODE" >/dev/null
  restore_driver
  kubectl delete namespace "$E2E_NS" --wait=false >/dev/null 2>&1 || true
}

setup() {
  load lib
  load gpu_lib
  restore_control_plane
}

teardown() {
  [[ ! -s $BATS_TEST_TMPDIR/stopped-plugin ]] || kill -CONT "$(cat "$BATS_TEST_TMPDIR/stopped-plugin")" 2>/dev/null || true
  restore_control_plane
  clean_node "$GPU_NODE"
  fresh_scheduler
  restore_driver
}

# --- Control-plane components (hack/cluster/lib.sh), under up.sh's lock as its scripts do ------

cluster_locked() { (exec 9>"$CLUSTER_DIR.lock" && flock -w 600 9 && "$@"); }
# A component that exited (or was stopped) is started again and waited for.
ensure_component() {
  component_pid "$1" >/dev/null || start_component "$1"
  wait_healthy "$1"
}
# A new kube-scheduler for the next test. One whose binding a fault interrupted can keep that pod
# in its cache, and it exits by design once the pod changes again ("Pod updated on a different
# node than previously added to ... Scheduler cache is corrupted", exit 1), e.g. when the test's
# teardown deletes it: the next test's pods then wait for a scheduler that is gone (a real control
# plane's kubelet would restart it). A fresh one lists everything anew.
fresh_scheduler() {
  cluster_locked stop_component kube-scheduler 5 >&3
  wait_for 30 "the port of kube-scheduler to be free" eval '! port_in_use "$(component_port kube-scheduler)"'
  cluster_locked ensure_component kube-scheduler >&3
}
restore_control_plane() {
  local c
  for c in "${COMPONENTS[@]}"; do cluster_locked ensure_component "$c" >&3; done
  # The kubelet's command line lives in node-lib.sh; node.sh starts it (a stopped one too).
  component_pid "$GPU_NODE/kubelet" >/dev/null ||
    "$REPO_ROOT/hack/cluster/node.sh" restart-kubelet "$GPU_NODE" >&3
}
# kill_component <name>: SIGKILL (a crash: no graceful shutdown, connections reset). Returns once
# its port is free: the killed Go process's main thread is reaped (what stop_component waits for)
# before its other threads have closed the listening socket, and a restart in that window fails
# with "address already in use" (seen with restart-apiserver.sh --kill).
kill_component() {
  cluster_locked stop_component "$1" 0 >&3
  wait_for 30 "the port of $1 to be free" eval '! port_in_use "$(component_port '"$1"')"'
}

api_up() { kubectl get --raw /readyz >/dev/null 2>&1; }
# publish_failures <log glob>: how many times the plugin logged a failed slice publish, read from
# the node's files (plugin_log_glob), so that it works while the API server is down.
publish_failures() {
  # shellcheck disable=SC2086 # the glob expands here
  cat $1 2>/dev/null | grep -c 'publishing resource slices failed' || true
}

# Sorted "device=uuid" lines of the node's published devices.
published() {
  kubectl get resourceslices -o json --field-selector "spec.nodeName=$1,spec.driver=$DRIVER" |
    jq -r '.items[].spec.devices[] | "\(.name)=\(.attributes.uuid.string)"' | sort
}

# Deletes the node's ResourceSlices; only the plugin's slice watch can bring them back.
delete_slices() {
  kubectl delete resourceslices --field-selector "spec.nodeName=$1,spec.driver=$DRIVER" >/dev/null
}

# "<key>=<value>:<effect>" of every taint of a published device (pool/device).
slice_taints() {
  kubectl get resourceslices -o json --field-selector "spec.driver=$DRIVER" |
    jq -r --arg p "${1%%/*}" --arg d "${1#*/}" '.items[] | select(.spec.pool.name == $p)
      | .spec.devices[] | select(.name == $d) | .taints[]? | "\(.key)=\(.value // ""):\(.effect)"'
}

registrations() { plugin_logs "$1" | grep -c '"plugin registered with kubelet"' || true; }
container_id() { k get pod "$1" -o jsonpath='{.status.containerStatuses[0].containerID}'; }
container_restarts() { k get pod "$1" -o jsonpath='{.status.containerStatuses[0].restartCount}'; }

# running_gpu_pod <pod>: a Running pod on $GPU_NODE with one GPU from a template claim.
running_gpu_pod() {
  claim_template single-gpu
  pod "$1" "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase "$1" Running 90
  wait_log "$1"
  assert_gpus "$1" 1
}

@test "kube-apiserver killed mid-watch: the plugin's slice watch resumes (a deleted slice is republished), no plugin restart" {
  local before restarts
  before=$(published "$GPU_NODE")
  [ "$(grep -c . <<<"$before")" -eq 8 ]
  restarts=$(plugin_restarts "$GPU_NODE")

  kill_component kube-apiserver
  restore_control_plane
  # The slices are still there, and deleting them reaches the plugin only through its watch.
  [ "$(published "$GPU_NODE")" = "$before" ]
  delete_slices "$GPU_NODE"
  wait_for 60 "the plugin to republish its slices" eval '[ "$(published "$GPU_NODE")" = "$before" ]'
  [ "$(plugin_restarts "$GPU_NODE")" = "$restarts" ]
}

@test "a device change while kube-apiserver is down is published once it is back (XID taint, NVMLDeviceHealthCheck)" {
  change_driver --set featureGates.NVMLDeviceHealthCheck=true
  wait_plugin_ready "$GPU_NODE"
  local dev uuid restarts
  dev=$GPU_NODE/$(published "$GPU_NODE" | sed -n '1s/=.*//p')
  uuid=$(slice_uuid "$dev")
  [ -n "$uuid" ]
  [ -z "$(slice_taints "$dev")" ]
  restarts=$(plugin_restarts "$GPU_NODE")

  local logs failed_before
  logs=$(plugin_log_glob "$GPU_NODE")
  kill_component kube-apiserver
  run api_up
  [ "$status" -ne 0 ]
  # shellcheck disable=SC2034 # read by the eval of wait_for below
  failed_before=$(publish_failures "$logs")
  node_smi "$GPU_NODE" --mock-inject-xid "$uuid" 48
  # The plugin sees the XID and fails to publish it: its log says so before the API server returns.
  wait_for 60 "the plugin to fail publishing the taint" eval '(($(publish_failures "$logs") > failed_before))'
  restore_control_plane
  wait_for 60 "the taint on $dev" eval '[ "$(slice_taints "$dev")" = "gpu.nvidia.com/xid=48:NoSchedule" ]'
  [ "$(plugin_restarts "$GPU_NODE")" = "$restarts" ]
}

# prepare_call_waiting <pid>: the kubelet has written a request of at least 100 bytes (a
# NodePrepareResources call; HTTP/2 window updates and pings are 13 and 17 bytes) into a DRA socket
# connection of the stopped plugin process <pid>, which has not read it.
prepare_call_waiting() {
  ss -xHp 2>/dev/null | grep -F "pid=$1," | grep -F '/dra-' | awk '$3 >= 100 { f = 1 } END { exit !f }'
}

@test "kube-apiserver killed mid-prepare: the pod still starts once it is back, with its GPU and CDI spec" {
  local pid logs cname
  claim_template single-gpu
  pid=$(plugin_pid "$GPU_NODE")
  logs=$(plugin_log_glob "$GPU_NODE")
  # The plugin is stopped (SIGSTOP) while the kubelet calls it, so that the call waits in the
  # socket; the API server dies then, and the plugin, continued, reads the claim from a dead API
  # server. (teardown continues it whatever failed.)
  echo "$pid" >"$BATS_TEST_TMPDIR/stopped-plugin"
  kill -STOP "$pid"
  pod pod1 "$GPU_NODE" "gpu=template:single-gpu"
  wait_for 60 "the kubelet's prepare call to wait in the stopped plugin's socket" prepare_call_waiting "$pid"
  cname=$(claim_of pod1 gpu)
  kill_component kube-apiserver
  kill -CONT "$pid"
  wait_for 30 "the plugin's prepare of $cname to fail on the dead API server" eval \
    'cat '"$logs"' 2>/dev/null | grep "NodePrepareResources failed" | grep -qF "retrieve claim $E2E_NS/$cname"'
  restore_control_plane
  # The kubelet's next try, with the API server back, prepares it.
  wait_pod_phase pod1 Running 120
  wait_log pod1
  assert_gpus pod1 1
  assert_one_gpu_claim pod1 >/dev/null
  # The same plugin process did it all: no crash, no restart.
  [ "$(plugin_pid "$GPU_NODE")" = "$pid" ]
}

@test "etcd restart: running pods keep their GPUs, slices stay, watches and prepare recover" {
  running_gpu_pod pod1
  local before id uuid restarts
  before=$(published "$GPU_NODE")
  id=$(container_id pod1)
  uuid=$(gpu_uuids pod1)
  restarts=$(plugin_restarts "$GPU_NODE")

  kill_component etcd
  # The outage, as the API server sees it: /readyz fails once it has lost etcd.
  wait_for 60 "the API server to report etcd gone" eval '! api_up'
  restore_control_plane
  wait_for 60 "the API server to serve again" api_up

  [ "$(published "$GPU_NODE")" = "$before" ]
  [ "$(k get pod pod1 -o jsonpath='{.status.phase}')" = Running ]
  [ "$(container_id pod1)" = "$id" ]
  [ "$(container_restarts pod1)" = 0 ]
  # A new claim is allocated, prepared and run, on another GPU than pod1's.
  pod pod2 "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase pod2 Running 120
  wait_log pod2
  assert_gpus pod2 1
  [ "$(gpu_uuids pod2)" != "$uuid" ]
  # The plugin's slice watch is back too.
  delete_slices "$GPU_NODE"
  wait_for 60 "the plugin to republish its slices" eval '[ "$(published "$GPU_NODE")" = "$before" ]'
  [ "$(plugin_restarts "$GPU_NODE")" = "$restarts" ]
}

@test "kubelet restart with running GPU pods: pods keep running, the plugin re-registers, slices stay" {
  running_gpu_pod pod1
  local before id uuid regs uid restarts
  before=$(published "$GPU_NODE")
  id=$(container_id pod1)
  uuid=$(gpu_uuids pod1)
  uid=$(k get resourceclaim "$(claim_of pod1 gpu)" -o jsonpath='{.metadata.uid}')
  # shellcheck disable=SC2034 # read by the eval of wait_for below
  regs=$(registrations "$GPU_NODE")
  restarts=$(plugin_restarts "$GPU_NODE")

  "$REPO_ROOT/hack/cluster/node.sh" restart-kubelet "$GPU_NODE" >&3
  wait_for 90 "the plugin to register with the new kubelet" eval '(( $(registrations "$GPU_NODE") > regs ))'
  # Same container (not restarted), same GPU, its claim still prepared on the node.
  [ "$(k get pod pod1 -o jsonpath='{.status.phase}')" = Running ]
  [ "$(container_id pod1)" = "$id" ]
  [ "$(container_restarts pod1)" = 0 ]
  [ -f "$(cdi_spec "$GPU_NODE" "$uid")" ]
  [ "$(checkpoint_claims "$GPU_NODE")" -eq $(($(base_cp "$GPU_NODE") + 1)) ]
  # The slices are the same devices (a kubelet that wiped them at start gets them republished).
  wait_for 60 "the node's slices" eval '[ "$(published "$GPU_NODE")" = "$before" ]'
  # The re-registered plugin prepares for the new kubelet, on another GPU than pod1's.
  pod pod2 "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase pod2 Running 120
  wait_log pod2
  assert_gpus pod2 1
  [ "$(gpu_uuids pod2)" != "$uuid" ]
  [ "$(plugin_restarts "$GPU_NODE")" = "$restarts" ]
  # And unprepares: pod1's claim goes with it.
  k delete pod pod1 --wait=true --timeout=60s
  wait_for 60 "pod1's CDI spec to go" eval '[ ! -e "$(cdi_spec "$GPU_NODE" "$uid")" ]'
}
