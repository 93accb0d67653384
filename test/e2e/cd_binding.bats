#!/usr/bin/env bats
# ComputeDomain workloads with device binding conditions (KEP-5007; docs/compute-domains.md
# "Binding conditions"), through the Helm-installed driver on GB200 nodes 3 and 4 (cd_lib.bash):
# the plugins publish channel-0 with the binding condition IMEXDaemonReady, the kube-scheduler
# holds each workload pod in PreBind, the controller labels the allocated node, waits for the
# domain's IMEX daemon there and reports it on the claim, and only then is the pod bound; its
# prepare succeeds at its first call. With resources.computeDomains.bindingConditions=false the
# pods are bound at once and their prepare waits for the daemon (the path without the feature).
# Each test prints create-to-Running and the failed prepares for docs/performance.md.

setup_file() {
  load lib
  load gpu_lib
  load cd_lib
  make_test_namespace cdbind
  cd_nodes_up 3 4
  N3=$(node_var 3 NAME) N4=$(node_var 4 NAME)
  export N3 N4
}

teardown_file() {
  load lib
  load gpu_lib
  load cd_lib
  kubectl delete namespace "$E2E_NS" "$E2E_NS-other" --ignore-not-found --wait=true --timeout=90s >/dev/null 2>&1 || true
  restore_driver
  cd_nodes_down
}

setup() {
  load lib
  load gpu_lib
  load cd_lib
}

teardown() {
  kubectl delete namespace "$E2E_NS-other" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
  k delete pods --all --wait=true --timeout=60s >/dev/null 2>&1 || true
  k delete computedomains --all --wait=true --timeout=60s >/dev/null 2>&1 || true
}

