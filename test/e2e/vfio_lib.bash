# shellcheck shell=bash
# The fake VFIO host of the local nodes, for the files that turn PassthroughSupport on
# (gpu_vfio.bats, gpu_all_gates.bats): the host tree of
# test/doubles/testing/fake_pci_sysfs.h per node (node 1's eight mock H100s as PCI functions on
# nvidia, IOMMU groups, vfio_pci loaded, fake fuser; other nodes only IOMMU groups, which the plugin
# needs to start), mounted at $HOST_ROOT_AT in the node; the fake kernel (a process on the test host
# answering the plugin's driver_override/bind/unbind writes); the node's /dev/vfio. Load after
# lib.bash and gpu_lib.bash. vfio_host_up in setup_file, vfio_host_down in teardown_file.

# The fake host root in each node's mount namespace: under /run/nvidia, the shared mount that
# helm-driver.sh prepare-nodes made there (HostToContainer needs a shared or slave source).
HOST_ROOT_AT=/run/nvidia/host-root

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

# The fake kernel of node 1's tree: its log (one line per write handled) and its fault file (path
# suffixes whose writes fail), both beside the tree.
kernel_log() { echo "$(node_var "$(node_idx "$GPU_NODE")" STATE_DIR)/vfio-kernel.log"; }
kernel_faults() { echo "$(node_var "$(node_idx "$GPU_NODE")" STATE_DIR)/vfio-kernel-faults"; }
start_fake_kernel() {
  local bin=$REPO_ROOT/build/default/test/doubles/fake-pci-kernel/fake-pci-kernel
  [[ -x $bin ]] || { echo "$bin is missing: build the target fake_pci_kernel" >&2; return 1; }
  : >"$(kernel_log)"
  rm -f "$(kernel_faults)"
  "$bin" --root "$(fake_host "$GPU_NODE")" --log "$(kernel_log)" --faults "$(kernel_faults)" \
    >/dev/null 2>"$(kernel_log).err" 3>&- &
  echo $! >"$BATS_FILE_TMPDIR/fake-kernel.pid"
  wait_for 10 "the fake kernel to watch the tree" grep -qx ready "$(kernel_log)"
}
stop_fake_kernel() {
  local pid
  pid=$(cat "$BATS_FILE_TMPDIR/fake-kernel.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
  rm -f "$BATS_FILE_TMPDIR/fake-kernel.pid" "$(kernel_faults)"
}

# mount_dev_vfio <node>: the node's /dev/vfio is the fake tree's dev/vfio, where the fake kernel
# makes the groups' device nodes; containerd resolves the CDI spec's /dev/vfio/<group> there.
# The nodes' /dev is the host's devtmpfs: a /dev/vfio made here is recorded and removed again.
mount_dev_vfio() {
  local n=$1 mark
  mark="$(node_var "$(node_idx "$n")" STATE_DIR)/vfio-e2e-made-dev-vfio"
  if ! in_node "$n" test -d /dev/vfio; then
    in_node "$n" mkdir /dev/vfio
    touch "$mark"
  fi
  in_node "$n" mount --bind "$(fake_host "$n")/dev/vfio" /dev/vfio
}
unmount_dev_vfio() {
  local n=$1 mark
  mark="$(node_var "$(node_idx "$n")" STATE_DIR)/vfio-e2e-made-dev-vfio"
  in_node "$n" umount /dev/vfio 2>/dev/null || true
  if [[ -f $mark ]]; then
    in_node "$n" rmdir /dev/vfio 2>/dev/null || true
    rm -f "$mark"
  fi
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
  local mounts
  mapfile -t mounts <"$mark"
  for m in "${mounts[@]}"; do in_node "$n" mount --make-private "$m" || true; done
  rm -f "$mark"
}

# Node 1's devices of the driver's slices, as JSON lines.

# vfio_host_up / vfio_host_down: every node's fake host mounted (/sys and /proc shared), node 1's
# /dev/vfio and the fake kernel; and all of it undone.
vfio_host_up() {
  local n
  for n in "$GPU_NODE" $MIG_NODE; do
    make_fake_host "$n"
    mount_fake_host "$n"
    share_sys_proc "$n"
  done
  mount_dev_vfio "$GPU_NODE"
  start_fake_kernel
}
vfio_host_down() {
  stop_fake_kernel
  unmount_dev_vfio "$GPU_NODE"
  local n
  for n in "$GPU_NODE" $MIG_NODE; do
    unshare_sys_proc "$n"
    in_node "$n" umount -R "$HOST_ROOT_AT" 2>/dev/null || true
    in_node "$n" rmdir "$HOST_ROOT_AT" 2>/dev/null || true
    rm -rf "$(fake_host "$n")"
  done
}

# bus_of <device>: the PCI bus id node 1's slices publish for the device.
bus_of() {
  kubectl get resourceslices -o json --field-selector "spec.nodeName=$GPU_NODE,spec.driver=$DRIVER" |
    jq -r --arg d "$1" '.items[].spec.devices[]? | select(.name == $d) | .attributes["resource.kubernetes.io/pciBusID"].string'
}
# driver_of <bus>: the driver the fake host's PCI function is bound to.
driver_of() { basename "$(readlink "$(fake_host "$GPU_NODE")/sys/bus/pci/devices/$1/driver")"; }
group_of() { basename "$(readlink "$(fake_host "$GPU_NODE")/sys/bus/pci/devices/$1/iommu_group")"; }
# sees_group <pod> <group>: the container listed /dev/vfio/<group> as a character device.
sees_group() { k logs "$1" 2>/dev/null | grep -qE "^c.* $2\$"; }
