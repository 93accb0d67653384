#!/usr/bin/env bats
# Admin access (KEP-5018, GA in Kubernetes 1.36): a monitoring pod (a DCGM-style exporter; here
# the workload image listing the GPUs it sees) in a namespace labelled
# resource.kubernetes.io/admin-access=true asks with adminAccess: true and allocationMode: All for
# every GPU of node 1 (mock h100-8x), including those workloads hold, without privileged mode. Its
# prepare and unprepare leave the workloads alone: their CDI specs, checkpoint records and the
# time-slice the plugin set for one of them. Without the label the API server refuses such a
# claim. Run through run.sh (it starts the plugins with TimeSlicingSettings=true).

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace gpu-admin
  ADMIN_NS=$E2E_NS-mon
  kubectl create namespace "$ADMIN_NS" >/dev/null
  kubectl label namespace "$ADMIN_NS" resource.kubernetes.io/admin-access=true >/dev/null
  export ADMIN_NS
  record_baseline "$GPU_NODE"
  [[ $(plugin_gates) == *TimeSlicingSettings=true* ]] || {
    echo "the plugin runs without TimeSlicingSettings=true (FEATURE_GATES=$(plugin_gates)); run this file through test/e2e/run.sh" >&2
    return 1
  }
}

teardown_file() {
  load lib
  kubectl delete namespace "$E2E_NS" "$ADMIN_NS" --wait=false >/dev/null 2>&1 || true
}

setup() {
  load lib
  load gpu_lib
}

teardown() {
  kubectl -n "$ADMIN_NS" delete pods,resourceclaims --all --wait=false >/dev/null 2>&1 || true
  clean_node "$GPU_NODE"
}

# admin_claim <namespace> [config YAML]: the monitoring claim "all-gpus": every gpu.nvidia.com
# device of the pod's node, with admin access; [config] is an opaque GpuConfig for it.
admin_claim_yaml() {
  cat <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: all-gpus, namespace: $1}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All, adminAccess: true}
EOF
  [[ -z ${2:-} ]] || cat <<EOF
    config:
    - requests: [gpus]
      opaque: {driver: gpu.nvidia.com, parameters: $2}
EOF
}

# A claim of one GPU for workloads, time-sliced Long.
ts_claim() { claim "$1" "" "" "$(ts_config Long)"; }

host_smi() { node_smi "$GPU_NODE" "$@"; }
# "<compute mode>/<time-slice>" of a GPU, as `nvidia-smi -q` on the host reports it.
gpu_setting() {
  host_smi -q -i "$1" | awk -F': ' '/Compute Mode/ {m=$2} /Compute Timeslice/ {t=$2} END {print m "/" t}'
}
checkpoint_file() { echo "$(node_var "$(node_idx "$GPU_NODE")" KUBELET_DIR)/plugins/$DRIVER/checkpoint.json"; }
claim_uid() { kubectl -n "$1" get resourceclaim "$2" -o jsonpath='{.metadata.uid}'; }
# What the workloads rely on, for a before/after comparison: each claim's CDI spec (its bytes),
# its checkpoint record, the GPU's compute mode and time-slice, and its pods' restart counts.
workload_state() {
  local c uid
  for c in "$@"; do
    uid=$(claim_uid "$E2E_NS" "$c")
    echo "== $c ($uid)"
    sha256sum <"$(cdi_spec "$GPU_NODE" "$uid")"
    jq -cS --arg u "$uid" '.data.preparedClaims[$u]' "$(checkpoint_file)"
    gpu_setting "$(slice_uuid "$(allocated "$c")")"
  done
  k get pods -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase} {.status.containerStatuses[0].restartCount}{"\n"}{end}'
}

