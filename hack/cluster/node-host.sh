# shellcheck shell=bash
# What a local node changes on this machine, and how node.sh takes it back: the mount namespace
# and its bind mounts, the node address on lo, the pod cgroup, the CNI bridge, an empty /lib/modules
# where the machine has none. Sourced by node.sh.

# v1 hierarchies (cpu, memory, ..., name=systemd) plus the v2 "unified" one of a hybrid setup.
cgroup_mounts() { findmnt -rn -t cgroup,cgroup2 -o TARGET; }

# Once for all nodes: $NODE_RUN_ROOT as a private mount, so the namespace pin files inside it
# neither propagate into other namespaces nor get copied into the next node's namespace with a
# reference that would keep them alive. And the Service range made unreachable: nothing routes it
# here (no kube-proxy), and without this a client in a hostNetwork pod would send it to the default
# gateway, off this machine.
# In place of kube-proxy, one rule serves the one Service the driver needs: a pod's connection to
# the `kubernetes` Service ($SERVICE_FIRST_IP:443) is sent to the API server's address for pods
# ($APISERVER_POD_IP:$APISERVER_PORT), so in-cluster clients (the driver's pods, and the ComputeDomain
# daemon pods its controller creates) use the standard KUBERNETES_SERVICE_HOST/PORT the kubelet
# gives them. Pods have a route to that address (node-config.sh); hostNetwork pods do not use it.
service_dnat_rule() {
  echo PREROUTING -d "$SERVICE_FIRST_IP/32" -p tcp --dport 443 -j DNAT \
    --to-destination "$APISERVER_POD_IP:$APISERVER_PORT" -m comment --comment dra-kubernetes-service
}
host_setup_shared() {
  mkdir -p "$NODE_RUN_ROOT" "$NODE_STATE_ROOT"
  if ! mountpoint -q "$NODE_RUN_ROOT"; then
    mount --bind "$NODE_RUN_ROOT" "$NODE_RUN_ROOT"
    mount --make-private "$NODE_RUN_ROOT"
  fi
  ip route replace unreachable "$SERVICE_CIDR"
  # shellcheck disable=SC2046
  iptables -t nat -C $(service_dnat_rule) 2>/dev/null || iptables -t nat -A $(service_dnat_rule) ||
    die "cannot add the iptables DNAT rule for the kubernetes Service (needs root and iptables)"
  # The CNI bridge plugin turns on IPv4 forwarding (pod to pod across nodes); put back what was.
  [[ -s $NODE_RUN_ROOT/.ip_forward ]] || cat /proc/sys/net/ipv4/ip_forward >"$NODE_RUN_ROOT/.ip_forward"
  # The chart mounts the node's /lib/modules (hostPath, type Directory) when PassthroughSupport is
  # on, as on any real node. A machine whose kernel has no modules (a microVM) lacks the folder,
  # and the plugin pod would never start: an empty one serves (the plugin reads modules.alias
  # under its host root, not there). Removed again by host_teardown_shared.
  if [[ ! -e /lib/modules ]]; then
    mkdir /lib/modules
    touch "$NODE_RUN_ROOT/.lib_modules_made"
  fi
}

host_teardown_shared() {
  ! compgen -G "$NODE_RUN_ROOT/$NODE_PREFIX-*" >/dev/null || return 0
  [[ ! -s $NODE_RUN_ROOT/.ip_forward ]] || cat "$NODE_RUN_ROOT/.ip_forward" >/proc/sys/net/ipv4/ip_forward
  [[ ! -e $NODE_RUN_ROOT/.lib_modules_made ]] || rmdir /lib/modules 2>/dev/null || true
  ! mountpoint -q "$NODE_RUN_ROOT" || umount "$NODE_RUN_ROOT"
  rm -rf "$NODE_RUN_ROOT"
  rmdir "$NODE_STATE_ROOT" "$CLUSTER_DIR/nodes" 2>/dev/null || true
  ip route del unreachable "$SERVICE_CIDR" 2>/dev/null || true
  # shellcheck disable=SC2046
  while iptables -t nat -D $(service_dnat_rule) 2>/dev/null; do :; done
}

host_setup_node() {
  local n=$1 ip cg h
  ip=$(node_ip "$n")
  # No `| grep -q` here: under pipefail its early exit can fail the pipeline (see up.sh).
  [[ $(ip -4 addr show dev lo) == *" $ip/32 "* ]] || ip addr add "$ip/32" dev lo
  # The kubelet wants its cgroupRoot to exist. A new v1 cpuset cgroup starts with no CPUs and no
  # memory nodes, and no task could join it, so those are copied from the root.
  cg=$(node_cgroup "$n")
  for h in $(cgroup_mounts); do mkdir -p "$h$cg"; done
  if [[ -f /sys/fs/cgroup/cpuset/cpuset.cpus ]]; then
    cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset$cg/cpuset.cpus"
    cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset$cg/cpuset.mems"
  fi
  setup_mntns "$n"
}

