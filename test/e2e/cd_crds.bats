#!/usr/bin/env bats
# The ComputeDomain CRDs the chart installs (deployments/helm/dra-driver-nvidia-gpu/crds/, Helm
# installs them with the release whatever the values say) against the real kube-apiserver: the
# schema refuses what the public API refuses, with the field and what is allowed, fills the
# defaults, and keeps spec immutable. Facts: docs/compute-domains.md. Run through run.sh.

setup_file() {
  load lib
  make_test_namespace cd-crds
}

teardown_file() {
  load lib
  kubectl delete namespace "$E2E_NS" --wait=false >/dev/null 2>&1 || true
}

setup() {
  load lib
}

k() { kubectl -n "$E2E_NS" "$@"; }

# compute_domain <name> [extra YAML lines under spec.channel]
compute_domain() {
  cat <<EOF2
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata: {name: $1}
spec:
  channel:
    resourceClaimTemplate: {name: $1-channel}
${2:+    $2}
EOF2
}

@test "both CRDs are established, v1beta1 served and stored; ComputeDomain has a status subresource" {
  local crd
  for crd in computedomains.resource.nvidia.com computedomaincliques.resource.nvidia.com; do
    kubectl wait --for=condition=Established "crd/$crd" --timeout=30s >/dev/null
    [ "$(kubectl get crd "$crd" -o jsonpath='{.spec.versions[*].name}')" = v1beta1 ]
    [ "$(kubectl get crd "$crd" -o jsonpath='{.spec.scope}')" = Namespaced ]
  done
  [ "$(kubectl get crd computedomains.resource.nvidia.com -o json | jq -c '.spec.versions[0].subresources')" = '{"status":{}}' ]
  [ "$(kubectl get crd computedomaincliques.resource.nvidia.com -o json | jq -c '.spec.versions[0].subresources // {}')" = '{}' ]
}

@test "a ComputeDomain gets its defaults: allocationMode Single, numNodes 0" {
  compute_domain cd1 | k apply -f - >/dev/null
  [ "$(k get computedomain cd1 -o jsonpath='{.spec.channel.allocationMode}')" = Single ]
  [ "$(k get computedomain cd1 -o jsonpath='{.spec.numNodes}')" = 0 ]
}

@test "bad ComputeDomains are refused with the field and what is allowed" {
  run k apply -f - <<<"apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata: {name: no-channel}
spec: {numNodes: 1}"
  [ "$status" -ne 0 ]
  [[ $output == *'spec.channel: Required value'* ]] || { echo "$output"; false; }
  run k apply -f - <<<"$(compute_domain bad-mode 'allocationMode: Many')"
  [ "$status" -ne 0 ]
  [[ $output == *'spec.channel.allocationMode: Unsupported value: "Many"'*'"All", "Single"'* ]] || { echo "$output"; false; }
  run k apply -f - <<<"apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata: {name: negative}
spec: {numNodes: -1, channel: {resourceClaimTemplate: {name: x}}}"
  [ "$status" -ne 0 ]
  [[ $output == *'spec.numNodes'*'should be greater than or equal to 0'* ]] || { echo "$output"; false; }
  [ -z "$(k get computedomains -o name | grep -v '/cd1$' || true)" ]
}

@test "a ComputeDomain's spec is immutable; its status is written through the subresource" {
  compute_domain cd2 | k apply -f - >/dev/null
  run k patch computedomain cd2 --type merge -p '{"spec": {"numNodes": 3}}'
  [ "$status" -ne 0 ]
  [[ $output == *'A computeDomain.spec is immutable'* ]] || { echo "$output"; false; }
  # The controller of the installed release owns status.nodes: it rewrites them from the daemons it
  # finds (none here) whenever cd2 changes, so what the API server stored is read from the patch's
  # own response, not from a later GET that the controller may have overtaken.
  local patch='{"status": {"status": "NotReady", "nodes": [{"name": "n1", "ipAddress": "10.244.1.9", "cliqueID": "c.1", "index": 0}]}}'
  stored=$(k patch computedomain cd2 --subresource status --type merge -p "$patch" \
    -o jsonpath='{.status.nodes[0].status}/{.status.nodes[0].index}')
  [ "$stored" = NotReady/0 ] || { echo "stored: $stored"; false; }
  # The printer columns (which the public CRD lacks), as the API server renders the table. The
  # controller rewrites the status within milliseconds of the patch (numNodes 0: Ready, no nodes),
  # so it is stopped while the row is read, and running again before the row is judged.
  local ns=${DRA_HELM_NAMESPACE:-nvidia-dra-driver-gpu} ctrl=deploy/dra-driver-nvidia-gpu-controller
  local pods row replicas
  replicas=$(kubectl -n "$ns" get "$ctrl" -o jsonpath='{.spec.replicas}')
  pods=$(kubectl -n "$ns" get pods -l dra-driver-nvidia-gpu-component=controller -o name)
  kubectl -n "$ns" scale "$ctrl" --replicas=0 >/dev/null
  # shellcheck disable=SC2086 # one argument per pod name
  [ -z "$pods" ] || kubectl -n "$ns" wait --for=delete $pods --timeout=90s >/dev/null
  k patch computedomain cd2 --subresource status --type merge -p "$patch" >/dev/null
  row=$(k get computedomain cd2 --no-headers)
  kubectl -n "$ns" scale "$ctrl" --replicas="$replicas" >/dev/null
  kubectl -n "$ns" rollout status "$ctrl" --timeout=120s >/dev/null
  [[ $row =~ ^cd2\ +NotReady\ +n1\ + ]] || { echo "row: $row"; false; }
}

@test "a ComputeDomainClique lists each node's daemon once" {
  run k apply -f - <<<"apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomainClique
metadata: {name: uid.clique}
daemons:
- {nodeName: n1, ipAddress: 10.244.1.9, cliqueID: c.1, index: 0}
- {nodeName: n1, ipAddress: 10.244.1.10, cliqueID: c.1, index: 1}"
  [ "$status" -ne 0 ]
  [[ $output == *'daemons[1]: Duplicate value'* ]] || { echo "$output"; false; }
  k apply -f - >/dev/null <<<"apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomainClique
metadata: {name: uid.clique}
daemons:
- {nodeName: n1, ipAddress: 10.244.1.9, cliqueID: c.1, index: 0}"
  [ "$(k get computedomainclique uid.clique -o jsonpath='{.daemons[0].status}')" = NotReady ]
  [[ $(k get computedomainclique uid.clique --no-headers) =~ ^uid.clique\ +n1\ + ]] || { k get computedomainclique uid.clique; false; }
}
