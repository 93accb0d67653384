#!/usr/bin/env bats
# VFIO passthrough (docs/vfio.md) and device metadata (docs/device-metadata.md) on the local
# nodes: the driver upgraded with featureGates.PassthroughSupport and DeviceMetadata and
# kubeletPlugin.containers.gpus.hostRoot pointed at a fake host tree per node
# (test/e2e/vfio_lib.bash: the layout of test/doubles/testing/fake_pci_sysfs.h: node 1's eight
# mock H100s as PCI functions on nvidia, IOMMU groups, the vfio_pci module loaded, fake fuser;
# node 2 only IOMMU groups, which the plugin needs to start). On node 1 the fake kernel
# (test/doubles/fake-pci-kernel, a process on the test host watching the tree with inotify)
# answers the plugin's writes to driver_override, bind and unbind: it moves the driver links and
# makes dev/vfio/<group> a character device 1:3 (the numbers of /dev/null), and the node's
# /dev/vfio is that directory, so that containerd finds the device node the claim's CDI spec
# names. Asserted: every GPU of node 1 is published a second time as gpu-vfio-<n> with its PCI bus
# id; a container reads its claims' metadata files, which name the allocated device, and the files
# and their CDI spec are gone after delete; a VFIO pod sees /dev/vfio/<group> while its GPU is on
# vfio-pci with persistence mode off and its full-GPU sibling unpublished, and after delete the
# GPU is back on nvidia with persistence on and the sibling published; a VFIO prepare that fails
# midway (the GPU has a VF; the bind to vfio-pci fails) turns persistence mode back on, leaves the
# GPU on nvidia with no driver_override and no record, and the kubelet retries it; once the bind
# fault is removed the pod starts.
# Run through run.sh.

setup_file() {
  load lib
  load gpu_lib
  load vfio_lib
  vfio_host_up
  setup_changed_driver gpu-vfio --set featureGates.PassthroughSupport=true \
    --set featureGates.DeviceMetadata=true --set kubeletPlugin.containers.gpus.hostRoot="$HOST_ROOT_AT"
}

teardown_file() {
  load lib
  load gpu_lib
  load vfio_lib
  teardown_changed_driver
  vfio_host_down
}

setup() {
  load lib
  load gpu_lib
  load vfio_lib
}

# Node 1's devices of the driver's slices, as JSON lines.
node1_devices() {
  kubectl get resourceslices -o json --field-selector "spec.nodeName=$GPU_NODE,spec.driver=$DRIVER" |
    jq -c '.items[].spec.devices[]?'
}

# full_gpu_of_bus <bus>: the name of node 1's published full-GPU device with that PCI bus id.
full_gpu_of_bus() {
  node1_devices | jq -r --arg b "$1" \
    'select(.attributes.type.string == "gpu" and .attributes["resource.kubernetes.io/pciBusID"].string == $b) | .name'
}
persistence_of() { node_smi "$GPU_NODE" -q -i "$1" | awk -F': ' '/Persistence Mode/ {print $2; exit}'; }
# vfio_claim_pod <pod> <n>: a pod with a vfio.gpu.nvidia.com claim for gpu-vfio-<n> (by bus id),
# listing /dev/vfio.
vfio_claim_pod() {
  claim_template "vfio$2" vfio.gpu.nvidia.com \
    "selectors: [{cel: {expression: \"device.attributes['resource.kubernetes.io'].pciBusID == '$(bus_of "gpu-vfio-$2")'\"}}]"
  pod "$1" "$GPU_NODE" "gpu=template:vfio$2" "" Always "ls -l /dev/vfio; $SLEEP"
}
# claim_unrecorded <claim>: the checkpoint has no steps recorded for the claim.
claim_unrecorded() {
  local uid cp
  uid=$(k get resourceclaim "$1" -o jsonpath='{.metadata.uid}')
  cp="$(node_var "$(node_idx "$GPU_NODE")" KUBELET_DIR)/plugins/$DRIVER/checkpoint.json"
  [[ $(jq --arg u "$uid" '.data.preparedClaims[$u] // {} | .steps // [] | length' "$cp") -eq 0 ]]
}
# sees_group <pod> <group>: the container listed /dev/vfio/<group> as a character device.
sees_group() { k logs "$1" 2>/dev/null | grep -qE "^c.* $2\$"; }

