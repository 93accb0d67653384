#!/usr/bin/env bats
# MIG devices on node 2 (mock a100-mig-4x: MIG on, static 1g.5gb/2g.10gb/3g.20gb instances). The
# CDI spec injects the parent's /dev/nvidia<minor> and the two nvidia-caps nodes of the one MIG
# device; the mock's nvidia-smi shows a MIG device only when both caps nodes are there. Run
# through run.sh.

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
