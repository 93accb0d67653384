#!/usr/bin/env bash
# Starts a local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler) on 127.0.0.1 for the integration and e2e tests. Idempotent: a healthy cluster is
# left alone, missing or unhealthy components are (re)started, certificates are created only when
# missing. Afterwards `source $CLUSTER_DIR/env.sh` points kubectl at it.
#   --nodes N  also start N local nodes (containerd + kubelet, see node.sh), N=0 none (default).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_CLUSTER_DIR/pki.sh"

start_time=$EPOCHREALTIME

all_healthy() {
  local c pid
  for c in "${COMPONENTS[@]}"; do
    pid=$(component_pid "$c") && component_healthy "$c" && [[ -z $(component_drift "$pid" "$c") ]] ||
      return 1
  done
  [[ -s $KUBECONFIG_PATH && -s $CLUSTER_DIR/limited.kubeconfig && -s $CLUSTER_DIR/expired.kubeconfig ]]
}

# Leaves a running and healthy component alone; restarts one that is running but stays unhealthy
# (it may still be starting, hence the short grace); starts a missing one.
ensure_component() {
  local name=$1 pid i drift
  if pid=$(component_pid "$name"); then
    drift=$(component_drift "$pid" "$name")
    for i in $(seq 25); do
      [[ -z $drift ]] || break
      component_healthy "$name" && { progress "$name already running (pid $pid)"; return 0; }
      sleep 0.2
    done
    progress "$name (pid $pid): ${drift:-unhealthy}, restarting it"
    stop_component "$name"
  fi
  local port; port=$(component_port "$name")
  # A healthy answer from someone else's process on our port would fool every check below.
  port_in_use "$port" && die "$name: port $port on 127.0.0.1 is taken by a process up.sh did not start; if it is a leftover of this cluster, down.sh stops it ($(ss -Hltnp "sport = :$port" | head -1))"
  [[ $name != etcd ]] || ! port_in_use "$ETCD_PEER_PORT" || die "etcd: peer port $ETCD_PEER_PORT is taken"
  local t=$EPOCHREALTIME
  progress "starting $name (log $LOG_DIR/$name.log)"
  start_component "$name"
  wait_healthy "$name"
  progress "$name healthy in $(elapsed "$t") (pid $(component_pid "$name"))"
}

# Service account dra-test (cluster-admin) and a fresh token for it in token.kubeconfig. A new token
# on every up, so that a long-lived cluster never hands tests an expired one.
write_token_kubeconfig() {
  local kubectl=("$K8S_BIN_DIR/kubectl" --kubeconfig="$KUBECONFIG_PATH") i token
  # The "default" namespace appears shortly after /readyz (the apiserver's bootstrap controller); on
  # a just-created cluster on a busy machine that can take a while.
  for i in $(seq $((WAIT_TIMEOUT * 5))); do
    "${kubectl[@]}" get namespace default >/dev/null 2>&1 && break
    ((i < WAIT_TIMEOUT * 5)) || die "namespace default did not appear within ${WAIT_TIMEOUT}s after the apiserver was ready (see $LOG_DIR/kube-apiserver.log)"
    sleep 0.2
  done
  "${kubectl[@]}" apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: ServiceAccount
metadata: {name: dra-test, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: dra-test-cluster-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: dra-test, namespace: default}]
EOF
  token=$("${kubectl[@]}" create token dra-test -n default --duration=24h)
  write_kubeconfig "$CLUSTER_DIR/token.kubeconfig" dra-test "" "$token"
}

# The final end-to-end check, through kubectl as a test would do it.
verify_cluster() {
  local kubectl=("$K8S_BIN_DIR/kubectl" --kubeconfig="$KUBECONFIG_PATH") r names v
  [[ $("${kubectl[@]}" get --raw /readyz) == ok ]] || die "kubectl get --raw /readyz is not ok"
  for v in v1 v1beta1 v1beta2; do
    "${kubectl[@]}" get --raw "/apis/resource.k8s.io/$v" >/dev/null ||
      die "resource.k8s.io/$v is not served"
  done
  names=$("${kubectl[@]}" api-resources --api-group=resource.k8s.io -o name)
  for r in resourceslices resourceclaims resourceclaimtemplates deviceclasses; do
    grep -qx "$r.resource.k8s.io" <<<"$names" || die "api-resources lacks $r.resource.k8s.io"
  done
  # The token kubeconfig proves service-account tokens authenticate.
  "$K8S_BIN_DIR/kubectl" --kubeconfig="$CLUSTER_DIR/token.kubeconfig" get --raw /readyz >/dev/null ||
    die "token.kubeconfig is rejected"
}

main() {
  local c nodes=0
  case ${1:-} in
    --nodes) nodes=${2:?--nodes needs a number} ;;
    --nodes=*) nodes=${1#*=} ;;
    "") ;;
    *) die "usage: $0 [--nodes N]" ;;
  esac
  mkdir -p "$CLUSTER_DIR"
  # One up/down at a time; the lock lives beside CLUSTER_DIR because down.sh --purge removes it.
  exec 9>"$CLUSTER_DIR.lock"
  flock -w 600 9 || die "another up.sh/down.sh holds $CLUSTER_DIR.lock"

  # A no-op in milliseconds when the binaries are current; a rebuilt binary restarts its component.
  "$HACK_CLUSTER_DIR/build.sh"
  # Not `ip ... | grep -q`: under pipefail, grep quitting at the first match can kill ip with
  # SIGPIPE, and the address that is there reads as missing ("Address already assigned").
  [[ $(ip -4 addr show dev lo) == *" $APISERVER_POD_IP/32 "* ]] || ip addr add "$APISERVER_POD_IP/32" dev lo ||
    die "cannot add the pods' API server address $APISERVER_POD_IP to lo (needs root)"
  if all_healthy; then
    write_token_kubeconfig
    progress "cluster already up and healthy (kubeconfig $KUBECONFIG_PATH); token refreshed, $(elapsed "$start_time")"
    start_nodes "$nodes"
    return 0
  fi

  mkdir -p "$RUN_DIR" "$LOG_DIR"
  ensure_pki
  if ((PKI_FRESH)); then
    # Anything still running trusts the old CA.
    for c in "${COMPONENTS[@]}"; do stop_component "$c"; done
  fi
  write_cert_kubeconfigs

  for c in "${COMPONENTS[@]}"; do ensure_component "$c"; done

  progress "creating service account dra-test and token.kubeconfig"
  write_token_kubeconfig
  verify_cluster
  progress "cluster up in $(elapsed "$start_time"): export KUBECONFIG=$KUBECONFIG_PATH (or source $CLUSTER_DIR/env.sh)"
  start_nodes "$nodes"
}

# node.sh takes the up/down lock itself, and need not check the control plane again.
start_nodes() {
  (($1 > 0)) || return 0
  exec 9>&-
  DRA_CONTROL_PLANE_CHECKED=1 exec "$HACK_CLUSTER_DIR/node.sh" up --nodes "$1"
}

main "$@"