# failures_at_least <pod> <n> <text>: the pod's prepare failed at least n times with the text.
failures_at_least() {
  [[ $(k get events --field-selector "involvedObject.name=$1,reason=FailedPrepareDynamicResources" -o json |
    jq --arg t "$3" '[.items[] | select(.message | contains($t)) | .count] | add // 0') -ge $2 ]]
}

# vf_failures_at_least <pod> <n>: the pod's prepare failed at least n times on the VF check.
vf_failures_at_least() {
  [[ $(k get events --field-selector "involvedObject.name=$1,reason=FailedPrepareDynamicResources" -o json |
    jq '[.items[] | select(.message | contains("gpu has 1 VFs, cannot unbind")) | .count] | add // 0') -ge $2 ]]
}

@test "PassthroughSupport: every GPU of the host root is published again as gpu-vfio-<n>, with its PCI bus id" {
  local devs vfio_bus gpu_bus
  devs=$(node1_devices)
  [ "$(jq -r 'select(.attributes.type.string == "vfio") | .name' <<<"$devs" | sort | xargs)" = \
    "gpu-vfio-0 gpu-vfio-1 gpu-vfio-2 gpu-vfio-3 gpu-vfio-4 gpu-vfio-5 gpu-vfio-6 gpu-vfio-7" ]
  # Same hardware as the full GPUs: the same eight bus ids, the first in PCI order is gpu-vfio-0.
  vfio_bus=$(jq -r 'select(.attributes.type.string == "vfio") | .attributes["resource.kubernetes.io/pciBusID"].string' <<<"$devs" | sort)
  gpu_bus=$(jq -r 'select(.attributes.type.string == "gpu") | .attributes["resource.kubernetes.io/pciBusID"].string' <<<"$devs" | sort)
  [ "$(grep -c . <<<"$vfio_bus")" -eq 8 ]
  [ "$vfio_bus" = "$gpu_bus" ]
  [ "$(bus_of gpu-vfio-0)" = "$(head -n1 <<<"$vfio_bus")" ]
  [ "$(jq -r 'select(.name == "gpu-vfio-0") | .attributes.deviceID.string' <<<"$devs")" = 0x2330 ]
}

@test "DeviceMetadata: the container reads its claims' metadata files; files and CDI specs go with the pod" {
  local dir=/var/run/kubernetes.io/dra-device-attributes
  claim_template meta
  claim named
  pod meta1 "$GPU_NODE" "tmpl=template:meta own=claim:named" "" Always \
    "printf T:; tr -d '\\\\n' <$dir/resourceclaimtemplates/tmpl/gpu/gpu.nvidia.com-metadata.json; echo; printf N:; tr -d '\\\\n' <$dir/resourceclaims/named/gpu/gpu.nvidia.com-metadata.json; echo; $SLEEP"
  wait_pod_phase meta1 Running 90
  wait_for 30 "meta1's output" eval '[[ $(k logs meta1 | grep -c "^[TN]:{") -eq 2 ]]'
  local tclaim t o tuid nuid kdir cdir
  tclaim=$(claim_of meta1 tmpl)
  k logs meta1
  t=$(k logs meta1 | sed -n 's/^T://p') o=$(k logs meta1 | sed -n 's/^N://p')
  # The template's claim: podClaimName, request gpu, the allocated device of node 1's pool.
  [ "$(jq -r '[.apiVersion, .kind, .podClaimName, .requests[0].name] | join(" ")' <<<"$t")" = \
    "metadata.resource.k8s.io/v1alpha1 DeviceMetadata tmpl gpu" ]
  [ "$(jq -r '.requests[0].devices[] | "\(.driver) \(.pool)/\(.name)"' <<<"$t")" = "$DRIVER $(allocated "$tclaim")" ]
  # The named claim: no podClaimName, its own device.
  [ "$(jq -r '.podClaimName // "none"' <<<"$o")" = none ]
  [ "$(jq -r '.requests[0].devices[] | "\(.driver) \(.pool)/\(.name)"' <<<"$o")" = "$DRIVER $(allocated named)" ]
  [ "$(allocated named)" != "$(allocated "$tclaim")" ]
  # On the node: each claim's metadata file and its CDI spec (kind gpu.nvidia.com/metadata).
  tuid=$(k get resourceclaim "$tclaim" -o jsonpath='{.metadata.uid}')
  nuid=$(k get resourceclaim named -o jsonpath='{.metadata.uid}')
  kdir="$(node_var "$(node_idx "$GPU_NODE")" KUBELET_DIR)/plugins/$DRIVER/dra-device-metadata"
  cdir=$(cdi_dir "$GPU_NODE")
  [ -f "$kdir/${E2E_NS}_$tclaim/gpu/metadata.json" ]
  [ -f "$kdir/${E2E_NS}_named/gpu/metadata.json" ]
  [ "$(jq -r .kind "$cdir/${DRIVER}_metadata_${tuid}_gpu.json")" = "$DRIVER/metadata" ]
  [ -f "$cdir/${DRIVER}_metadata_${nuid}_gpu.json" ]
  k delete pod meta1 --wait=true --timeout=60s >/dev/null
  k delete resourceclaim named --wait=true --timeout=60s >/dev/null
  wait_for 60 "the metadata files and CDI specs to go" eval \
    "[[ ! -e $kdir/${E2E_NS}_$tclaim && ! -e $kdir/${E2E_NS}_named && ! -e $cdir/${DRIVER}_metadata_${tuid}_gpu.json && ! -e $cdir/${DRIVER}_metadata_${nuid}_gpu.json ]]"
}