@test "admin access: a monitoring pod sees all 8 GPUs, held ones included, and its prepare and unprepare change nothing the workloads rely on" {
  # Workloads: a plain GPU and a time-sliced one.
  claim plain
  ts_claim sliced
  pod w-plain "$GPU_NODE" "gpu=claim:plain"
  pod w-sliced "$GPU_NODE" "gpu=claim:sliced"
  wait_pod_phase w-plain Running 60
  wait_pod_phase w-sliced Running 60
  wait_log w-plain && wait_log w-sliced
  local sliced_uuid
  sliced_uuid=$(gpu_uuids w-sliced)
  [ "$(gpu_setting "$sliced_uuid")" = "Default/Long" ]
  local before
  before=$(workload_state plain sliced)

  # The monitor: not privileged, every GPU with admin access. Its claim carries a sharing config
  # (as a DeviceClass config could): it must not be applied to devices it only observes.
  admin_claim_yaml "$ADMIN_NS" "{apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: Short}}}" |
    kubectl apply -f - >/dev/null
  E2E_NS=$ADMIN_NS pod monitor "$GPU_NODE" "gpus=claim:all-gpus"
  E2E_NS=$ADMIN_NS wait_pod_phase monitor Running 60
  E2E_NS=$ADMIN_NS wait_log monitor
  E2E_NS=$ADMIN_NS assert_gpus monitor 8
  [ "$(kubectl -n "$ADMIN_NS" get pod monitor -o jsonpath='{.spec.containers[0].securityContext.privileged}')" != true ]
  # All eight results carry adminAccess, the workloads' two GPUs among them.
  local results
  results=$(kubectl -n "$ADMIN_NS" get resourceclaim all-gpus -o json |
    jq -r '.status.allocation.devices.results[] | "\(.pool)/\(.device) \(.adminAccess)"' | sort)
  # shellcheck disable=SC2086,SC2116 # word splitting puts the lines on one
  echo "# $(echo $results)" >&3
  [ "$(grep -c ' true$' <<<"$results")" -eq 8 ]
  grep -qx "$(allocated plain) true" <<<"$results"
  grep -qx "$(allocated sliced) true" <<<"$results"
  [ -f "$(cdi_spec "$GPU_NODE" "$(claim_uid "$ADMIN_NS" all-gpus)")" ]
  # Prepared: nothing of the workloads changed, no GPU got the monitor's time-slice.
  [ "$(workload_state plain sliced)" = "$before" ]
  local uuid
  for uuid in $(E2E_NS=$ADMIN_NS gpu_uuids monitor); do
    [[ $(gpu_setting "$uuid") != */Short ]] || { echo "$uuid: $(gpu_setting "$uuid")"; false; }
  done

  # The monitor goes: its spec and record go, the workloads' stay as they were and keep running.
  local admin_uid
  admin_uid=$(claim_uid "$ADMIN_NS" all-gpus)
  kubectl -n "$ADMIN_NS" delete pod monitor --wait=false >/dev/null
  kubectl -n "$ADMIN_NS" delete resourceclaim all-gpus --wait=false >/dev/null
  monitor_gone() {
    [[ ! -f $(cdi_spec "$GPU_NODE" "$admin_uid") ]] &&
      [[ $(jq --arg u "$admin_uid" '.data.preparedClaims | has($u)' "$(checkpoint_file)") == false ]]
  }
  wait_for 60 "the monitor's CDI spec and checkpoint record to go" monitor_gone
  [ "$(workload_state plain sliced)" = "$before" ]
  [ "$(gpu_setting "$sliced_uuid")" = "Default/Long" ]
  [ "$(k get pod w-plain -o jsonpath='{.status.phase}')" = Running ]
  [ "$(k get pod w-sliced -o jsonpath='{.status.phase}')" = Running ]
}

@test "admin access: the same claim in a namespace without the admin-access label is refused by the API server" {
  [[ -z $(kubectl get namespace "$E2E_NS" -o jsonpath='{.metadata.labels.resource\.kubernetes\.io/admin-access}') ]]
  run kubectl apply -f - <<<"$(admin_claim_yaml "$E2E_NS")"
  echo "# $output" >&3
  [ "$status" -ne 0 ]
  [[ $output == *'admin access to devices requires the `resource.kubernetes.io/admin-access: true` label on the containing namespace'* ]]
  [[ $output == *"spec.devices.requests[0].adminAccess: Forbidden"* ]]
  [ -z "$(k get resourceclaim all-gpus -o name --ignore-not-found)" ]
  # The same YAML is accepted where the label is (and removed again).
  admin_claim_yaml "$ADMIN_NS" | kubectl apply -f - >/dev/null
  kubectl -n "$ADMIN_NS" delete resourceclaim all-gpus >/dev/null
}
