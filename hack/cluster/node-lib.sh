# shellcheck shell=bash disable=SC2034 # its variables are read by the scripts that source it
# Settings and command lines of the local nodes (node.sh). Source it after lib.sh and pki.sh.
#
# A node is a containerd + kubelet pair in a mount namespace of its own. Inside it the standard
# paths (/var/lib/kubelet, /etc/cdi, /var/run/cdi, /var/lib/containerd, /run/containerd,
# /var/lib/cni) are bind mounts of per-node folders, so several nodes share this machine without
# sharing files, and a kubelet plugin (or a hostPath volume) sees production paths. Mounts made by
# the kubelet, containerd and runc stay in that namespace and vanish with it.
NODE_PREFIX=dra-node
NODE_MAX=20
# Host folders of node <name>: persistent state, and runtime state (sockets, the CDI dir /var/run/cdi).
NODE_STATE_ROOT=${DRA_NODE_STATE_ROOT:-/var/lib/dra-nodes}
NODE_RUN_ROOT=${DRA_NODE_RUN_ROOT:-/run/dra-nodes}
# Node i has the address $NODE_IP_NET.i on lo (the kubelet refuses 127.0.0.0/8 as a node IP) and
# the pod range $POD_NET.i.0/24 on its bridge dra-cni<i>.
NODE_IP_NET=${DRA_NODE_IP_NET:-10.250.0}
POD_NET=${DRA_POD_NET:-10.244}
# Node i serves the kubelet API on port KUBELET_PORT + 100*(i-1), /healthz on that minus 2, so node
# 1 has the upstream defaults 10250/10248 and no node meets the control plane's 10257/10259.
KUBELET_PORT=${DRA_KUBELET_PORT:-10250}
# overlayfs works in this VM; "native" is the fallback where it does not (slower, copies layers).
NODE_SNAPSHOTTER=${DRA_NODE_SNAPSHOTTER:-overlayfs}
RUNC=${DRA_RUNC:-$(command -v runc || echo /usr/sbin/runc)}
CNI_BIN_DIR=${DRA_CNI_BIN_DIR:-/usr/lib/cni}

node_name() { echo "$NODE_PREFIX-$1"; }
node_index() { echo "${1##*-}"; }
node_ip() { echo "$NODE_IP_NET.$(node_index "$1")"; }
node_port() { echo $((KUBELET_PORT + 100 * ($(node_index "$1") - 1))); }
node_healthz_port() { echo $(($(node_port "$1") - 2)); }
node_conf_dir() { echo "$CLUSTER_DIR/nodes/$1"; }
node_socket() { echo "$CLUSTER_DIR/nodes/$1/containerd.sock"; }
node_mntns() { echo "$NODE_RUN_ROOT/$1/mnt"; }
node_bridge() { echo "dra-cni$(node_index "$1")"; }
# The cgroup (in every v1 hierarchy) that holds the node's pods, so that kubelets do not share
# /kubepods and node.sh down can find every container process of a node.
node_cgroup() { echo "/$1"; }

# Host folder -> path inside the node's mount namespace. The container logs too: every kubelet's
# container GC deletes the /var/log/pods folders (and /var/log/containers links) of pods it does not
# know, so with shared folders a node removed the logs of the other nodes' pods.
node_binds() {
  local s=$NODE_STATE_ROOT/$1 r=$NODE_RUN_ROOT/$1
  printf '%s\n' "$s/kubelet /var/lib/kubelet" "$s/containerd /var/lib/containerd" \
    "$s/cni /var/lib/cni" "$s/cdi /etc/cdi" "$r/containerd /run/containerd" "$r/cdi /run/cdi" \
    "$s/pod-logs /var/log/pods" "$s/container-logs /var/log/containers"
}
# Where a test writes a CDI spec for the node: the host side of /etc/cdi and /var/run/cdi.
node_cdi_static_dir() { echo "$NODE_STATE_ROOT/$1/cdi"; }
node_cdi_dynamic_dir() { echo "$NODE_RUN_ROOT/$1/cdi"; }

# Runs a command inside the node's mount namespace (sees the node's /etc/cdi, /var/lib/kubelet...).
node_nsenter() { local n=$1; shift; nsenter --mount="$(node_mntns "$n")" -- "$@"; }

cmd_containerd() {
  local node=${1%/*}
  CMD_PREFIX=(nsenter --mount="$(node_mntns "$node")" --)
  CMD=("$CONTAINERD_BIN_DIR/containerd" --config "$(node_conf_dir "$node")/containerd.toml")
}

cmd_kubelet() {
  local node=${1%/*} d; d=$(node_conf_dir "${1%/*}")
  CMD_PREFIX=(nsenter --mount="$(node_mntns "$node")" --)
  CMD=("$K8S_BIN_DIR/kubelet" --config="$d/kubelet.yaml" --kubeconfig="$d/kubelet.kubeconfig"
    --hostname-override="$node" --node-ip="$(node_ip "$node")" --root-dir=/var/lib/kubelet
    --node-labels="dra.test/node-index=$(node_index "$node")" --v="${DRA_KUBELET_VERBOSITY:-1}")
}

node_health_url() {
  case $1 in
    */kubelet) echo "http://127.0.0.1:$(node_healthz_port "${1%/*}")/healthz" ;;
    */containerd) echo "unix://$(node_socket "${1%/*}")" ;;
  esac
}

node_component_healthy() {
  case $1 in
    */kubelet) [[ $(curl -sf -m 2 "$(node_health_url "$1")") == ok ]] ;;
    */containerd) "$CONTAINERD_BIN_DIR/ctr" -a "$(node_socket "${1%/*}")" --timeout 2s version >/dev/null 2>&1 ;;
  esac
}

# The kubelet's client certificate (the Node authorizer and NodeRestriction key on the
# system:node:<name> user in group system:nodes) and a serving certificate from the cluster CA, so
# that the API server's connections to the kubelet (logs, exec) can be verified.
node_pki() {
  local n=$1
  issue_cert "kubelet-$n" "/O=system:nodes/CN=system:node:$n" clientAuth
  issue_cert "kubelet-$n-serving" "/CN=$n" serverAuth "IP:$(node_ip "$n"),DNS:$n"
  chmod 600 "$PKI_DIR"/*.key
  write_kubeconfig "$(node_conf_dir "$n")/kubelet.kubeconfig" "system:node:$n" "kubelet-$n"
}

source "$HACK_CLUSTER_DIR/node-config.sh"