@test "VFIO: a prepare that fails midway (the GPU has a VF) is undone: GPU on nvidia, persistence on, no record; retried" {
  local bus r dev
  bus=$(bus_of gpu-vfio-7)
  [[ -n $bus ]]
  r=$(fake_host "$GPU_NODE")
  dev=$r/sys/bus/pci/devices/$bus
  # The fault: a VF on the GPU. The unbind step refuses it after the persistence step turned
  # persistence mode off.
  echo 1 >"$dev/sriov_numvfs"
  claim_template vfio7 vfio.gpu.nvidia.com \
    "selectors: [{cel: {expression: \"device.attributes['resource.kubernetes.io'].pciBusID == '$bus'\"}}]"
  pod v1 "$GPU_NODE" "gpu=template:vfio7" "" Always "ls /dev/vfio; $SLEEP"
  wait_for 90 "a failed prepare of v1" vf_failures_at_least v1 1
  # The kubelet retries a failed prepare only at the pod's next periodic sync (60-90 s); a change
  # of the pod object syncs it at once, so the test annotates it while it waits for the retry.
  wait_for 60 "a failed prepare of v1 retried by the kubelet" nudged v1 vf_failures_at_least v1 2
  [ "$(allocated "$(claim_of v1 gpu)")" = "$GPU_NODE/gpu-vfio-7" ]
  [ "$(k get pod v1 -o jsonpath='{.status.phase}')" = Pending ]
  # Undone: still on nvidia, driver_override untouched, persistence mode on again.
  [ "$(basename "$(readlink "$dev/driver")")" = nvidia ]
  [ "$(cat "$dev/driver_override")" = '(null)' ]
  [ "$(grep -c "^sys/bus/pci/drivers/nvidia/unbind=$bus" "$(kernel_log)")" -eq 0 ]
  node_smi "$GPU_NODE" -q -i "$bus" | grep -E 'Persistence Mode +: Enabled'
  wait_for 30 "no record of the failed claim" claim_unrecorded "$(claim_of v1 gpu)"
  k delete pod v1 --wait=true --timeout=60s >/dev/null
  echo 0 >"$dev/sriov_numvfs"
}

