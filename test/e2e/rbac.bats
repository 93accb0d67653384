#!/usr/bin/env bats
# Least privilege of the chart's service accounts (docs/helm.md, "RBAC"), checked with each
# account's own identity: a token of the account bound to one of its pods (sa_kubeconfig), so the
# API server sees the pod's name and node as it does for the pod's own token. Every write is a
# server-side dry run (authorization and admission run, nothing is stored), and every denial is
# paired with the same request allowed for the right node, object or shape, so that a broken setup
# (a token that authenticates as nobody, a policy that refuses everything) cannot pass.
#
# Covered: the kubelet plugins' ResourceSlice, Node and ResourceClaim status writes, the
# ComputeDomain controller's and the uninstall cleanup Job's Node writes, the controller's
# namespaced pod read, and the IMEX daemon's pod patch.
# The MPS Deployment policy is checked in gpu_mps.bats, where the MPSSupport gate is on.

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace rbac
}

teardown_file() {
  load lib
  load gpu_lib
  kubectl label node "$GPU_NODE" resource.nvidia.com/computeDomain- >/dev/null 2>&1 || true
  kubectl delete clusterrolebinding rbac-e2e-uninstall-cleanup --ignore-not-found >/dev/null 2>&1 || true
  kubectl -n "$DRIVER_NS" delete serviceaccount dra-driver-nvidia-gpu-uninstall-cleanup --ignore-not-found >/dev/null 2>&1 || true
  kubectl -n "$DRIVER_NS" delete pod rbac-e2e-daemon-a rbac-e2e-daemon-b --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kubectl delete namespace "$E2E_NS" --wait=false >/dev/null 2>&1 || true
}

setup() {
  load lib
  load gpu_lib
  [[ -n $MIG_NODE ]] || skip "needs two nodes"
}

# as <kubeconfig> <kubectl args...>
as() { local kc=$1; shift; "$K8S_BIN_DIR/kubectl" --kubeconfig "$kc" --request-timeout=20s "$@"; }
# The kubelet plugin's identity on node <name>.
plugin_kc() {
  local pod
  pod=$(plugin_pod "$1")
  sa_kubeconfig "$DRIVER_NS" "$(kubectl -n "$DRIVER_NS" get pod "$pod" -o jsonpath='{.spec.serviceAccountName}')" "$pod"
}
# allowed <what> <command...>: the command succeeds.
allowed() {
  local what=$1 out; shift
  out=$("$@" 2>&1) || { echo "refused, want allowed: $what: $out"; return 1; }
}
# denied <what> <text in the refusal> <command...>: the command fails, naming <text>.
denied() {
  local what=$1 want=$2 out; shift 2
  if out=$("$@" 2>&1); then echo "allowed, want refused: $what: $out"; return 1; fi
  [[ $out == *"$want"* ]] || { echo "refused, but without '$want': $what: $out"; return 1; }
  echo "# denied: $what" >&3
}

# api_patch <kubeconfig> <content type> <path?query> <body>: one PATCH with the kubeconfig's token,
# as a dry run, as the driver's code sends it (kubectl label and patch GET the object first, which
# these accounts may not: their code paths only patch). Prints the API server's answer; succeeds
# on a 2xx status.
api_patch() {
  local kc=$1 type=$2 path=$3 body=$4 token out code
  token=$(sed -nE 's/^ *user: \{token: "([^"]+)"\}$/\1/p' "$kc")
  [[ -n $token ]] || { echo "no token in $kc"; return 1; }
  [[ $path == *\?* ]] && path+="&dryRun=All" || path+="?dryRun=All"
  out=$(curl -sS --max-time 20 --cacert "$PKI_DIR/ca.crt" -H "Authorization: Bearer $token" \
    -H "Content-Type: $type" -X PATCH --data-binary "$body" -w '\n%{http_code}' \
    "https://127.0.0.1:$APISERVER_PORT$path") || { echo "$out"; return 1; }
  code=${out##*$'\n'}
  echo "$code ${out%$'\n'*}"
  [[ $code == 2* ]]
}

# slice <name> <node or ""> <driver>: a ResourceSlice as JSON (no node: allNodes).
slice() {
  jq -cn --arg name "$1" --arg node "$2" --arg driver "$3" '{apiVersion: "resource.k8s.io/v1", kind: "ResourceSlice",
    metadata: {name: $name},
    spec: ({driver: $driver, devices: [], pool: {name: $name, generation: 1, resourceSliceCount: 1}} +
           (if $node == "" then {allNodes: true} else {nodeName: $node} end))}'
}