# A persistent mount namespace pinned on a file (like `ip netns add`), slave to the host so that
# host mounts still show up inside, with the node's folders bound over the standard paths.
setup_mntns() {
  local n=$1 pin src dst
  pin=$(node_mntns "$n")
  mountpoint -q "$pin" && return 0
  mkdir -p "${pin%/*}"
  while read -r src dst; do mkdir -p "$src" "$dst"; done < <(node_binds "$n")
  touch "$pin"
  unshare --mount="$pin" --propagation slave true || die "$n: unshare --mount=$pin failed"
  # shellcheck disable=SC2016
  node_nsenter "$n" bash -euc '
    # Pins of other nodes were copied in; drop them, they would keep those namespaces alive.
    findmnt -rn -t nsfs -o TARGET | grep "^$0/" | xargs -r -n1 umount -l
    while read -r src dst; do mount --bind "$src" "$dst"; done
    # Bidirectional mount propagation (hostPath volumes of plugins) needs a shared kubelet dir.
    mount --make-rshared /var/lib/kubelet' "$NODE_RUN_ROOT" < <(node_binds "$n") ||
    die "$n: bind mounts in the node's mount namespace failed"
}

# Kills every process in the node's pod cgroup (containers and their pause processes).
kill_node_cgroup_procs() {
  local n=$1 i h pids=()
  for ((i = 0; i < 50; i++)); do
    mapfile -t pids < <(for h in $(cgroup_mounts); do
      [[ -d $h$(node_cgroup "$n") ]] && find "$h$(node_cgroup "$n")" -name cgroup.procs -exec cat {} +
    done | sort -u)
    ((${#pids[@]})) || return 0
    ((i > 0)) || progress "$n: killing ${#pids[@]} container process(es)"
    kill -KILL "${pids[@]}" 2>/dev/null || true
    sleep 0.1
  done
  progress "WARNING: $n: processes left in cgroup $(node_cgroup "$n"): ${pids[*]}"
}

# Kills what is left in the node's mount namespace: shims, and anything a crash left behind.
kill_node_ns_procs() {
  local n=$1 pin id p
  pin=$(node_mntns "$n")
  mountpoint -q "$pin" || return 0
  id="mnt:[$(stat -L -c %i "$pin")]"
  for p in /proc/[0-9]*; do
    [[ $(readlink "$p/ns/mnt" 2>/dev/null) == "$id" ]] || continue
    progress "$n: stopping pid ${p#/proc/}: $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | cut -c1-100)"
    stop_pid "${p#/proc/}" 5
  done
}

host_teardown_node() {
  local n=$1 pin h cg
  pin=$(node_mntns "$n")
  # The last reference: unmounting the pin frees the namespace and with it every mount the kubelet,
  # containerd and runc made inside (container rootfs, secrets, pod network namespaces).
  ! mountpoint -q "$pin" || umount "$pin"
  cg=$(node_cgroup "$n")
  for h in $(cgroup_mounts); do
    [[ -d $h$cg ]] && find "$h$cg" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  ip addr del "$(node_ip "$n")/32" dev lo 2>/dev/null || true
  ip link del "$(node_bridge "$n")" 2>/dev/null || true
  rm -rf "${NODE_RUN_ROOT:?}/$n" "${NODE_STATE_ROOT:?}/$n"
}

verify_nodes_gone() {
  local left=0 m
  for m in $(findmnt -rn -o TARGET | grep -E "^($NODE_RUN_ROOT|$NODE_STATE_ROOT)/" || true); do
    printf '[cluster] error: mount %s left\n' "$m" >&2; left=1
  done
  for m in /sys/fs/cgroup/*/"$NODE_PREFIX"-*; do
    [[ -e $m ]] && { printf '[cluster] error: cgroup %s left\n' "$m" >&2; left=1; }
  done
  ip -br link | grep -q '^dra-cni' && { echo '[cluster] error: a dra-cni bridge is left' >&2; left=1; }
  ((left == 0)) || die "nodes left traces behind"
}

# For tests and humans: names, addresses and folders of the running nodes.
write_nodes_env() {
  local i n f=$CLUSTER_DIR/nodes.env
  {
    echo "# Source me: the local nodes (hack/cluster/node.sh)."
    echo "DRA_NODES=\"$(for ((i = 1; i <= $1; i++)); do printf '%s ' "$(node_name "$i")"; done | sed 's/ $//')\""
    for ((i = 1; i <= $1; i++)); do
      n=$(node_name "$i")
      echo "DRA_NODE_${i}_NAME=$n DRA_NODE_${i}_IP=$(node_ip "$n") DRA_NODE_${i}_SOCKET=$(node_socket "$n")"
      echo "DRA_NODE_${i}_CDI_STATIC_DIR=$(node_cdi_static_dir "$n") DRA_NODE_${i}_CDI_DYNAMIC_DIR=$(node_cdi_dynamic_dir "$n")"
      echo "DRA_NODE_${i}_STATE_DIR=$NODE_STATE_ROOT/$n DRA_NODE_${i}_KUBELET_DIR=$NODE_STATE_ROOT/$n/kubelet"
      echo "DRA_NODE_${i}_MNTNS=$(node_mntns "$n")"
    done
    echo "DRA_PAUSE_IMAGE=$PAUSE_IMAGE DRA_WORKLOAD_IMAGE=$WORKLOAD_IMAGE"
  } >"$f.tmp"
  mv -f "$f.tmp" "$f"
}
