#!/usr/bin/env bats
# VFIO passthrough (docs/vfio.md) and device metadata (docs/device-metadata.md) on the local nodes:
# the driver upgraded with featureGates.PassthroughSupport and DeviceMetadata and
# kubeletPlugin.containers.gpus.hostRoot pointed at a fake host tree per node (below, the layout
# of test/doubles/testing/fake_pci_sysfs.h: node 1's eight mock H100s as PCI functions on nvidia,
# IOMMU groups, the vfio_pci module loaded, fake fuser; node 2 only IOMMU groups, which the plugin
# needs to start). Asserted: every GPU of node 1 is published a second time as gpu-vfio-<n> with
# its PCI bus id; a container reads its claims' metadata files, which name the allocated device,
# and the files and their CDI spec are gone after delete; a VFIO prepare that fails midway (the
# GPU has a VF) turns persistence mode back on, leaves the GPU on nvidia with no driver_override
# and no record, and the kubelet retries it.
# Not here: a VFIO prepare that succeeds. The fake tree's bind/unbind files are plain files, and
# the plugin reads the driver link right after each write, so a fake kernel in another process
# (inotify) would race it; that needs a file system that answers the write itself (FUSE).
# Run through run.sh.

# The fake host root in each node's mount namespace: under /run/nvidia, the shared mount that
# helm-driver.sh prepare-nodes made there (HostToContainer needs a shared or slave source).
HOST_ROOT_AT=/run/nvidia/host-root

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace gpu-vfio
  local n
  for n in "$GPU_NODE" $MIG_NODE; do
    make_fake_host "$n"
    mount_fake_host "$n"
    share_sys_proc "$n"
  done
  change_driver --set featureGates.PassthroughSupport=true --set featureGates.DeviceMetadata=true \
    --set kubeletPlugin.containers.gpus.hostRoot="$HOST_ROOT_AT"
  wait_plugin_ready "$GPU_NODE"
}

teardown_file() {
  load lib
  load gpu_lib
  kubectl delete namespace "$E2E_NS" --wait=true --timeout=120s >/dev/null 2>&1 || true
  restore_driver
  local n
  for n in "$GPU_NODE" $MIG_NODE; do
    unshare_sys_proc "$n"
    in_node "$n" umount -R "$HOST_ROOT_AT" 2>/dev/null || true
    in_node "$n" rmdir "$HOST_ROOT_AT" 2>/dev/null || true
    rm -rf "$(fake_host "$n")"
  done
}

setup() {
  load lib
  load gpu_lib
}

in_node() { local n=$1; shift; nsenter --mount="$(node_var "$(node_idx "$n")" MNTNS)" -- "$@"; }
fake_host() { echo "$(node_var "$(node_idx "$1")" STATE_DIR)/vfio-host-root"; }

# make_fake_host <node>: the host tree (relative links, so that they read the same inside the
# plugin's /host-root). Node 1 gets its mock GPUs' PCI functions, bound to nvidia, IOMMU group
# 10 + i each.
make_fake_host() {
  local n=$1 r i=0 b d lib
  r=$(fake_host "$n")
  rm -rf "$r"
  mkdir -p "$r"/sys/bus/pci/devices "$r"/sys/module/{nvidia,vfio_pci} "$r"/sys/kernel/iommu_groups/0 \
    "$r"/usr/sbin "$r"/bin "$r"/dev/vfio "$r/lib/modules/$(uname -r)"
  for d in nvidia vfio-pci; do
    mkdir -p "$r/sys/bus/pci/drivers/$d"
    touch "$r/sys/bus/pci/drivers/$d/bind" "$r/sys/bus/pci/drivers/$d/unbind"
  done
  : >"$r/lib/modules/$(uname -r)/modules.alias"
  # The plugin runs `chroot <host root> fuser <device>`: a shell and its libraries in the tree.
  cp /bin/sh "$r/bin/sh"
  for lib in $(ldd /bin/sh | grep -oE '/[^ ]+'); do
    mkdir -p "$r$(dirname "$lib")" && cp "$lib" "$r$lib"
  done
  printf '#!/bin/sh\n# Fake fuser: nobody holds the device (exit 1).\nexit 1\n' >"$r/usr/sbin/fuser"
  chmod 755 "$r/usr/sbin/fuser"
  [[ $n == "$GPU_NODE" ]] || return 0
  for b in $(jq -r '.. | .pci_bus_id? // empty' "$REPO_ROOT/test/doubles/profiles/h100-8x.json"); do
    d=$r/sys/bus/pci/devices/$b
    mkdir -p "$d" "$r/sys/kernel/iommu_groups/$((10 + i))/devices"
    echo 0x10de >"$d/vendor"
    echo 0x030200 >"$d/class"
    echo 0x2330 >"$d/device"
    echo pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02i00 >"$d/modalias"
    echo 0 >"$d/numa_node"
    echo 0 >"$d/sriov_numvfs"
    echo 0 >"$d/sriov_totalvfs"
    echo '(null)' >"$d/driver_override"
    ln -s "../../../../kernel/iommu_groups/$((10 + i))" "$d/iommu_group"
    ln -s ../../drivers/nvidia "$d/driver"
    i=$((i + 1))
  done
}

