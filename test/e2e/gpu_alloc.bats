#!/usr/bin/env bats
# GPU allocation through the whole stack: the kube-scheduler allocates from the plugin's
# ResourceSlices, the kubelet calls the plugin's NodePrepareResources, containerd injects the CDI
# spec the plugin wrote, and inside the container the mock's `nvidia-smi -L` lists exactly the GPUs
# whose /dev/nvidia<minor> was injected. Pods run on node 1 (mock h100-8x). Run through run.sh.

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace gpu
  record_baseline "$GPU_NODE"
}

teardown_file() {
  load lib
  kubectl delete namespace "$E2E_NS" --wait=false >/dev/null 2>&1 || true
}

setup() {
  load lib
  load gpu_lib
}

teardown() {
  clean_node "$GPU_NODE"
}

# Sees exactly one GPU, the one the scheduler allocated; DRA_E2E_BREAK_CDI breaks injection on
# purpose (gpu_lib.bash, sabotage_cdi) and must make this test fail.
@test "one pod, one GPU: nvidia-smi -L lists exactly the allocated GPU" {
  claim_template single-gpu
  local sabotage=""
  if [[ -n ${DRA_E2E_BREAK_CDI:-} ]]; then
    sabotage_cdi "$GPU_NODE" "$DRA_E2E_BREAK_CDI" &
    sabotage=$!
  fi
  INIT_SLEEP=${sabotage:+3} pod pod1 "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase pod1 Running 60
  [[ -z $sabotage ]] || wait "$sabotage"
  wait_log pod1
  assert_gpus pod1 1

  # The claim: allocated by the scheduler to one GPU of this node's pool (the one the container
  # sees, with its CDI spec on the node), reserved for the pod.
  assert_one_gpu_claim pod1 >/dev/null
  [ "$(k get resourceclaim "$(claim_of pod1 gpu)" -o jsonpath='{.status.reservedFor[*].name}')" = pod1 ]
}

@test "two pods, a claim template each: two different GPUs" {
  claim_template single-gpu
  pod pod1 "$GPU_NODE" "gpu=template:single-gpu"
  pod pod2 "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase pod1 Running 60
  wait_pod_phase pod2 Running 60
  wait_log pod1 && wait_log pod2
  assert_gpus pod1 1
  assert_gpus pod2 1
  [ "$(gpu_uuids pod1)" != "$(gpu_uuids pod2)" ]
}

@test "one ResourceClaim shared by two pods: both see the same GPU" {
  claim shared-gpu
  pod pod1 "$GPU_NODE" "gpu=claim:shared-gpu"
  pod pod2 "$GPU_NODE" "gpu=claim:shared-gpu"
  wait_pod_phase pod1 Running 60
  wait_pod_phase pod2 Running 60
  wait_log pod1 && wait_log pod2
  assert_gpus pod1 1
  assert_gpus pod2 1
  [ "$(gpu_uuids pod1)" = "$(gpu_uuids pod2)" ]
  [ "$(k get resourceclaim shared-gpu -o jsonpath='{.status.reservedFor[*].name}' | tr ' ' '\n' | sort | xargs)" = "pod1 pod2" ]
}

@test "two containers of one pod sharing a claim see the same GPU" {
  claim_template single-gpu
  pod pod1 "$GPU_NODE" "shared=template:single-gpu" "ctr0=shared ctr1=shared"
  wait_pod_phase pod1 Running 60
  wait_log pod1 ctr0 && wait_log pod1 ctr1
  assert_gpus pod1 1 ctr0
  assert_gpus pod1 1 ctr1
  [ "$(gpu_uuids pod1 ctr0)" = "$(gpu_uuids pod1 ctr1)" ]
}

