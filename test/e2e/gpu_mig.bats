#!/usr/bin/env bats
# MIG devices on node 2 (mock a100-mig-4x: MIG on, static 1g.5gb/2g.10gb/3g.20gb instances). The
# CDI spec injects the parent's /dev/nvidia<minor> and the two nvidia-caps nodes of the one MIG
# device; the mock's nvidia-smi shows a MIG device only when both caps nodes are there. A
# MigDeviceConfig's time-slice interval is read back on the parent GPU with the node's fake
# nvidia-smi (docs/sharing.md). Run through run.sh (it starts the plugins with
# TimeSlicingSettings=true).

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace gpu-mig
  [[ -z $MIG_NODE ]] || record_baseline "$MIG_NODE"
}

teardown_file() {
  load lib
  kubectl delete namespace "$E2E_NS" --wait=false >/dev/null 2>&1 || true
}

setup() {
  load lib
  load gpu_lib
  [[ -n $MIG_NODE ]] || skip "needs 2 nodes (hack/cluster/up.sh --nodes 2)"
}

teardown() {
  [[ -z $MIG_NODE ]] || clean_node "$MIG_NODE"
}

mig_lines() { k logs "$1" | grep -E '^  MIG [0-9]+g\.[0-9]+gb +Device +[0-9]+: \(UUID: MIG-[0-9a-f-]+\)$' || true; }

@test "a pod with a mig.nvidia.com claim sees exactly one MIG device, the allocated one" {
  claim_template one-mig mig.nvidia.com
  pod pod1 "$MIG_NODE" "mig=template:one-mig"
  wait_pod_phase pod1 Running 60
  wait_log pod1
  k logs pod1
  [ "$(mig_lines pod1 | wc -l)" -eq 1 ]
  # The parent GPU is listed too, as real nvidia-smi does, and only that one.
  assert_gpus pod1 1
  local dev
  dev=$(allocated "$(claim_of pod1 mig)")
  [[ $dev =~ ^$MIG_NODE/gpu-[0-9]+-mig- ]] || { echo "allocated: $dev"; false; }
  [ "$(mig_lines pod1 | grep -oE 'MIG-[0-9a-f-]+')" = "$(slice_uuid "$dev")" ]
}

@test "MIG devices selected by profile: a 1g.5gb and a 3g.20gb pod see their own profiles" {
  local a="device.attributes['gpu.nvidia.com']"
  claim_template small mig.nvidia.com "selectors: [{cel: {expression: \"$a.profile == '1g.5gb'\"}}]"
  claim_template large mig.nvidia.com "selectors: [{cel: {expression: \"$a.profile == '3g.20gb'\"}}]"
  pod small "$MIG_NODE" "mig=template:small"
  pod large "$MIG_NODE" "mig=template:large"
  wait_pod_phase small Running 60
  wait_pod_phase large Running 60
  wait_log small && wait_log large
  [[ $(mig_lines small) == "  MIG 1g.5gb "* ]] || { k logs small; false; }
  [[ $(mig_lines large) == "  MIG 3g.20gb "* ]] || { k logs large; false; }
}

# "<compute mode>/<time-slice>" of GPU $1 on the MIG node, as the node's `nvidia-smi -q` reports
# it (the mock NVML state the plugin's nvidia-smi runs wrote).
mig_gpu_setting() {
  node_smi "$MIG_NODE" -q -i "$1" | awk -F': ' '/Compute Mode/ {m=$2} /Compute Timeslice/ {t=$2} END {print m "/" t}'
}
mig_ts_config() {
  echo "{apiVersion: resource.nvidia.com/v1beta1, kind: MigDeviceConfig, sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: $1}}}"
}

@test "a MigDeviceConfig interval is set on the parent GPU; a different one on a sibling is refused; reset after" {
  [[ $(plugin_gates) == *TimeSlicingSettings=true* ]] || skip "the plugin runs without TimeSlicingSettings=true"
  # A parent GPU with two MIG devices no claim holds (a100-mig-4x: GPUs 0 and 1 have four each).
  local held parent
  held=$(device_holders | cut -d' ' -f1 | jq -R . | jq -sc .)
  parent=$(kubectl get resourceslices -o json --field-selector "spec.nodeName=$MIG_NODE,spec.driver=$DRIVER" |
    jq -r --argjson held "$held" '[.items[] | .spec.pool.name as $p | .spec.devices[] |
      select(.attributes.type.string == "mig" and ((.taints // []) | length) == 0) |
      select("\($p)/\(.name)" | IN($held[]) | not) | .attributes.parentUUID.string] |
      group_by(.) | map(select(length >= 2)) | .[0][0] // empty')
  [ -n "$parent" ] || { echo "no GPU with two free MIG devices on $MIG_NODE; allocated: $(device_holders)"; false; }
  local before sel
  before=$(mig_gpu_setting "$parent")
  [[ $before == */Default ]] || { echo "parent $parent starts at $before"; false; }
  sel=$(printf 'selectors: [{cel: {expression: "device.attributes[%s].parentUUID == %s"}}]' "'gpu.nvidia.com'" "'$parent'")

  claim mig-long mig.nvidia.com "$sel" "$(mig_ts_config Long)"
  pod pod1 "$MIG_NODE" "mig=claim:mig-long"
  wait_pod_phase pod1 Running 60
  echo "# $parent while pod1 runs: $(mig_gpu_setting "$parent")" >&3
  # The interval only: the compute mode is as it was.
  [ "$(mig_gpu_setting "$parent")" = "${before%/*}/Long" ]

  # A sibling MIG device of the same GPU asking Short: refused, with the reason in the events.
  claim mig-short mig.nvidia.com "$sel" "$(mig_ts_config Short)"
  pod pod2 "$MIG_NODE" "mig=claim:mig-short"
  local events
  events=$(pod_events_with pod2 "holds interval Long on that GPU")
  echo "# pod2: $(grep -o 'claim [^ ]* ([^)]*) asks time-slice interval Short[^;]*' <<<"$events" | head -n1)" >&3
  [ "$(k get pod pod2 -o jsonpath='{.status.phase}')" = Pending ]
  [ "$(k get pod pod1 -o jsonpath='{.status.phase}')" = Running ]
  [ "$(mig_gpu_setting "$parent")" = "${before%/*}/Long" ]

  # The refused one goes first (the kubelet would prepare it once pod1 is gone), then pod1: the
  # parent is back to what it was.
  k delete pod pod2 --wait=false >/dev/null
  k delete resourceclaim mig-short --wait=false >/dev/null
  k delete pod pod1 --wait=false >/dev/null
  k delete resourceclaim mig-long --wait=false >/dev/null
  clean_node "$MIG_NODE"
  [ "$(mig_gpu_setting "$parent")" = "$before" ]
}