# mount_fake_host <node>: the tree at $HOST_ROOT_AT in the node's mount namespace; its sys/ a mount
# of its own, which stays writable under the chart's read-only mount of the host root.
mount_fake_host() {
  local n=$1 r
  r=$(fake_host "$n")
  in_node "$n" mountpoint -q /run/nvidia || { echo "/run/nvidia is not a mount in $n (run.sh prepares the nodes)" >&2; return 1; }
  in_node "$n" umount -R "$HOST_ROOT_AT" 2>/dev/null || true
  in_node "$n" mkdir -p "$HOST_ROOT_AT"
  in_node "$n" mount --bind "$r" "$HOST_ROOT_AT"
  in_node "$n" mount --bind "$r/sys" "$HOST_ROOT_AT/sys"
}

# share_sys_proc <node>: with the gate the chart mounts the node's /sys and /proc with
# Bidirectional propagation (as the Go chart does), which containerd refuses unless they are
# shared mounts, as they are on a systemd host; the nodes' mount namespaces have them private.
# The ones made shared here are recorded in the node's state folder and made private again by
# unshare_sys_proc.
share_sys_proc() {
  local n=$1 m mark
  mark="$(node_var "$(node_idx "$n")" STATE_DIR)/vfio-e2e-shared"
  for m in /sys /proc; do
    if ! in_node "$n" findmnt -no PROPAGATION "$m" | grep -q shared; then
      in_node "$n" mount --make-shared "$m"
      echo "$m" >>"$mark"
    fi
  done
}
unshare_sys_proc() {
  local n=$1 m mark
  mark="$(node_var "$(node_idx "$n")" STATE_DIR)/vfio-e2e-shared"
  [[ -f $mark ]] || return 0
  for m in $(cat "$mark"); do in_node "$n" mount --make-private "$m" || true; done
  rm -f "$mark"
}

# Node 1's devices of the driver's slices, as JSON lines.
node1_devices() {
  kubectl get resourceslices -o json --field-selector "spec.nodeName=$GPU_NODE,spec.driver=$DRIVER" |
    jq -c '.items[].spec.devices[]?'
}
bus_of() { node1_devices | jq -r --arg d "$1" 'select(.name == $d) | .attributes["resource.kubernetes.io/pciBusID"].string'; }

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
  local bus r dev uid cp
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
  wait_for 60 "a failed prepare of v1 retried by the kubelet" nudged vf_failures_at_least v1 2
  [ "$(allocated "$(claim_of v1 gpu)")" = "$GPU_NODE/gpu-vfio-7" ]
  [ "$(k get pod v1 -o jsonpath='{.status.phase}')" = Pending ]
  # Undone: still on nvidia, driver_override untouched, persistence mode on again.
  [ "$(basename "$(readlink "$dev/driver")")" = nvidia ]
  [ "$(cat "$dev/driver_override")" = '(null)' ]
  [ -z "$(cat "$r/sys/bus/pci/drivers/nvidia/unbind")" ]
  node_smi "$GPU_NODE" -q -i "$bus" | grep -E 'Persistence Mode +: Enabled'
  uid=$(k get resourceclaim "$(claim_of v1 gpu)" -o jsonpath='{.metadata.uid}')
  cp="$(node_var "$(node_idx "$GPU_NODE")" KUBELET_DIR)/plugins/$DRIVER/checkpoint.json"
  wait_for 30 "no record of the failed claim" eval "[[ \$(jq --arg u $uid '.data.preparedClaims[\$u] // {} | .steps // [] | length' $cp) -eq 0 ]]"
  k delete pod v1 --wait=true --timeout=60s >/dev/null
  echo 0 >"$dev/sriov_numvfs"
}