@test "a pod with two claims sees two GPUs; a request with count: 2 sees two" {
  claim_template single-gpu
  claim_template two-gpus gpu.nvidia.com $'allocationMode: ExactCount\ncount: 2'
  pod pod1 "$GPU_NODE" "a=template:single-gpu b=template:single-gpu"
  pod pod2 "$GPU_NODE" "gpus=template:two-gpus"
  wait_pod_phase pod1 Running 60
  wait_pod_phase pod2 Running 60
  wait_log pod1 && wait_log pod2
  assert_gpus pod1 2
  assert_gpus pod2 2
  [ "$(gpu_uuids pod1 | sort -u | wc -l)" -eq 2 ]
  [ "$(allocated "$(claim_of pod2 gpus)" | wc -l)" -eq 2 ]
  # Four different GPUs in all.
  [ "$( (gpu_uuids pod1; gpu_uuids pod2) | sort -u | wc -l)" -eq 4 ]
}

@test "CEL selectors on productName, architecture and memory capacity schedule" {
  local a="device.attributes['gpu.nvidia.com']"
  claim_template by-name gpu.nvidia.com "selectors: [{cel: {expression: \"$a.productName == 'NVIDIA H100 80GB HBM3'\"}}]"
  claim_template by-arch gpu.nvidia.com "selectors: [{cel: {expression: \"$a.architecture == 'Hopper'\"}}]"
  claim_template by-mem gpu.nvidia.com \
    "selectors: [{cel: {expression: \"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0\"}}]"
  pod pod1 "$GPU_NODE" "gpu=template:by-name"
  pod pod2 "$GPU_NODE" "gpu=template:by-arch"
  pod pod3 "$GPU_NODE" "gpu=template:by-mem"
  for p in pod1 pod2 pod3; do
    wait_pod_phase "$p" Running 60
    wait_log "$p"
    assert_gpus "$p" 1
  done
}

@test "a selector no device matches leaves the pod Pending with the scheduler's reason" {
  claim_template no-such-gpu gpu.nvidia.com \
    "selectors: [{cel: {expression: \"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'\"}}]"
  pod pod1 "$GPU_NODE" "gpu=template:no-such-gpu"
  local deadline=$((SECONDS + 30)) reason="" events=""
  until [[ $reason == Unschedulable && $events == *"cannot allocate all claims"* ]]; do
    ((SECONDS < deadline)) || { echo "reason '$reason', events '$events'"; false; }
    sleep 0.5
    reason=$(k get pod pod1 -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}')
    events=$(k get events --field-selector involvedObject.name=pod1,reason=FailedScheduling \
      -o jsonpath='{.items[*].message}')
  done
  echo "# FailedScheduling: $events" >&3
  [ "$(k get pod pod1 -o jsonpath='{.status.phase}')" = Pending ]
  [ -z "$(allocated "$(claim_of pod1 gpu)")" ]
}

@test "a Job with 2 completions and a Deployment with 2 replicas run on distinct GPUs" {
  claim_template single-gpu
  local spec
  # Both run the pod spec the helpers build, with a label for the selector.
  spec=$(pod_yaml x "$GPU_NODE" "gpu=template:single-gpu" "" Never "nvidia-smi -L; sleep 3" |
    sed -n '/^spec:/,$p' | sed '1d; s/^/      /')
  k apply -f - >/dev/null <<EOF
apiVersion: batch/v1
kind: Job
metadata: {name: job}
spec:
  completions: 2
  parallelism: 2
  template:
    metadata: {labels: {app: job}}
    spec:
$spec
EOF
  spec=$(pod_yaml x "$GPU_NODE" "gpu=template:single-gpu" | sed -n '/^spec:/,$p' | sed '1d; s/^/      /')
  k apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: dep}
spec:
  replicas: 2
  selector: {matchLabels: {app: dep}}
  template:
    metadata: {labels: {app: dep}}
    spec:
