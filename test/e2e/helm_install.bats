#!/usr/bin/env bats
# The driver installed the way operators install it: `helm install` of
# deployments/helm/dra-driver-nvidia-gpu with the locally built image
# (hack/cluster/driver-image.sh), instead of the host processes of gpu-plugin.sh. The kubelet
# plugin runs as a DaemonSet pod on every node, registers with the real kubelet, publishes
# ResourceSlices and prepares a claim; `helm uninstall` leaves nothing of it behind. The node
# preparation, the install and the cleanup are hack/cluster/helm-driver.sh, which hack/demo.sh
# runs too; values: hack/cluster/helm-values.yaml (docs/helm.md). The install stops the
# host-process plugins first; teardown_file starts them again with the arguments run.sh uses
# ($DRA_E2E_GPU_PLUGIN_UP), so the other scenario files are unaffected; run.sh runs it last.
#
# helm-driver.sh prepare-nodes makes each node's mock driver root (profile h100-8x) under its
# state folder and bind-mounts it at /run/nvidia/driver inside that node's mount namespace only:
# one nvidiaDriverRoot for the whole DaemonSet, different GPUs per node. The nodes get the label
# nvidia.com/gpu.present=true, one of those the chart's node affinity accepts (what GPU feature
# discovery sets on a real node).

RELEASE=dra-e2e
HELM_NS=dra-driver-e2e

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace helm
}

teardown_file() {
  load lib
  load gpu_lib
  helm_cleanup
  kubectl delete namespace "$E2E_NS" --wait=false >/dev/null 2>&1 || true
}

setup() {
  load lib
  load gpu_lib
}

helm() { "$HELM_BIN_DIR/helm" --kubeconfig "$KUBECONFIG_PATH" "$@"; }
nodes() { printf '%s\n' $DRA_NODES; }
node_count() { nodes | grep -c .; }
helm_driver() { "$REPO_ROOT/hack/cluster/helm-driver.sh" "$@"; }
plugin_pods() { kubectl -n "$HELM_NS" get pods -l dra-driver-nvidia-gpu-component=kubelet-plugin "$@"; }

# Undoes everything the tests may have done, in reverse, then starts the host plugins again.
# helm-driver.sh uninstall also deletes the namespace and the uninstalled driver's slices (the
# kubelet removes them 30 s after it unregisters).
helm_cleanup() {
  helm_driver uninstall --release "$RELEASE" --namespace "$HELM_NS" >&3 2>&1 || true
  helm_driver unprepare-nodes --nodes "$DRA_NODES" >&3 2>&1 || true
  # shellcheck disable=SC2086 # the words are gpu-plugin.sh arguments
  "$REPO_ROOT/hack/cluster/gpu-plugin.sh" up ${DRA_E2E_GPU_PLUGIN_UP:?run helm_install.bats through test/e2e/run.sh} >&3 2>&1
}

# ready_pods: how many plugin pods are Ready.
ready_pods() {
  plugin_pods -o json | jq '[.items[] | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length'
}

@test "helm install: the kubelet plugin pods are Ready on every node and publish ResourceSlices" {
  local n
  [[ -x $HELM_BIN_DIR/helm ]] || { echo "no helm at $HELM_BIN_DIR/helm: hack/cluster/build.sh helm"; false; }
  # Mock roots, mounts and labels; then the install: gpu-plugin.sh down, the DeviceClasses it
  # applied deleted (the chart installs its own), the image imported, `helm upgrade --install`
  # with hack/cluster/helm-values.yaml, the DaemonSet rolled out and every node's slices there.
  helm_driver prepare-nodes --profile h100-8x --nodes "$DRA_NODES" >&3
  helm_driver install --release "$RELEASE" --namespace "$HELM_NS" >&3
  echo "# helm install $RELEASE into $HELM_NS: $(helm -n "$HELM_NS" status "$RELEASE" -o json | jq -r .info.status)" >&3
  # Ready = the init step found the driver, the startup probe (gRPC, the plugin's own sockets)
  # passed (install waited for the rollout; this checks it).
  wait_for 120 "$(node_count) Ready kubelet plugin pods" eval '(( $(ready_pods) == $(node_count) ))' || {
    plugin_pods -o wide; kubectl -n "$HELM_NS" describe pods; false
  }
  # One pod per node, on that node.
  [ "$(plugin_pods -o jsonpath='{.items[*].spec.nodeName}' | tr ' ' '\n' | sort | xargs)" = "$(nodes | sort | xargs)" ]
  for n in $(nodes); do
    wait_for 60 "ResourceSlices of $n" eval '(( $(slice_device_count '"$n"') == 8 ))' || {
      kubectl get resourceslices; kubectl -n "$HELM_NS" logs -l dra-driver-nvidia-gpu-component=kubelet-plugin --tail 30; false
    }
    # Metrics and /healthz on the node's address (hostNetwork: one port per node address).
    curl -sf -m 5 "http://$(node_var "$(node_idx "$n")" IP):8080/metrics" | grep -q 'nvidia_dra_requests_total'
  done
  # The chart's objects exist under the chart's names.
  kubectl get deviceclass gpu.nvidia.com mig.nvidia.com vfio.gpu.nvidia.com >/dev/null
  kubectl get validatingadmissionpolicy resourceslices-policy-dra-driver-nvidia-gpu >/dev/null
  kubectl get clusterrole dra-driver-nvidia-gpu-clusterrole-kubeletplugin >/dev/null
}

