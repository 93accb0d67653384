# Shared settings for the hack/cluster scripts. Source it; it defines no side effects beyond variables
# and helper functions.
K8S_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
# Builds live outside the source tree so that a fresh clone reuses them and rebuilds are instant.
DRA_CACHE_DIR=${DRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dra-driver-nvidia-gpu}
K8S_BIN_DIR=$DRA_CACHE_DIR/k8s-$K8S_VERSION/bin
ETCD_BIN_DIR=$DRA_CACHE_DIR/etcd-$ETCD_VERSION/bin
# Runtime state of the local cluster (certificates, etcd data, logs, pids, kubeconfig).
CLUSTER_DIR=${DRA_CLUSTER_DIR:-/tmp/dra-cluster}
KUBECONFIG_PATH=$CLUSTER_DIR/admin.kubeconfig
APISERVER_PORT=${DRA_APISERVER_PORT:-6443}
ETCD_CLIENT_PORT=${DRA_ETCD_PORT:-2379}
ETCD_PEER_PORT=$((ETCD_CLIENT_PORT + 1))

HACK_CLUSTER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

progress() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf '[cluster] error: %s\n' "$*" >&2; exit 1; }
