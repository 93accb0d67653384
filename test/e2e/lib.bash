# Helpers for the e2e bats files. They run against a cluster and nodes that are already up
# (hack/cluster/up.sh --nodes N); run.sh checks that first.
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$REPO_ROOT/hack/cluster/lib.sh"
# DRA_NODES, DRA_NODE_<i>_{NAME,IP,SOCKET,CDI_STATIC_DIR,CDI_DYNAMIC_DIR,KUBELET_DIR,MNTNS}.
source "$CLUSTER_DIR/nodes.env"
export KUBECONFIG=$KUBECONFIG_PATH

kubectl() { "$K8S_BIN_DIR/kubectl" --request-timeout=20s "$@"; }

# node_var <i> <FIELD>: a field of node i from nodes.env.
node_var() { local v="DRA_NODE_$1_$2"; echo "${!v}"; }

# node_ctr <i> <ctr args...>: ctr against node i's containerd, inside the node's mount namespace,
# so that ctr's CDI registry reads that node's /etc/cdi and /var/run/cdi, as its containerd does.
node_ctr() {
  local i=$1; shift
  nsenter --mount="$(node_var "$i" MNTNS)" -- \
    "$CONTAINERD_BIN_DIR/ctr" -a "$(node_var "$i" SOCKET)" -n k8s.io "$@"
}

# A namespace per bats file, removed in teardown_file.
make_test_namespace() {
  E2E_NS=e2e-$1-$RANDOM$RANDOM
  kubectl create namespace "$E2E_NS" >/dev/null
  export E2E_NS
}

# wait_pod_phase <name> <phase> [timeout seconds]: prints the pod's description on timeout.
wait_pod_phase() {
  local pod=$1 want=$2 deadline=$((SECONDS + ${3:-60})) phase
  while :; do
    phase=$(kubectl -n "$E2E_NS" get pod "$pod" -o jsonpath='{.status.phase}' 2>/dev/null) || phase=
    [[ $phase == "$want" ]] && return 0
    if ((SECONDS >= deadline)) || [[ $phase == Failed && $want != Failed ]]; then
      echo "pod $pod is $phase, want $want" >&2
      kubectl -n "$E2E_NS" describe pod "$pod" >&2
      return 1
    fi
    sleep 0.5
  done
}

# wait_for <seconds> <description> <command...>: retries the command until it succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    ((SECONDS < deadline)) || { echo "timed out waiting for $what" >&2; return 1; }
    sleep 0.5
  done
}

# sa_kubeconfig <namespace> <service account> <pod>: prints the path of a kubeconfig that
# authenticates as the service account with a token bound to <pod> (kubectl create token
# --bound-object-kind Pod), so the API server sees the pod's name and node in the user's extra
# (authentication.kubernetes.io/pod-name, .../node-name), as it does for the pod's own token.
# Used with: "$K8S_BIN_DIR/kubectl" --kubeconfig <path> ...
sa_kubeconfig() {
  local f token
  f=$(mktemp "${BATS_TEST_TMPDIR:-/tmp}/kubeconfig-$2-XXXX")
  token=$(kubectl -n "$1" create token "$2" --bound-object-kind Pod --bound-object-name "$3" --duration 10m) || return 1
  cat >"$f" <<EOF2
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: "https://127.0.0.1:$APISERVER_PORT", certificate-authority: "$PKI_DIR/ca.crt"}
users:
- name: $2
  user: {token: "$token"}
contexts:
- name: $2
  context: {cluster: e2e, user: $2}
current-context: $2
EOF2
  echo "$f"
}
