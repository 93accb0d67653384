#!/usr/bin/env bash
# Stops everything up.sh and node.sh started (SIGTERM, SIGKILL after a grace period) and checks that
# no cluster process is left. --purge also removes $CLUSTER_DIR (certificates, etcd data, logs).
# Idempotent.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

purge=0
case ${1:-} in
  --purge) purge=1 ;;
  "") ;;
  *) die "usage: $0 [--purge]" ;;
esac
start_time=$EPOCHREALTIME

# Processes from pid files first, then anything else whose command line names $CLUSTER_DIR. The
# apiserver's clients go first and together (each takes a second or two), then the apiserver, then
# etcd, so that nothing spends its shutdown retrying a peer that already vanished.
stop_all() {
  local f name
  for f in "$RUN_DIR"/*.pid; do
    [[ -e $f ]] || continue
    name=$(basename "$f" .pid)
    if [[ $name != etcd && $name != kube-apiserver ]]; then stop_component "$name" & fi
  done
  wait
  stop_component kube-apiserver
  stop_component etcd
  ip addr del "$APISERVER_POD_IP/32" dev lo 2>/dev/null || true
}

# Kills leftovers that run our binaries; only reports other processes that merely mention the
# folder (an editor, a `tail -f` on a log), since those are not the cluster's to stop.
stop_leftovers() {
  local pid
  for pid in $(cluster_pids); do
    if is_cluster_binary "$pid"; then
      progress "stopping leftover pid $pid: $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | cut -c1-120)"
      stop_pid "$pid" 5
    fi
  done
  return 0
}

# How many pid files and cluster processes there are; 0 means already down.
count_running() {
  local n=0 f pid
  for f in "$RUN_DIR"/*.pid; do [[ -e $f ]] && n=$((n + 1)); done
  for pid in $(cluster_pids); do is_cluster_binary "$pid" && n=$((n + 1)); done
  echo "$n"
}

verify_none_left() {
  local pid left=0 f
  for pid in $(cluster_pids); do
    if is_cluster_binary "$pid"; then
      printf '[cluster] error: pid %s still running: %s\n' "$pid" "$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | cut -c1-160)" >&2
      left=1
    else
      progress "note: pid $pid mentions $CLUSTER_DIR but is not a cluster binary, left alone: $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | cut -c1-100)"
    fi
  done
  for f in "$RUN_DIR"/*.pid; do [[ -e $f ]] && { echo "[cluster] error: pid file $f left" >&2; left=1; }; done
  ((left == 0)) || die "cluster processes are still running"
}

main() {
  # The nodes first (with their pods, the driver's among them), while the API server can still
  # take their Node objects and pods away.
  "$HACK_CLUSTER_DIR/node.sh" down
  # Taken even when $CLUSTER_DIR is gone: someone may have removed it under a running cluster.
  exec 9>"$CLUSTER_DIR.lock"
  flock -w 600 9 || die "another up.sh/down.sh holds $CLUSTER_DIR.lock"

  local before; before=$(count_running)
  if ((before == 0)); then
    progress "cluster already down"
  else
    stop_all
    stop_leftovers
  fi
  verify_none_left
  if ((purge)); then
    rm -rf "$CLUSTER_DIR" "$CLUSTER_DIR.lock"
    progress "removed $CLUSTER_DIR"
  fi
  ((before == 0)) || progress "cluster down in $(elapsed "$start_time")"
}

main "$@"
