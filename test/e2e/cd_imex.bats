#!/usr/bin/env bats
# ComputeDomains end to end, through the Helm-installed driver: the controller creates the
# per-domain DaemonSet and claim templates, the kube-scheduler allocates the compute-domain
# plugin's channel and daemon devices, an IMEX daemon pod (the driver image, with the fake
# nvidia-imex of the mock driver root) starts on every node that runs a workload pod and connects
# to its peers over the pod network, and the plugin releases the workload's IMEX channel once its
# node's daemon is ready. Nodes 3 and 4 serve the GB200 profile (cd_lib.bash). Run through run.sh.

setup_file() {
  load lib
  load gpu_lib
  load cd_lib
  make_test_namespace cd
  cd_nodes_up 3 4
  N3=$(node_var 3 NAME) N4=$(node_var 4 NAME)
  export N3 N4
}

teardown_file() {
  load lib
  load gpu_lib
  load cd_lib
  kubectl delete namespace "$E2E_NS" "$E2E_NS-tenant" --ignore-not-found --wait=true --timeout=90s >/dev/null 2>&1 || true
  restore_driver
  cd_nodes_down
}

setup() {
  load lib
  load gpu_lib
  load cd_lib
}

teardown() {
  # Workloads first (their claims are unprepared, the node labels removed), then the domains. The
  # tenant namespace too: its pod holds a node's daemon device until it is gone.
  kubectl delete namespace "$E2E_NS-tenant" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
  k delete pods --all --wait=true --timeout=60s >/dev/null 2>&1 || true
  k delete computedomains --all --wait=true --timeout=60s >/dev/null 2>&1 || true
}

# Prints how long the ComputeDomain took from create to Ready, for the closing numbers.
ready_within() {
  local cd=$1 want=$2 t0=$3
  wait_cd_status "$cd" "$want" 180
  echo "# $cd: create -> $want in $((SECONDS - t0)) s" >&3
}

@test "a ComputeDomain with one workload pod per node becomes Ready with both nodes; each pod sees channel0" {
  local t0=$SECONDS uid
  compute_domain cd1
  cd_workload w1 "$N3" cd1-channel
  cd_workload w2 "$N4" cd1-channel
  ready_within cd1 "Ready|$N3,$N4" "$t0"
  wait_pod_phase w1 Running 60
  wait_pod_phase w2 Running 60
  wait_for 20 "w1's output" eval '[[ -n $(cd_seen w1) ]]'
  [ "$(cd_seen w1)" = "channels=1 channel0" ]
  [ "$(cd_seen w2)" = "channels=1 channel0" ]
  uid=$(cd_uid cd1)
  # One daemon pod per workload node, Ready; the clique object lists both, with distinct indices.
  [ "$(daemon_pods "$uid" | wc -l)" -eq 2 ]
  run kubectl -n "$DRIVER_NS" get computedomaincliques -l "$CD_LABEL=$uid" -o json
  [ "$(jq -r '[.items[].daemons[] | .index] | sort | join(",")' <<<"$output")" = "0,1" ]
  [ "$(jq -r '[.items[].daemons[] | .status] | unique | join(",")' <<<"$output")" = "Ready" ]
}

@test "allocationMode All: the container sees channel0 to channel2047" {
  compute_domain cd-all All
  cd_workload w1 "$N3" cd-all-channel
  wait_pod_phase w1 Running 180
  wait_for 20 "w1's output" eval '[[ -n $(cd_seen w1) ]]'
  [ "$(cd_seen w1)" = "channels=2048 channel0 channel2047 channel222" ]
}

