#!/usr/bin/env bash
# Stops and restarts only kube-apiserver, with the flags up.sh uses (cmd_kube_apiserver in lib.sh),
# and waits for /readyz. Integration tests use it to prove that watches resume across a restart.
# etcd keeps running, so every object and resourceVersion survives.
#   --kill  SIGKILL instead of a graceful stop: simulates a crash (connections reset, no GOAWAY).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

grace=10
case ${1:-} in
  --kill) grace=0 ;;
  "") ;;
  *) die "usage: $0 [--kill]" ;;
esac

start_time=$EPOCHREALTIME
exec 9>"$CLUSTER_DIR.lock"
flock -w 600 9 || die "another up.sh/down.sh holds $CLUSTER_DIR.lock"
{ component_pid etcd >/dev/null && component_healthy etcd; } ||
  die "etcd is not running; start the cluster with hack/cluster/up.sh"
stop_component kube-apiserver "$grace"
progress "starting kube-apiserver"
start_component kube-apiserver
wait_healthy kube-apiserver
# The controller-manager and scheduler ride out an apiserver restart; should one have exited anyway,
# say so loudly and bring it back, so the next test does not run against half a control plane.
for c in kube-controller-manager kube-scheduler; do
  if ! component_pid "$c" >/dev/null; then
    progress "WARNING: $c exited during the apiserver restart (see $LOG_DIR/$c.log); restarting it"
    start_component "$c"
    wait_healthy "$c"
  fi
done
progress "kube-apiserver ready again in $(elapsed "$start_time") (pid $(component_pid kube-apiserver))"