@test "kubelet plugin: ResourceSlices only of its own node and of the two driver names" {
  local kc own other
  kc=$(plugin_kc "$GPU_NODE")
  for d in gpu.nvidia.com compute-domain.nvidia.com; do
    allowed "create a $d slice of $GPU_NODE" as "$kc" create --dry-run=server -f - <<<"$(slice rbac-e2e "$GPU_NODE" "$d")"
  done
  denied "create a slice of another node" "may only write ResourceSlices with spec.nodeName $GPU_NODE" \
    as "$kc" create --dry-run=server -f - <<<"$(slice rbac-e2e "$MIG_NODE" gpu.nvidia.com)"
  denied "create an allNodes slice" "may only write ResourceSlices with spec.nodeName $GPU_NODE" \
    as "$kc" create --dry-run=server -f - <<<"$(slice rbac-e2e "" gpu.nvidia.com)"
  denied "create a slice of another driver" "may only write ResourceSlices of the drivers" \
    as "$kc" create --dry-run=server -f - <<<"$(slice rbac-e2e "$GPU_NODE" vap-e2e.example.com)"
  # Update and delete: the plugin's own published slice, and the other node's.
  own=$(kubectl get resourceslices --field-selector "spec.nodeName=$GPU_NODE,spec.driver=gpu.nvidia.com" -o jsonpath='{.items[0].metadata.name}')
  other=$(kubectl get resourceslices --field-selector "spec.nodeName=$MIG_NODE,spec.driver=gpu.nvidia.com" -o jsonpath='{.items[0].metadata.name}')
  [[ -n $own && -n $other ]] || { kubectl get resourceslices; false; }
  allowed "update its own slice" sh -c "'$K8S_BIN_DIR/kubectl' get resourceslice $own -o json | '$K8S_BIN_DIR/kubectl' --kubeconfig '$kc' replace --dry-run=server -f -"
  denied "update another node's slice" "may only write ResourceSlices with spec.nodeName $GPU_NODE" \
    sh -c "'$K8S_BIN_DIR/kubectl' get resourceslice $other -o json | '$K8S_BIN_DIR/kubectl' --kubeconfig '$kc' replace --dry-run=server -f -"
  allowed "delete its own slice" as "$kc" delete resourceslice "$own" --dry-run=server
  denied "delete another node's slice" "may only write ResourceSlices with spec.nodeName $GPU_NODE" \
    as "$kc" delete resourceslice "$other" --dry-run=server
  # Reads: its node, not the node list; no pod read outside MPS.
  allowed "get its node" as "$kc" get node "$GPU_NODE"
  denied "list nodes" "forbidden" as "$kc" get nodes
  denied "list pods" "forbidden" as "$kc" get pods -n default
}

# node_json_with <node> <jq filter>: the node as stored, changed by the filter.
node_json_with() { kubectl get node "$1" -o json | jq -c "$2"; }