@test "deleting the workload removes its nodes and daemon pods; deleting the domain removes its DaemonSet, templates and finalizer" {
  local uid
  compute_domain cd-del
  uid=$(cd_uid cd-del)
  cd_workload w1 "$N3" cd-del-channel
  cd_workload w2 "$N4" cd-del-channel
  wait_cd_status cd-del "Ready|$N3,$N4" 180
  k delete pod w1 w2 --wait=true --timeout=60s >/dev/null
  wait_cd_status cd-del "Ready|" 60
  wait_for 60 "the daemon pods to go" eval '[[ -z $(daemon_pods '"$uid"') ]]'
  [ -z "$(kubectl get nodes -l "$CD_LABEL=$uid" -o name)" ]
  kubectl -n "$DRIVER_NS" get daemonset "computedomain-daemon-$uid"
  k delete computedomain cd-del --wait=true --timeout=60s
  run kubectl -n "$DRIVER_NS" get daemonset "computedomain-daemon-$uid"
  [ "$status" -ne 0 ]
  run kubectl -n "$DRIVER_NS" get resourceclaimtemplate "computedomain-daemon-$uid"
  [ "$status" -ne 0 ]
  run k get resourceclaimtemplate cd-del-channel
  [ "$status" -ne 0 ]
}

@test "a channel config with an unknown field fails the pod's prepare with a permanent error naming the field" {
  local uid
  compute_domain cd-bad
  uid=$(cd_uid cd-bad)
  k apply -f - >/dev/null <<EOF2
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: bad-channel}
spec:
  spec:
    devices:
      requests:
      - name: channel
        exactly: {deviceClassName: compute-domain-default-channel.nvidia.com}
      config:
      - requests: [channel]
        opaque:
          driver: compute-domain.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: ComputeDomainChannelConfig
            domainID: $uid
            unexpectedField: 1
EOF2
  cd_workload w1 "$N3" bad-channel
  # In the public plugin's words (alerts match them), then the class, then the field.
  wait_for 60 "a FailedPrepareDynamicResources event on w1" eval \
    'k get events --field-selector involvedObject.name=w1,reason=FailedPrepareDynamicResources -o json |
       jq -e "[.items[].message | select(test(\"error preparing devices for claim [^ ]+/[^ ]+: permanent error .*unexpectedField\"))] | length > 0" >/dev/null'
  [ "$(k get pod w1 -o jsonpath='{.status.phase}')" = Pending ]
}

@test "a tenant's claim on another domain's daemon device is refused for good: no IMEX directory, no CDI spec" {
  local uid tenant=$E2E_NS-tenant cuid
  compute_domain cd-victim
  uid=$(cd_uid cd-victim)
  kubectl create namespace "$tenant" >/dev/null
  # What a user outside the driver namespace could write: a daemon device of the class the
  # driver's own IMEX DaemonSets use, configured for someone else's domain.
  kubectl -n "$tenant" apply -f - >/dev/null <<EOF2
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: stolen-daemon}
spec:
  devices:
    requests:
    - name: daemon
      exactly: {deviceClassName: compute-domain-daemon.nvidia.com}
    config:
    - requests: [daemon]
      opaque:
        driver: compute-domain.nvidia.com
        parameters:
          apiVersion: resource.nvidia.com/v1beta1
          kind: ComputeDomainDaemonConfig
          domainID: $uid
---
apiVersion: v1
kind: Pod
metadata: {name: thief}
spec:
  nodeSelector: {kubernetes.io/hostname: $N3}
  terminationGracePeriodSeconds: 5
  containers:
  - name: ctr
    image: $DRA_WORKLOAD_IMAGE
    imagePullPolicy: Never
    command: [sh, -c, "ls /imexd; $SLEEP"]
    resources:
      claims: [{name: daemon}]
  resourceClaims:
  - name: daemon
    resourceClaimName: stolen-daemon
EOF2
  # The error names the claim, its namespace and the one namespace allowed.
  thief_refused() {
    kubectl -n "$tenant" get events --field-selector involvedObject.name=thief,reason=FailedPrepareDynamicResources \
      -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | grep 'permanent error' |
      grep -F "claim $tenant/stolen-daemon" | grep -qF "driver namespace \"$DRIVER_NS\""
  }
  wait_for 60 "a FailedPrepareDynamicResources event on $tenant/thief naming the driver namespace" thief_refused
  [ "$(kubectl -n "$tenant" get pod thief -o jsonpath='{.status.phase}')" = Pending ]
  cuid=$(kubectl -n "$tenant" get resourceclaim stolen-daemon -o jsonpath='{.metadata.uid}')
  # Nothing was handed out: no CDI spec for the claim, no IMEX directory for the domain.
  [ ! -e "$(node_var 3 CDI_DYNAMIC_DIR)/k8s.compute-domain.nvidia.com-claim_$cuid.json" ]
  [ ! -e "$(node_var 3 KUBELET_DIR)/plugins/compute-domain.nvidia.com/domains/$uid" ]
  kubectl delete namespace "$tenant" --wait=true --timeout=60s >/dev/null
}