@test "VFIO: a pod sees /dev/vfio/<group> while its GPU is on vfio-pci; after delete the GPU is back on nvidia" {
  local bus grp r
  bus=$(bus_of gpu-vfio-6)
  [[ -n $bus ]]
  grp=$(group_of "$bus") r=$(fake_host "$GPU_NODE")
  [ "$(full_gpu_of_bus "$bus")" != "" ]
  vfio_claim_pod v6 6
  wait_pod_phase v6 Running 90
  wait_for 30 "v6 to list /dev/vfio/$grp" sees_group v6 "$grp"
  k logs v6
  [ "$(allocated "$(claim_of v6 gpu)")" = "$GPU_NODE/gpu-vfio-6" ]
  # While it runs: on vfio-pci through driver_override, the group's device node exists, persistence
  # mode off, and the full GPU of the same bus id is not published.
  [ "$(driver_of "$bus")" = vfio-pci ]
  [ "$(cat "$r/sys/bus/pci/devices/$bus/driver_override")" = vfio-pci ]
  [ -c "$r/dev/vfio/$grp" ]
  [ "$(persistence_of "$bus")" = Disabled ]
  wait_for 30 "the full GPU of $bus to be unpublished" eval '[[ -z $(full_gpu_of_bus "$bus") ]]'
  # The kernel saw the handover in the documented order.
  [ "$(grep -E "^sys/bus/pci/(devices/$bus/driver_override=|drivers/[a-z-]+/(un)?bind=$bus)" "$(kernel_log)" | cut -d= -f1 | sed "s|devices/$bus/||" | xargs)" = \
    "sys/bus/pci/driver_override sys/bus/pci/drivers/nvidia/unbind sys/bus/pci/driver_override sys/bus/pci/drivers/vfio-pci/bind" ]
  k delete pod v6 --wait=true --timeout=60s >/dev/null
  wait_for 60 "GPU $bus back on nvidia" eval '[[ $(driver_of "$bus") == nvidia ]]'
  [ "$(cat "$r/sys/bus/pci/devices/$bus/driver_override")" = '(null)' ]
  [ ! -e "$r/dev/vfio/$grp" ]
  wait_for 30 "persistence mode on for $bus" eval '[[ $(persistence_of "$bus") == Enabled ]]'
  wait_for 30 "the full GPU of $bus to be published again" eval '[[ -n $(full_gpu_of_bus "$bus") ]]'
  [ "$(grep -c ' error: ' "$(kernel_log)")" -eq 0 ]
}

@test "VFIO: a bind to vfio-pci that fails is undone (GPU on nvidia, persistence on, no record); the pod starts once the fault is gone" {
  local bus grp r
  bus=$(bus_of gpu-vfio-5)
  [[ -n $bus ]]
  grp=$(group_of "$bus") r=$(fake_host "$GPU_NODE")
  # The fault: the kernel refuses the bind (EIO); the plugin sees no driver link appear.
  echo drivers/vfio-pci/bind >"$(kernel_faults)"
  vfio_claim_pod v5 5
  wait_for 90 "a failed bind of v5" failures_at_least v5 1 'was written to /host-root/sys/bus/pci/drivers/vfio-pci/bind; expected driver "vfio-pci"'
  [ "$(allocated "$(claim_of v5 gpu)")" = "$GPU_NODE/gpu-vfio-5" ]
  [ "$(k get pod v5 -o jsonpath='{.status.phase}')" = Pending ]
  grep -q "^sys/bus/pci/drivers/vfio-pci/bind=$bus error: " "$(kernel_log)"
  # Undone: unbound from nvidia and bound to it again, driver_override cleared, persistence on.
  [ "$(driver_of "$bus")" = nvidia ]
  grep -q "^sys/bus/pci/drivers/nvidia/bind=$bus\$" "$(kernel_log)"
  [ "$(cat "$r/sys/bus/pci/devices/$bus/driver_override")" = '(null)' ]
  [ ! -e "$r/dev/vfio/$grp" ]
  [ "$(persistence_of "$bus")" = Enabled ]
  wait_for 30 "no record of the failed claim" claim_unrecorded "$(claim_of v5 gpu)"
  # The fault removed: the kubelet's retry (nudged, see the VF test) prepares it.
  rm -f "$(kernel_faults)"
  wait_for 90 "v5 to start after the fault is gone" nudged v5 eval '[[ $(k get pod v5 -o jsonpath="{.status.phase}") == Running ]]'
  wait_for 30 "v5 to list /dev/vfio/$grp" sees_group v5 "$grp"
  [ "$(driver_of "$bus")" = vfio-pci ]
  k delete pod v5 --wait=true --timeout=60s >/dev/null
  wait_for 60 "GPU $bus back on nvidia" eval '[[ $(driver_of "$bus") == nvidia ]]'
}
