#!/usr/bin/env bats
# Host-managed IMEX end to end (resources.computeDomains.imex.mode=hostManaged with the gate
# HostManagedIMEXDaemon, docs/compute-domains.md "Host-managed IMEX"): the host runs nvidia-imex,
# the driver runs no IMEX daemon pods. Node 3 serves the GB200 profile (cd_lib.bash); its "host"
# IMEX daemon is the fake nvidia-imex started here as a process of this machine, serving its
# command channel on <node's mock driver root>/etc/nvidia-imex/imex_ctrl.sock, the socket the
# plugin queries with nvidia-imex-ctl -q --u=/driver-root/etc/nvidia-imex/imex_ctrl.sock. Run
# through run.sh.

HOST_IMEX_IP=127.0.0.73  # the fake's own address; its nodes file lists only itself

setup_file() {
  load lib
  load gpu_lib
  load cd_lib
  make_test_namespace cdhost
  cd_nodes_up 3 3
  N3=$(node_var 3 NAME)
  export N3
  change_driver --set resources.computeDomains.imex.mode=hostManaged \
    --set featureGates.HostManagedIMEXDaemon=true
  wait_for 120 "the hostManaged plugin on $N3 to publish only channel-0" \
    eval '[[ $(cd_slice_devices '"$N3"') == channel-0 ]]'
  start_host_imex
}

teardown_file() {
  load lib
  load gpu_lib
  load cd_lib
  stop_host_imex
  kubectl delete namespace "$E2E_NS" --wait=true --timeout=90s >/dev/null 2>&1 || true
  restore_driver
  cd_nodes_down
}

setup() {
  load lib
  load gpu_lib
  load cd_lib
}

teardown() {
  k delete pods --all --wait=true --timeout=60s >/dev/null 2>&1 || true
  k delete computedomains --all --wait=true --timeout=60s >/dev/null 2>&1 || true
}

host_imex_socket() { echo "$(node_driver_root "$N3")/etc/nvidia-imex/imex_ctrl.sock"; }

# start_host_imex: the fake nvidia-imex of the build as node 3's host IMEX daemon; waits until
# nvidia-imex-ctl gets READY through the socket.
start_host_imex() {
  local dir=$BATS_FILE_TMPDIR sock bin=$REPO_ROOT/build/default/test/doubles/imex
  sock=$(host_imex_socket)
  mkdir -p "${sock%/*}"
  echo "$HOST_IMEX_IP" >"$dir/host-imex-nodes.cfg"
  cat >"$dir/host-imex.cfg" <<EOF
SERVER_PORT=50173
IMEX_NODE_CONFIG_FILE=$dir/host-imex-nodes.cfg
IMEX_CMD_ENABLED=1
IMEX_CMD_BIND_INTERFACE_IP=$HOST_IMEX_IP
IMEX_CMD_PORT=50175
IMEX_CMD_UNIX_DOMAIN_PATH=$sock
EOF
  # fd 3 closed: bats waits for every holder of it before it ends.
  "$bin/nvidia-imex" -c "$dir/host-imex.cfg" >>"$dir/host-imex.log" 2>&1 3>&- &
  echo $! >"$dir/host-imex.pid"
  wait_for 20 "the host IMEX daemon" eval '[[ $("'"$bin"'/nvidia-imex-ctl" -q --u="'"$sock"'" 2>/dev/null) == READY ]]' || {
    cat "$dir/host-imex.log" >&2; return 1
  }
}

stop_host_imex() {
  local pidfile=$BATS_FILE_TMPDIR/host-imex.pid pid
  [[ -f $pidfile ]] || return 0
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || true
  wait_for 10 "the host IMEX daemon to exit" eval '! kill -0 '"$pid"' 2>/dev/null' || kill -9 "$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

@test "hostManaged: the node publishes only channel-0; a ComputeDomain is Ready without any DaemonSet" {
  [ "$(cd_slice_devices "$N3")" = "channel-0" ]
  run kubectl get deviceclass compute-domain-daemon.nvidia.com
  [ "$status" -ne 0 ]
  compute_domain cdh
  wait_cd_status cdh "Ready|" 60
  k get resourceclaimtemplate cdh-channel >/dev/null
  [ -z "$(kubectl -n "$DRIVER_NS" get daemonsets -l "$CD_LABEL=$(cd_uid cdh)" -o name)" ]
  [ -z "$(kubectl get resourceclaimtemplates -A -l "$CD_LABEL=$(cd_uid cdh),resource.nvidia.com/computeDomainTarget=Daemon" -o name)" ]
}

@test "hostManaged: a workload pod sees channel0; no node label and no daemon pod" {
  local uid
  compute_domain cdh
  uid=$(cd_uid cdh)
  cd_workload w1 "$N3" cdh-channel
  wait_pod_phase w1 Running 90
  wait_for 20 "w1's output" eval '[[ -n $(cd_seen w1) ]]'
  [ "$(cd_seen w1)" = "channels=1 channel0" ]
  [ -z "$(kubectl get node "$N3" -o json | jq -r --arg l "$CD_LABEL" '.metadata.labels[$l] // empty')" ]
  [ -z "$(daemon_pods "$uid")" ]
}

@test "hostManaged: without the host's IMEX daemon a workload waits with an event naming it, and starts once it runs" {
  stop_host_imex
  [ ! -e "$(host_imex_socket)" ]
  compute_domain cdh
  cd_workload w2 "$N3" cdh-channel
  wait_for 150 "a FailedPrepareDynamicResources event of w2 naming the IMEX daemon" eval \
    'k get events --field-selector involvedObject.name=w2,reason=FailedPrepareDynamicResources -o json |
       jq -e "[.items[].message | select(test(\"IMEX daemon\"))] | length > 0" >/dev/null'
  k get events --field-selector involvedObject.name=w2,reason=FailedPrepareDynamicResources \
    -o jsonpath='{.items[0].message}' | head -c 600 >&3; echo >&3
  [ "$(k get pod w2 -o jsonpath='{.status.phase}')" = Pending ]
  [ "$(k get pod w2 -o jsonpath='{.status.containerStatuses[0].state.waiting.reason}')" = ContainerCreating ]
  start_host_imex
  wait_pod_phase w2 Running 120
  wait_for 20 "w2's output" eval '[[ -n $(cd_seen w2) ]]'
  [ "$(cd_seen w2)" = "channels=1 channel0" ]
}