@test "a pod with a GPU claim runs on the Helm-installed driver and sees its GPU" {
  claim_template single-gpu
  pod pod1 "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase pod1 Running 60
  wait_log pod1
  assert_gpus pod1 1
  local uid
  uid=$(assert_one_gpu_claim pod1)
  # The plugin pod prepared it, and unprepares it when the pod goes.
  kubectl -n "$HELM_NS" logs -l dra-driver-nvidia-gpu-component=kubelet-plugin --tail -1 | grep -q "$uid"
  k delete pod pod1 --wait=true --timeout=60s >/dev/null
  wait_for 60 "CDI spec of claim $uid removed" test ! -e "$(cdi_spec "$GPU_NODE" "$uid")"
}

# A ResourceSlice as the kubelet plugin's service account writes it: the token is bound to the
# plugin pod on node 1, so it carries that node's name, as the plugin's own token does. The
# driver name is one no plugin publishes, so no plugin deletes the slice.
slice_as_plugin() { # <node of spec.nodeName>
  local pod sa token
  pod=$(plugin_pods -o json | jq -r --arg n "$GPU_NODE" '.items[] | select(.spec.nodeName == $n) | .metadata.name')
  sa=$(kubectl -n "$HELM_NS" get pod "$pod" -o jsonpath='{.spec.serviceAccountName}')
  token=$(kubectl -n "$HELM_NS" create token "$sa" --bound-object-kind Pod --bound-object-name "$pod" --duration 10m)
  curl -s -m 10 --cacert "$PKI_DIR/ca.crt" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -X POST "https://127.0.0.1:$APISERVER_PORT/apis/resource.k8s.io/v1/resourceslices" -d "$(jq -cn --arg n "$1" \
      '{apiVersion: "resource.k8s.io/v1", kind: "ResourceSlice", metadata: {name: ("vap-e2e-" + $n)},
        spec: {driver: "vap-e2e.example.com", nodeName: $n, devices: [],
               pool: {name: ("vap-e2e-" + $n), generation: 1, resourceSliceCount: 1}}}')"
}

@test "the ValidatingAdmissionPolicy lets the plugin's account write only its own node's slices" {
  local out
  [[ -n $MIG_NODE ]] || skip "needs two nodes"
  out=$(slice_as_plugin "$MIG_NODE")
  kubectl delete resourceslice "vap-e2e-$MIG_NODE" --ignore-not-found >/dev/null
  [[ $(jq -r .code <<<"$out") == 422 && $out == *"resourceslices-policy-dra-driver-nvidia-gpu"* &&
    $out == *"may only write ResourceSlices with spec.nodeName $GPU_NODE"* ]] || { echo "$out"; false; }
  out=$(slice_as_plugin "$GPU_NODE")
  kubectl delete resourceslice "vap-e2e-$GPU_NODE" --ignore-not-found >/dev/null
  [[ $(jq -r .kind <<<"$out") == ResourceSlice ]] || { echo "$out"; false; }
}

@test "helm uninstall leaves no plugin pod, ResourceSlice, socket, DeviceClass or RBAC object" {
  local n left
  helm -n "$HELM_NS" uninstall "$RELEASE" --wait --timeout 2m >&3
  wait_for 60 "plugin pods gone" eval '[[ -z $(plugin_pods -o name 2>/dev/null) ]]'
  # The kubelet removes a driver's slices 30 s after the driver unregistered.
  wait_for 90 "gpu.nvidia.com ResourceSlices gone" eval \
    '[[ -z $(kubectl get resourceslices --field-selector spec.driver=$DRIVER -o name) ]]'
  for n in $(nodes); do
    left=$(find "$(node_var "$(node_idx "$n")" KUBELET_DIR)/plugins_registry" "$(node_var "$(node_idx "$n")" KUBELET_DIR)/plugins/$DRIVER" \
      -maxdepth 1 -name '*.sock' 2>/dev/null)
    [[ -z $left ]] || { echo "sockets left on $n: $left"; false; }
    [[ -z $(cdi_specs "$n") ]] || { echo "CDI specs left on $n:"; cdi_specs "$n"; false; }
  done
  left=$(kubectl get clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings,deviceclasses \
    -l app.kubernetes.io/instance=$RELEASE -o name)
  left+=$(kubectl get roles,rolebindings,serviceaccounts,daemonsets -A -l app.kubernetes.io/instance=$RELEASE -o name)
  [[ -z $left ]] || { echo "left behind: $left"; false; }
}