@test "two ComputeDomains on the same nodes stay isolated: the second waits for the node, then forms its own domain" {
  local a
  compute_domain cd-a
  compute_domain cd-b
  a=$(cd_uid cd-a)
  cd_workload a1 "$N3" cd-a-channel
  cd_workload a2 "$N4" cd-a-channel
  wait_cd_status cd-a "Ready|$N3,$N4" 180
  # Node 3 belongs to cd-a while a1 runs there: b1 is not started, and cd-b has no node.
  cd_workload b1 "$N3" cd-b-channel
  # The scheduler's answer: node 3's one channel device is held by a1's claim, so b1's cannot be
  # allocated there.
  b1_refused() {
    k get events --field-selector involvedObject.name=b1,reason=FailedScheduling \
      -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | grep -q 'cannot allocate all claims'
  }
  wait_for 60 "a FailedScheduling event on b1 (its claim cannot be allocated)" b1_refused
  [ "$(k get pod b1 -o jsonpath='{.status.phase}')" = Pending ]
  [ -z "$(k get resourceclaim "$(claim_of b1 imex-channel)" -o jsonpath='{.status.allocation}')" ]
  [ "$(cd_status cd-b)" != "Ready|$N3" ]
  [ "$(kubectl get node "$N3" -o jsonpath="{.metadata.labels['resource\.nvidia\.com/computeDomain']}")" = "$a" ]
  # Once a1 is gone, b1 runs in cd-b's own domain; cd-a keeps only node 4.
  k delete pod a1 --wait=true --timeout=60s >/dev/null
  wait_pod_phase b1 Running 180
  wait_cd_status cd-b "Ready|$N3" 60
  wait_cd_status cd-a "Ready|$N4" 60
  run kubectl -n "$DRIVER_NS" get computedomaincliques -l "$CD_LABEL=$a" -o json
  [ "$(jq -r '[.items[].daemons[].nodeName] | join(",")' <<<"$output")" = "$N4" ]
}

@test "force-deleting every daemon pod mid-run: the domain comes back Ready and the workload keeps its channel" {
  local uid
  compute_domain cd-fd
  uid=$(cd_uid cd-fd)
  cd_workload w1 "$N3" cd-fd-channel
  cd_workload w2 "$N4" cd-fd-channel
  wait_cd_status cd-fd "Ready|$N3,$N4" 180
  # Both workloads run before the daemons go (the domain is Ready once both daemons are; a
  # workload's own start may lag it).
  wait_pod_phase w1 Running 60
  wait_pod_phase w2 Running 60
  kubectl -n "$DRIVER_NS" delete pods -l "$CD_LABEL=$uid" --force --grace-period=0 >/dev/null 2>&1
  wait_for 60 "new daemon pods" eval '[[ $(daemon_pods '"$uid"' | wc -l) -eq 2 ]]'
  wait_cd_status cd-fd "Ready|$N3,$N4" 180
  local p
  for p in w1 w2; do
    [ "$(k get pod $p -o jsonpath='{.status.phase}')" = Running ]
    [ "$(k get pod $p -o jsonpath='{.status.containerStatuses[0].restartCount}')" = 0 ]
  done
  [ "$(cd_seen w1)" = "channels=1 channel0" ]
}