@test "kubelet plugin: only its own Node, and only the ComputeDomain and GPU clique labels" {
  local kc label=resource.nvidia.com/computeDomain
  kc=$(plugin_kc "$GPU_NODE")
  # What domain_api.cc does: a read and an update of the whole node with the label set (and one
  # without it), and a merge patch of nvidia.com/gpu.clique (gpuCliqueLabelEnabled).
  allowed "set $label on its node (update)" as "$kc" replace --dry-run=server -f - \
    <<<"$(node_json_with "$GPU_NODE" ".metadata.labels[\"$label\"] = \"rbac-e2e\"")"
  allowed "remove $label from its node (update)" as "$kc" replace --dry-run=server -f - \
    <<<"$(node_json_with "$GPU_NODE" "del(.metadata.labels[\"$label\"])")"
  allowed "set nvidia.com/gpu.clique on its node (patch)" as "$kc" label node "$GPU_NODE" --overwrite nvidia.com/gpu.clique=rbac-e2e --dry-run=server
  denied "set $label on another node" "may not change node $MIG_NODE" as "$kc" replace --dry-run=server -f - \
    <<<"$(node_json_with "$MIG_NODE" ".metadata.labels[\"$label\"] = \"rbac-e2e\"")"
  denied "set another label on its node" "may change no Node label but" as "$kc" replace --dry-run=server -f - \
    <<<"$(node_json_with "$GPU_NODE" '.metadata.labels["rbac-e2e/other"] = "x"')"
  denied "change the label nvidia.com/gpu.present" "may change no Node label but" \
    as "$kc" label node "$GPU_NODE" --overwrite nvidia.com/gpu.present=false --dry-run=server
  denied "taint its node" "may not change a Node's spec" as "$kc" replace --dry-run=server -f - \
    <<<"$(node_json_with "$GPU_NODE" '.spec.taints = ((.spec.taints // []) + [{key: "rbac-e2e", effect: "NoSchedule"}])')"
  denied "annotate its node" "may not change a Node's annotations" as "$kc" replace --dry-run=server -f - \
    <<<"$(node_json_with "$GPU_NODE" '.metadata.annotations["rbac-e2e"] = "x"')"
}

# Whether the release runs with resources.computeDomains.bindingConditions (the controller's
# ClusterRole then reads ResourceClaims).
binding_conditions_on() {
  kubectl get clusterrole dra-driver-nvidia-gpu-clusterrole-controller -o json 2>/dev/null |
    jq -e '[.rules[] | select(.resources | index("resourceclaims"))] | length > 0' >/dev/null
}

@test "ComputeDomain controller: only removes the ComputeDomain node label (sets it where none is, with binding conditions); reads pods only in its namespace" {
  local kc pod label=resource.nvidia.com/computeDomain
  pod=$(kubectl -n "$DRIVER_NS" get pods -l dra-driver-nvidia-gpu-component=controller -o jsonpath='{.items[0].metadata.name}')
  [[ -n $pod ]] || skip "no ComputeDomain controller (resources.computeDomains.enabled=false)"
  kc=$(sa_kubeconfig "$DRIVER_NS" "$(kubectl -n "$DRIVER_NS" get pod "$pod" -o jsonpath='{.spec.serviceAccountName}')" "$pod")
  # A stale label as the controller finds it (an unknown domain's; no domain event runs here, so
  # the controller's own cleanup leaves it until teardown_file).
  kubectl label node "$GPU_NODE" --overwrite "$label=rbac-e2e-stale" >/dev/null
  allowed "remove $label (update, what cleanup.cc does)" as "$kc" replace --dry-run=server -f - \
    <<<"$(node_json_with "$GPU_NODE" "del(.metadata.labels[\"$label\"])")"
  denied "change $label" "the ComputeDomain controller may only" as "$kc" replace --dry-run=server -f - \
    <<<"$(node_json_with "$GPU_NODE" ".metadata.labels[\"$label\"] = \"other\"")"
  if binding_conditions_on; then
    # binding_sync.cc labels the node a waiting claim was allocated on (docs/compute-domains.md
    # "Binding conditions").
    allowed "set $label on a node without it (binding conditions)" as "$kc" replace --dry-run=server -f - \
      <<<"$(node_json_with "$MIG_NODE" ".metadata.labels[\"$label\"] = \"rbac-e2e\"")"
  else
    denied "set $label on a node without it" "may only remove the Node label" as "$kc" replace --dry-run=server -f - \
      <<<"$(node_json_with "$MIG_NODE" ".metadata.labels[\"$label\"] = \"rbac-e2e\"")"
  fi
  denied "remove another label" "may change no Node label but" as "$kc" replace --dry-run=server -f - \
    <<<"$(node_json_with "$GPU_NODE" "del(.metadata.labels[\"$label\"]) | del(.metadata.labels[\"nvidia.com/gpu.present\"])")"
  denied "taint a node" "may not change a Node's spec" as "$kc" replace --dry-run=server -f - \
    <<<"$(node_json_with "$GPU_NODE" 'del(.metadata.labels["resource.nvidia.com/computeDomain"]) | .spec.unschedulable = true')"
  kubectl label node "$GPU_NODE" "$label-" >/dev/null
  # Pods: its namespace's daemon pods only.
  allowed "list pods in $DRIVER_NS" as "$kc" -n "$DRIVER_NS" get pods
  denied "list pods in default" "forbidden" as "$kc" -n default get pods
  denied "list pods cluster-wide" "forbidden" as "$kc" get pods -A
  denied "patch a pod" "forbidden" as "$kc" -n "$DRIVER_NS" label pod "$pod" rbac-e2e=x --dry-run=server
}

@test "uninstall cleanup Job's account: the node policy holds it to removing the ComputeDomain label" {
  local kc sa=dra-driver-nvidia-gpu-uninstall-cleanup label=resource.nvidia.com/computeDomain
  kubectl get clusterrole dra-driver-nvidia-gpu-clusterrole-controller >/dev/null 2>&1 ||
    skip "no ComputeDomain controller (resources.computeDomains.enabled=false)"
  # The Job's account exists only while `helm uninstall` runs its pre-delete hook: a stand-in of
  # that name, with the controller's node rights (the Job's ClusterRole has list and update of
  # nodes), is what the policy sees then.
  kubectl -n "$DRIVER_NS" create serviceaccount "$sa" >/dev/null
  kubectl create clusterrolebinding rbac-e2e-uninstall-cleanup --serviceaccount="$DRIVER_NS:$sa" \
    --clusterrole=dra-driver-nvidia-gpu-clusterrole-controller >/dev/null
  kc=$(mktemp "$BATS_TEST_TMPDIR/kubeconfig-hook-XXXX")
  sed "s|token: \"[^\"]*\"|token: \"$(kubectl -n "$DRIVER_NS" create token "$sa" --duration 10m)\"|" \
    "$(plugin_kc "$GPU_NODE")" >"$kc"
  kubectl label node "$GPU_NODE" --overwrite "$label=rbac-e2e-stale" >/dev/null
  allowed "remove $label" as "$kc" replace --dry-run=server -f - \
    <<<"$(node_json_with "$GPU_NODE" "del(.metadata.labels[\"$label\"])")"
  denied "change $label" "the ComputeDomain controller may only" as "$kc" replace --dry-run=server -f - \
    <<<"$(node_json_with "$GPU_NODE" ".metadata.labels[\"$label\"] = \"other\"")"
  # The controller's setting of a missing label (binding conditions) is its own account's only.
  denied "set $label on a node without it" "the ComputeDomain controller may only" as "$kc" replace --dry-run=server -f - \
    <<<"$(node_json_with "$MIG_NODE" ".metadata.labels[\"$label\"] = \"rbac-e2e\"")"
  denied "remove another label" "may change no Node label but" as "$kc" replace --dry-run=server -f - \
    <<<"$(node_json_with "$GPU_NODE" "del(.metadata.labels[\"$label\"]) | del(.metadata.labels[\"nvidia.com/gpu.present\"])")"
  kubectl label node "$GPU_NODE" "$label-" >/dev/null
  kubectl delete clusterrolebinding rbac-e2e-uninstall-cleanup >/dev/null
  kubectl -n "$DRIVER_NS" delete serviceaccount "$sa" >/dev/null
}

# A pod of the IMEX daemons' service account that never runs (no node matches), for its token.
daemon_standin() {
  kubectl -n "$DRIVER_NS" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, labels: {app: rbac-e2e}}
spec:
  serviceAccountName: compute-domain-daemon-service-account
  nodeSelector: {rbac-e2e/no-such-node: "true"}
  containers:
  - {name: ctr, image: ${DRA_WORKLOAD_IMAGE:-$WORKLOAD_IMAGE}, imagePullPolicy: Never, command: [sleep, "1"]}
EOF
}

@test "IMEX daemon: patches only its own pod, and only the clique label" {
  local kc label=resource.nvidia.com/computeDomain.cliqueID pods="/api/v1/namespaces/$DRIVER_NS/pods"
  local merge=application/merge-patch+json
  kubectl -n "$DRIVER_NS" get serviceaccount compute-domain-daemon-service-account >/dev/null 2>&1 ||
    skip "no IMEX daemon service account (computeDomains off or hostManaged)"
  daemon_standin rbac-e2e-daemon-a
  daemon_standin rbac-e2e-daemon-b
  kc=$(sa_kubeconfig "$DRIVER_NS" compute-domain-daemon-service-account rbac-e2e-daemon-a)
  # What daemon.cc sends: a merge patch of the clique label on its own pod.
  allowed "label its own pod with $label" \
    api_patch "$kc" "$merge" "$pods/rbac-e2e-daemon-a" "{\"metadata\": {\"labels\": {\"$label\": \"rbac-e2e\"}}}"
  denied "label another pod" "may only change its own pod" \
    api_patch "$kc" "$merge" "$pods/rbac-e2e-daemon-b" "{\"metadata\": {\"labels\": {\"$label\": \"rbac-e2e\"}}}"
  denied "set another label on its pod" "may change no pod label but" \
    api_patch "$kc" "$merge" "$pods/rbac-e2e-daemon-a" '{"metadata": {"labels": {"app": "other"}}}'
  denied "annotate its pod" "may not change its pod's annotations" \
    api_patch "$kc" "$merge" "$pods/rbac-e2e-daemon-a" '{"metadata": {"annotations": {"rbac-e2e": "x"}}}'
  denied "change its pod's image" "may not change its pod's spec" \
    api_patch "$kc" application/json-patch+json "$pods/rbac-e2e-daemon-a" \
    '[{"op": "replace", "path": "/spec/containers/0/image", "value": "registry.example/other:v1"}]'
  # Reads: its namespace's cliques (the informer); no pods (the controller reads their readiness),
  # nothing cluster-wide.
  allowed "list cliques in $DRIVER_NS" as "$kc" -n "$DRIVER_NS" get computedomaincliques.resource.nvidia.com
  denied "list pods in $DRIVER_NS" "forbidden" as "$kc" -n "$DRIVER_NS" get pods
  denied "read its own pod" "forbidden" as "$kc" -n "$DRIVER_NS" get pod rbac-e2e-daemon-a
  denied "list pods in default" "forbidden" as "$kc" -n default get pods
  denied "write a clique" "forbidden" as "$kc" -n "$DRIVER_NS" create --dry-run=server -f - <<<'{"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainClique", "metadata": {"name": "rbac-e2e"}}'
}

@test "kubelet plugin: ResourceClaim status only for gpu.nvidia.com devices of its node's claims (API server, >= 1.36)" {
  local claim kc other body extra path apply=application/apply-patch+yaml
  claim_template single-gpu
  pod pod1 "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase pod1 Running 60
  claim=$(claim_of pod1 gpu)
  wait_for 30 "device status of $claim" eval '[[ $(k get resourceclaim '"$claim"' -o jsonpath="{.status.devices[0].driver}") == gpu.nvidia.com ]]'
  kc=$(plugin_kc "$GPU_NODE")
  other=$(plugin_kc "$MIG_NODE")
  path="/apis/resource.k8s.io/v1/namespaces/$E2E_NS/resourceclaims/$claim/status?fieldManager=gpu.nvidia.com%2F$GPU_NODE&force=true"
  # What device_status.cc sends: a server-side apply of the claim's status.devices (its uid as a
  # precondition), here with the device's data changed.
  body=$(k get resourceclaim "$claim" -o json | jq -c '{apiVersion, kind, metadata: {name: .metadata.name, namespace: .metadata.namespace, uid: .metadata.uid},
    status: {devices: [.status.devices[] | .data = {"rbac-e2e": true}]}}')
  allowed "apply gpu.nvidia.com status.devices of a claim on its node" api_patch "$kc" "$apply" "$path" "$body"
  denied "apply status.devices of a claim on another node" 'resourceclaims/driver' api_patch "$other" "$apply" "$path" "$body"
  extra=$(jq -c '.status.devices += [.status.devices[0] | .driver = "compute-domain.nvidia.com" | del(.data, .conditions)]' <<<"$body")
  denied "add a compute-domain.nvidia.com status.devices entry" 'resourceclaims/driver' api_patch "$kc" "$apply" "$path" "$extra"
  if binding_conditions_on; then
    # The controller writes compute-domain.nvidia.com entries only (binding_sync.cc).
    local ctl
    ctl=$(kubectl -n "$DRIVER_NS" get pods -l dra-driver-nvidia-gpu-component=controller -o jsonpath='{.items[0].metadata.name}')
    ctl=$(sa_kubeconfig "$DRIVER_NS" "$(kubectl -n "$DRIVER_NS" get pod "$ctl" -o jsonpath='{.spec.serviceAccountName}')" "$ctl")
    denied "ComputeDomain controller: apply gpu.nvidia.com status.devices" 'resourceclaims/driver' api_patch "$ctl" "$apply" \
      "/apis/resource.k8s.io/v1/namespaces/$E2E_NS/resourceclaims/$claim/status?fieldManager=compute-domain-controller%2Fbinding-conditions&force=true" "$body"
  fi
  denied "change reservedFor" 'resourceclaims/binding' \
    api_patch "$kc" application/merge-patch+json "/apis/resource.k8s.io/v1/namespaces/$E2E_NS/resourceclaims/$claim/status" '{"status": {"reservedFor": null}}'
  denied "change a claim's metadata" "forbidden" \
    api_patch "$kc" application/merge-patch+json "/apis/resource.k8s.io/v1/namespaces/$E2E_NS/resourceclaims/$claim" '{"metadata": {"labels": {"rbac-e2e": "x"}}}'
  k delete pod pod1 --wait=false >/dev/null
}
