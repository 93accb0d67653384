#!/usr/bin/env bats
# Pods written for the NVIDIA device plugin: resources.limits {nvidia.com/gpu: 1} or
# {nvidia.com/mig-<profile>: 1} and no resourceClaims. The chart's DeviceClasses carry
# extendedResourceName (gpu.nvidia.com: nvidia.com/gpu; mig-<profile>.nvidia.com:
# nvidia.com/mig-<profile>, resources.gpus.migExtendedResources); with DRAExtendedResource (beta,
# on in 1.36) the kube-scheduler allocates a special ResourceClaim for the pod
# (status.extendedResourceClaimStatus) and the kubelet prepares it through our plugin. Node 1 is
# the mock h100-8x (8 full GPUs), node 2 the mock a100-mig-4x (static 1g.5gb, 2g.10gb and 3g.20gb
# MIG devices, no 7g.40gb). Run through run.sh.

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace gpu-xr
  record_baseline "$GPU_NODE"
  [[ -z $MIG_NODE ]] || record_baseline "$MIG_NODE"
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
  [[ -z $MIG_NODE ]] || clean_node "$MIG_NODE"
}

# xr_pod <name> <node> <resource>: a pod on <node> asking for one <resource> in its limits, with
# no resourceClaims, that prints `nvidia-smi -L` and its CUDA/NVIDIA env, then waits.
xr_pod() {
  k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  terminationGracePeriodSeconds: 5
  nodeSelector: {kubernetes.io/hostname: $2}
  containers:
  - name: ctr
    image: $DRA_WORKLOAD_IMAGE
    imagePullPolicy: Never
    command: ["sh", "-c", "nvidia-smi -L; $SLEEP"]
    resources:
      limits: {$3: 1}
EOF
}

# The special claim the scheduler made for the pod's extended resources.
xr_claim() { k get pod "$1" -o jsonpath='{.status.extendedResourceClaimStatus.resourceClaimName}'; }

mig_lines() { k logs "$1" | grep -E '^  MIG [0-9]+g\.[0-9]+gb +Device +[0-9]+: \(UUID: MIG-[0-9a-f-]+\)$' || true; }

@test "limits nvidia.com/gpu: 1, no resourceClaims: the pod runs and sees exactly the one GPU allocated to it" {
  xr_pod xr-gpu "$GPU_NODE" nvidia.com/gpu
  wait_pod_phase xr-gpu Running 60
  wait_log xr-gpu
  assert_gpus xr-gpu 1
  local claim devs uid
  claim=$(xr_claim xr-gpu)
  [[ -n $claim ]] || { k get pod xr-gpu -o yaml; false; }
  # The scheduler's claim asks for the class that names the resource, and got one full GPU.
  [ "$(k get resourceclaim "$claim" -o jsonpath='{.spec.devices.requests[*].exactly.deviceClassName}')" = gpu.nvidia.com ]
  devs=$(allocated "$claim")
  [[ $devs =~ ^$GPU_NODE/gpu-[0-9]+$ ]] || { echo "allocated: $devs"; false; }
  [ "$(gpu_uuids xr-gpu)" = "$(slice_uuid "$devs")" ]
  uid=$(k get resourceclaim "$claim" -o jsonpath='{.metadata.uid}')
  [ -f "$(cdi_spec "$GPU_NODE" "$uid")" ]
}

@test "limits nvidia.com/mig-1g.5gb: 1 on a static-MIG node: the pod sees exactly one MIG device, a 1g.5gb, the allocated one" {
  [[ -n $MIG_NODE ]] || skip "needs 2 nodes (hack/cluster/up.sh --nodes 2)"
  kubectl get deviceclass mig-1g.5gb.nvidia.com -o jsonpath='{.spec.extendedResourceName}' | grep -qx nvidia.com/mig-1g.5gb
  xr_pod xr-mig "$MIG_NODE" nvidia.com/mig-1g.5gb
  wait_pod_phase xr-mig Running 60
  wait_log xr-mig
  k logs xr-mig
  [ "$(mig_lines xr-mig | wc -l)" -eq 1 ]
  [[ $(mig_lines xr-mig) == "  MIG 1g.5gb "* ]]
  assert_gpus xr-mig 1  # the parent, as real nvidia-smi lists it, and no other GPU
  local claim dev
  claim=$(xr_claim xr-mig)
  [ "$(k get resourceclaim "$claim" -o jsonpath='{.spec.devices.requests[*].exactly.deviceClassName}')" = mig-1g.5gb.nvidia.com ]
  dev=$(allocated "$claim")
  [[ $dev =~ ^$MIG_NODE/gpu-[0-9]+-mig-1g5gb- ]] || { echo "allocated: $dev"; false; }
  [ "$(mig_lines xr-mig | grep -oE 'MIG-[0-9a-f-]+')" = "$(slice_uuid "$dev")" ]
}

@test "limits nvidia.com/mig-7g.40gb: 1, a profile no node has: the pod stays Pending with the scheduler's FailedScheduling event" {
  [[ -n $MIG_NODE ]] || skip "needs 2 nodes (hack/cluster/up.sh --nodes 2)"
  # The class exists (the chart's default list); only the device is missing.
  kubectl get deviceclass mig-7g.40gb.nvidia.com >/dev/null
  xr_pod xr-none "$MIG_NODE" nvidia.com/mig-7g.40gb
  local events
  scheduling_failed() {
    events=$(k get events --field-selector involvedObject.name=xr-none,reason=FailedScheduling \
      -o jsonpath='{range .items[*]}{.source.component}{.reportingComponent}: {.message}{"\n"}{end}')
    [[ -n $events ]]
  }
  wait_for 60 "a FailedScheduling event of xr-none" scheduling_failed
  echo "# $events" >&3
  [[ $events == *default-scheduler* ]]
  # MIG_NODE has the driver's devices but none of this profile: the scheduler cannot allocate the
  # pod's (extended resource) claim there; the other node is not selected.
  [[ $events == *" nodes are available: 1 cannot allocate all claims"* ]]
  [ "$(k get pod xr-none -o jsonpath='{.status.phase}')" = Pending ]
  [ -z "$(k get pod xr-none -o jsonpath='{.spec.nodeName}')" ]
  # Nothing was allocated for it.
  [ -z "$(device_holders | grep " $E2E_NS/" || true)" ]
}