@test "nodes in different NVLink cliques form one IMEX domain per clique" {
  local uid
  cd_reprofile "$N4" 8
  compute_domain cd-split
  uid=$(cd_uid cd-split)
  cd_workload w1 "$N3" cd-split-channel
  cd_workload w2 "$N4" cd-split-channel
  wait_cd_status cd-split "Ready|$N3,$N4" 180
  run kubectl -n "$DRIVER_NS" get computedomaincliques -l "$CD_LABEL=$uid" -o json
  [ "$(jq -r '.items | length' <<<"$output")" -eq 2 ]
  # Each clique has one daemon, at index 0 of its own domain.
  [ "$(jq -r '[.items[] | "\(.daemons | length):\(.daemons[0].index)"] | join(",")' <<<"$output")" = "1:0,1:0" ]
  [ "$(k get computedomain cd-split -o json | jq -r '[.status.nodes[].cliqueID] | unique | length')" -eq 2 ]
  # Each daemon's hosts file names only the daemons of its own clique: itself.
  local p
  for p in $(daemon_pods "$uid"); do
    [ "$(kubectl -n "$DRIVER_NS" exec "${p#pod/}" -- grep -c compute-domain-daemon- /etc/hosts)" -eq 1 ]
  done
  k delete pods --all --wait=true --timeout=60s >/dev/null
  cd_reprofile "$N4" 7
}

@test "controller with 2 replicas: kill the leader, the other takes over within the lease and reconciles a new domain" {
  local lease holder old_pod pid t0
  change_driver --set controller.replicas=2 --set controller.leaderElection.enabled=true
  lease=dra-driver-nvidia-gpu-controller
  wait_for 60 "a leader" eval '[[ -n $(kubectl -n "$DRIVER_NS" get lease '"$lease"' -o jsonpath="{.spec.holderIdentity}" 2>/dev/null) ]]'
  holder=$(kubectl -n "$DRIVER_NS" get lease "$lease" -o jsonpath='{.spec.holderIdentity}')
  # The identity is "<pod name>-<random UUID>".
  old_pod=${holder%-????????-????-????-????-????????????}
  kubectl -n "$DRIVER_NS" get pod "$old_pod" >/dev/null
  # SIGKILL from the host: the lease is not released, the standby must wait for it to expire.
  pid=$(for p in $(pgrep -f "(^|/)compute-domain-controller( |\$)"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "POD_NAME=$old_pod" && echo "$p"; done; true)
  [ -n "$pid" ]
  t0=$SECONDS
  kill -9 "$pid"
  wait_for 30 "a new leader" eval '[[ $(kubectl -n "$DRIVER_NS" get lease '"$lease"' -o jsonpath="{.spec.holderIdentity}") != "'"$holder"'" ]]'
  echo "# leader change after SIGKILL: $((SECONDS - t0)) s (lease 15 s); new holder $(kubectl -n "$DRIVER_NS" get lease "$lease" -o jsonpath='{.spec.holderIdentity}')" >&3
  ((SECONDS - t0 <= 20))
  compute_domain cd-ha
  wait_for 30 "the new leader to create cd-ha's workload template" k get resourceclaimtemplate cd-ha-channel
}

@test "four nodes: a ComputeDomain with one workload pod on each becomes Ready with all four" {
  local t0 n5 n6
  cd_nodes_up 5 6
  n5=$(node_var 5 NAME) n6=$(node_var 6 NAME)
  t0=$SECONDS
  compute_domain cd4
  cd_workload w3 "$N3" cd4-channel
  cd_workload w4 "$N4" cd4-channel
  cd_workload w5 "$n5" cd4-channel
  cd_workload w6 "$n6" cd4-channel
  ready_within cd4 "Ready|$(printf '%s\n' "$N3" "$N4" "$n5" "$n6" | sort | paste -sd,)" "$t0"
  for p in w3 w4 w5 w6; do wait_pod_phase "$p" Running 60; done
  run kubectl -n "$DRIVER_NS" get computedomaincliques -l "$CD_LABEL=$(cd_uid cd4)" -o json
  [ "$(jq -r '[.items[].daemons[] | .index] | sort | join(",")' <<<"$output")" = "0,1,2,3" ]
}