$spec
EOF
  k wait --for=condition=Complete job/job --timeout=90s
  k rollout status deployment/dep --timeout=90s
  local p uuids=()
  for p in $(k get pods -l app=job -o name) $(k get pods -l app=dep -o name); do
    wait_log "${p#pod/}"
    assert_gpus "${p#pod/}" 1
    uuids+=("$(gpu_uuids "${p#pod/}")")
  done
  [ "${#uuids[@]}" -eq 4 ]
  # The two Job pods ran at the same time, as did the two replicas: each pair on two GPUs.
  [ "${uuids[0]}" != "${uuids[1]}" ]
  [ "${uuids[2]}" != "${uuids[3]}" ]
}

@test "the slices publish the standard PCI attributes from the node's sysfs: pciBusID, pcieRoot, numaNode" {
  local slices want got
  # The mock driver root carries a sysfs tree with each GPU behind its own root port
  # (make-driver-root.sh): GPU 0000:BB:00.0 -> pcieRoot pci0000:(BB-1); NUMA node 1 from bus 0x80.
  slices=$(kubectl get resourceslices -o json --field-selector "spec.nodeName=$GPU_NODE,spec.driver=$DRIVER")
  want=$(jq -r '.items[].spec.devices[].attributes["resource.kubernetes.io/pciBusID"].string' <<<"$slices" | sort |
    while read -r b; do
      bus=$((16#$(cut -d: -f2 <<<"$b")))
      printf '%s pci0000:%02x %d\n' "$b" $((bus - 1)) $((bus >= 128))
    done)
  got=$(jq -r '.items[].spec.devices[].attributes | "\(.["resource.kubernetes.io/pciBusID"].string) \(.["resource.kubernetes.io/pcieRoot"].string) \(.["resource.kubernetes.io/numaNode"].int)"' <<<"$slices" | sort)
  [ "$(grep -c . <<<"$got")" -eq 8 ]
  [ "$got" = "$want" ] || { diff <(echo "$want") <(echo "$got"); false; }
  # Both NUMA nodes occur (the profile's GPUs sit on both sockets).
  [ "$(awk '{print $3}' <<<"$got" | sort -u | xargs)" = "0 1" ]
  # A MIG device carries its parent GPU's topology (node 2).
  [[ -n $MIG_NODE ]] || return 0
  slices=$(kubectl get resourceslices -o json --field-selector "spec.nodeName=$MIG_NODE,spec.driver=$DRIVER")
  got=$(jq -r '[.items[].spec.devices[].attributes | select(.type.string == "mig") | .["resource.kubernetes.io/pcieRoot"].string // "none"] | unique | .[]' <<<"$slices")
  [[ -n $got && $got != *none* ]] || { echo "MIG devices without pcieRoot: $got"; false; }
}

# The kubelet (v1.36) opens the DRAResourceHealth stream on every DRA plugin and, when the plugin
# does not serve it, logs "Unimplemented" and tries again every 5 s. Both drivers keep it open
# (quiet where they report no health), so the node's kubelet log has no such error after the plugin
# pod started. (A stream the kubelet itself cancels, when an earlier plugin instance goes away, is
# logged too, as "Canceled": that is not this failure and not counted.)
@test "the kubelet's health streams to both drivers stay open: no WatchResources error in the node's kubelet log" {
  local pod started since log errors
  pod=$(plugin_pod "$GPU_NODE")
  [[ -n $pod ]]
  started=$(kubectl -n "$DRIVER_NS" get pod "$pod" -o jsonpath='{.status.startTime}')
  # Three of the kubelet's retry periods of the plugin's life to look at.
  wait_for 30 "$pod to have run 15 s" eval '(( $(date +%s) - $(date -d '"$started"' +%s) >= 15 ))'
  # klog lines: "E1129 16:03:46.778574 ..." in this machine's time zone, as `date` prints it.
  since=$(date -d "$started" +%m%d:%H:%M:%S)
  log=$LOG_DIR/$GPU_NODE/kubelet.log
  [[ -s $log ]]
  errors=$(awk -v since="$since" '/Error receiving from WatchResources stream/ && /code = Unimplemented/ &&
      /pluginName="(gpu|compute-domain)\.nvidia\.com"/ && substr($1, 2) ":" substr($2, 1, 8) >= since' "$log")
  [[ -z $errors ]] || { echo "since $started ($since):"; head -n 5 <<<"$errors"; false; }
}