# The compute-domain plugin's failed claim prepares on node <name> (its metrics, port 8081).
cd_prepare_errors() {
  local ip
  ip=$(kubectl -n "$DRIVER_NS" get pod "$(plugin_pod "$1")" -o jsonpath='{.status.podIP}')
  curl -sf "http://$ip:8081/metrics" |
    awk '/^nvidia_dra_node_prepare_errors_total/ {s += $NF} END {print s + 0}'
}
# The bindingConditions of channel-0 in node <name>'s slice ("" when none).
channel_binding_conditions() {
  kubectl get resourceslices -o json | jq -r --arg n "$1" --arg d "$CD_DRIVER" \
    '[.items[] | select(.spec.nodeName == $n and .spec.driver == $d) | .spec.devices[] |
      select(.name == "channel-0") | (.bindingConditions // [])[]] | join(",")'
}
# The claim of pod <pod> (its one resource claim).
pod_claim() { k get pod "$1" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}'; }
# FailedPrepareDynamicResources events of pod <pod>.
failed_prepare_events() {
  k get events --field-selector "involvedObject.name=$1,reason=FailedPrepareDynamicResources" -o json |
    jq '[.items[] | .count // 1] | add // 0'
}
# Seconds from the pod's creation to its Ready condition (Running and ready, as kubectl shows
# it; the API's second resolution), and to its scheduling (bound to the node).
create_to_running() {
  k get pod "$1" -o json | jq -r '
    (.metadata.creationTimestamp | fromdateiso8601) as $c |
    [.status.conditions[] | select(.type == "PodScheduled" or .type == "Ready") |
      "\(.type) \((.lastTransitionTime | fromdateiso8601) - $c)"] | join(", ")'
}

# run_workloads <domain>: one workload pod per node (w3 on node 3, w4 on node 4) of a new domain;
# waits until both run and see channel0; prints the numbers.
run_workloads() {
  compute_domain "$1"
  cd_workload w3 "$N3" "$1-channel"
  cd_workload w4 "$N4" "$1-channel"
  wait_pod_phase w3 Running 180
  wait_pod_phase w4 Running 180
  wait_for 20 "w3's output" eval '[[ -n $(cd_seen w3) ]]'
  wait_for 20 "w4's output" eval '[[ -n $(cd_seen w4) ]]'
  [ "$(cd_seen w3)" = "channels=1 channel0" ]
  [ "$(cd_seen w4)" = "channels=1 channel0" ]
  echo "# $1: seconds after create: w3 $(create_to_running w3); w4 $(create_to_running w4);" \
    "FailedPrepareDynamicResources events w3 $(failed_prepare_events w3), w4 $(failed_prepare_events w4)" >&3
}

@test "binding conditions: the pods bind once their node's IMEX daemon is Ready, and no prepare fails" {
  [ "$(channel_binding_conditions "$N3")" = "IMEXDaemonReady" ]
  [ "$(channel_binding_conditions "$N4")" = "IMEXDaemonReady" ]
  local e3 e4
  e3=$(cd_prepare_errors "$N3")
  e4=$(cd_prepare_errors "$N4")
  run_workloads cdb
  local w claim
  for w in w3 w4; do
    claim=$(pod_claim "$w")
    run k get resourceclaim "$claim" -o json
    [ "$status" -eq 0 ]
    # The scheduler copied the conditions into the allocation, and the controller reported the
    # daemon Ready on the device's status entry.
    [ "$(jq -r '.status.allocation.devices.results[0].bindingConditions | join(",")' <<<"$output")" = "IMEXDaemonReady" ]
    [ "$(jq -r '.status.devices[] | select(.driver == "compute-domain.nvidia.com") | .conditions[] |
        select(.type == "IMEXDaemonReady") | .status' <<<"$output")" = "True" ]
    # The scheduler waited for it (its PreBind event), and the kubelet's prepare never failed.
    run k get events --field-selector "involvedObject.name=$w,reason=BindingConditionsPending" -o name
    [ -n "$output" ]
    [ "$(failed_prepare_events "$w")" -eq 0 ] || {
      k get events --field-selector "involvedObject.name=$w" -o json |
        jq -r '.items[] | "\(.firstTimestamp) \(.reason) x\(.count // 1): \(.message)"' >&2
      return 1
    }
  done
  echo "# cdb: failed prepares (plugin metric) node 3 $(($(cd_prepare_errors "$N3") - e3)), node 4 $(($(cd_prepare_errors "$N4") - e4))" >&3
  [ "$(cd_prepare_errors "$N3")" -eq "$e3" ]
  [ "$(cd_prepare_errors "$N4")" -eq "$e4" ]
}

@test "binding conditions: a claim whose domain is in another namespace gets the failure condition with its reason, and its pod is not bound" {
  compute_domain cdo
  local uid other=$E2E_NS-other
  uid=$(cd_uid cdo)
  kubectl create namespace "$other" >/dev/null
  # A template of the other namespace naming this domain: its IMEX daemon can never serve there.
  kubectl -n "$other" apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: stolen}
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
          parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: ComputeDomainChannelConfig, domainID: "$uid", allocationMode: Single}
EOF
  E2E_NS=$other cd_workload thief "$N3" stolen
  # The scheduler reads the failure condition, deallocates and tries again; the pod stays unbound.
  failed_binding() {
    kubectl -n "$other" get events --field-selector involvedObject.name=thief -o json |
      jq -e '[.items[] | select(.message | test("ComputeDomainInOtherNamespace"))] | length > 0' >/dev/null
  }
  wait_for 90 "a scheduling event of $other/thief naming ComputeDomainInOtherNamespace" failed_binding || {
    kubectl -n "$other" get events >&2; kubectl -n "$other" get resourceclaims -o yaml >&2; return 1
  }
  [ -z "$(kubectl -n "$other" get pod thief -o jsonpath='{.spec.nodeName}')" ]
  # Nothing ran there: no node label left for the domain, no daemon pod.
  wait_for 30 "the node label of $uid to go" eval '[[ -z $(kubectl get nodes -l "$CD_LABEL=$uid" -o name) ]]'
  [ -z "$(daemon_pods "$uid")" ]
}

@test "without binding conditions (bindingConditions=false): the pods are bound at once, their prepare waits for the daemon, and they run" {
  change_driver --set resources.computeDomains.bindingConditions=false
  wait_for 120 "channel-0 of $N3 and $N4 without binding conditions" eval \
    '[[ -z $(channel_binding_conditions "$N3")$(channel_binding_conditions "$N4") ]]'
  wait_cd_plugin_ready "$N3"
  wait_cd_plugin_ready "$N4"
  local e3 e4
  e3=$(cd_prepare_errors "$N3")
  e4=$(cd_prepare_errors "$N4")
  run_workloads cdn
  local w claim
  for w in w3 w4; do
    claim=$(pod_claim "$w")
    run k get resourceclaim "$claim" -o json
    [ "$(jq -r '.status.allocation.devices.results[0].bindingConditions // [] | length' <<<"$output")" -eq 0 ]
    [ "$(jq -r '[.status.devices[]? | select(.driver == "compute-domain.nvidia.com")] | length' <<<"$output")" -eq 0 ]
  done
  echo "# cdn: failed prepares (plugin metric) node 3 $(($(cd_prepare_errors "$N3") - e3)), node 4 $(($(cd_prepare_errors "$N4") - e4))" >&3
}
