#!/usr/bin/env bats
# The driver as operators install it: `helm install` of deployments/helm/dra-driver-nvidia-gpu with
# the locally built image (hack/cluster/driver-image.sh). run.sh installed it for every scenario
# file (hack/cluster/helm-driver.sh: node preparation, image import, `helm upgrade --install` with
# hack/cluster/helm-values.yaml, docs/helm.md); this file checks the release itself: the DaemonSet
# pods on every node, the chart's objects, a rolling
# `helm upgrade` to another image tag under load, and `helm uninstall`, whose pre-delete hook
# releases the ComputeDomains (or, with controller.uninstallCleanup.deleteComputeDomains, deletes
# them) and which leaves nothing behind, on any node either. It ends with the driver uninstalled,
# so run.sh runs it last (a following run.sh installs it again).
#
# helm-driver.sh prepare-nodes made each node's mock driver root under its state folder and
# bind-mounted it at /run/nvidia/driver inside that node's mount namespace only: one
# nvidiaDriverRoot for the whole DaemonSet, different GPUs per node. The nodes carry the label
# nvidia.com/gpu.present=true, one of those the chart's node affinity accepts (what GPU feature
# discovery sets on a real node).

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace helm
}

teardown_file() {
  load lib
  load gpu_lib
  local i
  for i in $(seq "$(wc -w <<<"$DRA_NODES")"); do
    node_ctr "$i" images rm "$(upgrade_image)" >/dev/null 2>&1 || true
  done
  kubectl delete namespace "$E2E_NS" --wait=false >/dev/null 2>&1 || true
}

setup() {
  load lib
  load gpu_lib
}

helm() { "$HELM_BIN_DIR/helm" --kubeconfig "$KUBECONFIG_PATH" "$@"; }
nodes() { printf '%s\n' $DRA_NODES; }
node_count() { nodes | grep -c .; }
# The second tag of the driver image the upgrade test rolls to (same content, new tag).
UPGRADE_TAG=v0.1.0-e2e-upgrade
upgrade_image() { local i; i=$("$REPO_ROOT/hack/cluster/driver-image.sh" name); echo "${i%:*}:$UPGRADE_TAG"; }

# ready_pods: how many plugin pods are Ready.
ready_pods() {
  plugin_pods -o json | jq '[.items[] | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length'
}

@test "helm install: the kubelet plugin pods are Ready on every node and publish ResourceSlices" {
  local n want
  [[ -x $HELM_BIN_DIR/helm ]] || { echo "no helm at $HELM_BIN_DIR/helm: hack/cluster/build.sh helm"; false; }
  echo "# release $RELEASE in $DRIVER_NS: $(helm -n "$DRIVER_NS" status "$RELEASE" -o json | jq -r '"revision \(.version), \(.info.status)"')" >&3
  [ "$(helm -n "$DRIVER_NS" status "$RELEASE" -o json | jq -r .info.status)" = deployed ]
  # Ready = the init step found the driver and the startup probe (gRPC, the plugin's own
  # sockets) passed.
  wait_for 120 "$(node_count) Ready kubelet plugin pods" eval '(( $(ready_pods) == $(node_count) ))' || {
    plugin_pods -o wide; kubectl -n "$DRIVER_NS" describe pods; false
  }
  # One pod per node, on that node, on the pod network (not the host's).
  [ "$(plugin_pods -o jsonpath='{.items[*].spec.nodeName}' | tr ' ' '\n' | sort | xargs)" = "$(nodes | sort | xargs)" ]
  [ "$(plugin_pods -o json | jq '[.items[] | select(.spec.hostNetwork == true)] | length')" = 0 ]
  for n in $(nodes); do
    # Node 1: eight H100s; node 2: its A100s' MIG devices.
    want=8
    [[ $n != "$MIG_NODE" ]] || want=9
    wait_for 60 "ResourceSlices of $n" eval '(( $(slice_device_count '"$n"') == want ))' || {
      kubectl get resourceslices; plugin_logs "$n" | tail -n 30; false
    }
    # Metrics on the pod's address.
    curl -sf -m 5 "$(plugin_metrics_url "$n")" | grep -q 'nvidia_dra_requests_total'
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
  plugin_logs "$GPU_NODE" | grep -q "\"prepared claim\" claim=\"$uid\""
  k delete pod pod1 --wait=true --timeout=60s >/dev/null
  wait_for 60 "CDI spec of claim $uid removed" test ! -e "$(cdi_spec "$GPU_NODE" "$uid")"
}

# The ResourceSlice policy and the other limits of the chart's service accounts: rbac.bats.

# The plugin registration sockets of the driver on node <name> (one per plugin pod in the
# rolling-update mode the chart turns on with POD_UID: gpu.nvidia.com-<pod UID>-reg.sock).
reg_sockets() {
  find "$(node_var "$(node_idx "$1")" KUBELET_DIR)/plugins_registry" -maxdepth 1 -name "$DRIVER-*-reg.sock" | wc -l
}

# load_pods <stop file> <log>: one short pod with a fresh single-GPU claim on $GPU_NODE every 1.5 s
# until the stop file exists; each name goes to <log> when created.
load_pods() {
  local i=0
  until [[ -e $1 ]]; do
    i=$((i + 1))
    pod "load$i" "$GPU_NODE" "gpu=template:single-gpu" "" Never "nvidia-smi -L" && echo "load$i" >>"$2"
    sleep 1.5
  done
}

# watch_plugins <stop file> <log>: every 0.3 s, per node, "<node> <plugin pods Running> <registration
# sockets>" into <log>.
watch_plugins() {
  local n running
  until [[ -e $1 ]]; do
    for n in $(nodes); do
      running=$(plugin_pods -o json --field-selector "spec.nodeName=$n" |
        jq '[.items[] | select(.status.phase == "Running")] | length')
      echo "$n $running $(reg_sockets "$n")" >>"$2"
    done
    sleep 0.3
  done
}

@test "helm upgrade to another image tag under load: old and new plugin pods side by side, no failed prepare, no pod disruption" {
  local i image pods started stop=$BATS_TEST_TMPDIR/stop created=$BATS_TEST_TMPDIR/created seen=$BATS_TEST_TMPDIR/seen
  image=$(upgrade_image)
  # The "new release" of the image: the same content under a second tag, in every node's containerd.
  for i in $(seq "$(node_count)"); do
    node_ctr "$i" images tag --force "$("$REPO_ROOT/hack/cluster/driver-image.sh" name)" "$image" >/dev/null
  done
  # A pod holding a GPU claim through the whole upgrade.
  claim_template single-gpu
  pod held "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase held Running 60
  wait_log held
  started=$(k get pod held -o jsonpath='{.status.containerStatuses[0].state.running.startedAt}')

  : >"$created"
  : >"$seen"
  load_pods "$stop" "$created" 3>&- &
  watch_plugins "$stop" "$seen" 3>&- &
  sleep 3
  # A surge rollout: each node gets its new plugin pod before the old one is stopped
  # (maxUnavailable 0); the two serve side by side on sockets named after their pods.
  "$REPO_ROOT/hack/cluster/helm-driver.sh" install --set image.tag="$UPGRADE_TAG" \
    --set kubeletPlugin.updateStrategy.rollingUpdate.maxSurge=1 \
    --set kubeletPlugin.updateStrategy.rollingUpdate.maxUnavailable=0 >&3 2>&1
  sleep 5
  touch "$stop"
  wait

  # Every plugin pod runs the new tag now.
  [ "$(plugin_pods -o jsonpath='{.items[*].spec.containers[?(@.name=="gpus")].image}' | tr ' ' '\n' | sort -u)" = "$image" ]
  # Both instances were up at once on every node: two Running plugin pods and two registration
  # sockets observed together.
  for n in $(nodes); do
    grep -q "^$n 2 2$" "$seen" || { echo "never saw two plugin pods and sockets on $n:"; sort "$seen" | uniq -c; false; }
  done
  # Every pod created during the rollout ran to completion with its GPU; no prepare failed.
  pods=$(grep -c . "$created")
  ((pods >= 3)) || { echo "only $pods pods were created during the upgrade"; false; }
  for p in $(cat "$created"); do
    wait_pod_phase "$p" Succeeded 90
    assert_gpus "$p" 1
  done
  local failed
  failed=$(k get events -o json | jq '[.items[] | select(.reason == "FailedPrepareDynamicResources" or
    (.type == "Warning" and (.message | test("prepare"; "i"))))] | length')
  echo "# upgrade: $pods pods with new claims prepared during the rolling update, $failed failed prepares; $(sort -u "$seen" | awk '$2 == 2 && $3 == 2 {print $1}' | sort -u | xargs) had two plugin pods serving" >&3
  [ "$failed" = 0 ] || { k get events; false; }
  # The holder was never disturbed: same container, still Running, its GPU still there.
  [ "$(k get pod held -o jsonpath='{.status.phase}')" = Running ]
  [ "$(k get pod held -o jsonpath='{.status.containerStatuses[0].state.running.startedAt}')" = "$started" ]
  [ "$(k get pod held -o jsonpath='{.status.containerStatuses[0].restartCount}')" = 0 ]
  # The new plugin pod unprepares the claim the old one prepared.
  local uid
  uid=$(k get resourceclaim "$(claim_of held gpu)" -o jsonpath='{.metadata.uid}')
  k delete pod held --wait=true --timeout=60s >/dev/null
  wait_for 60 "CDI spec of claim $uid removed" test ! -e "$(cdi_spec "$GPU_NODE" "$uid")"
}

# A ComputeDomain in a namespace of its own, once the controller holds it with its finalizer and
# has made its channel template. Prints the namespace.
held_domain() { # <name>
  local ns=e2e-helm-cd-$RANDOM$RANDOM
  kubectl create namespace "$ns" >/dev/null
  kubectl -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata: {name: $1}
spec:
  numNodes: 0
  channel: {resourceClaimTemplate: {name: $1-channel}}
EOF
  # The name is spliced in: inside wait_for, $1 is wait_for's own first argument.
  wait_for 60 "the controller's finalizer on ComputeDomain $ns/$1" eval \
    '[[ $(kubectl -n '"$ns"' get computedomain '"$1"' -o jsonpath="{.metadata.finalizers}") == *resource.nvidia.com/computeDomain* ]]' >&2 ||
    return 1
  wait_for 60 "the channel template of ComputeDomain $ns/$1" kubectl -n "$ns" get resourceclaimtemplate "$1-channel" >&2 ||
    return 1
  echo "$ns"
}

# Every file either driver wrote on node <name> that is still there: CDI specs (claim specs, the
# compute-domain base spec, device-metadata specs) in both CDI directories, the plugin
# directories (checkpoints, sockets, IMEX daemon directories) and registration sockets.
driver_files_left() {
  local i kubelet
  i=$(node_idx "$1")
  kubelet=$(node_var "$i" KUBELET_DIR)
  find "$(node_var "$i" CDI_STATIC_DIR)" "$(node_var "$i" CDI_DYNAMIC_DIR)" -maxdepth 1 \
    \( -name 'k8s.gpu.nvidia.com-*' -o -name 'gpu.nvidia.com_*' -o -name 'k8s.compute-domain.nvidia.com-*' \) 2>/dev/null
  find "$kubelet/plugins/gpu.nvidia.com" "$kubelet/plugins/compute-domain.nvidia.com" 2>/dev/null
  find "$kubelet/plugins_registry" -maxdepth 1 \( -name 'gpu.nvidia.com*' -o -name 'compute-domain.nvidia.com*' \) 2>/dev/null
  return 0
}

# After an uninstall: no plugin pod, slice, file on any node, or object of the release.
assert_nothing_left() {
  local n left
  wait_for 60 "plugin pods gone" eval '[[ -z $(plugin_pods -o name 2>/dev/null) ]]'
  # The kubelet removes a driver's slices 30 s after the driver unregistered.
  wait_for 90 "gpu.nvidia.com ResourceSlices gone" eval \
    '[[ -z $(kubectl get resourceslices --field-selector spec.driver=$DRIVER -o name) ]]'
  for n in $(nodes); do
    left=$(driver_files_left "$n")
    [[ -z $left ]] || { echo "files of the driver left on $n:"; echo "$left"; false; }
  done
  left=$(kubectl get clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings,deviceclasses \
    -l app.kubernetes.io/instance=$RELEASE -o name)
  # The hook's Job, ServiceAccount, ClusterRole(Binding) and Role(Binding) too
  # (hook-delete-policy hook-succeeded).
  left+=$(kubectl get roles,rolebindings,serviceaccounts,daemonsets,deployments,jobs -A -l app.kubernetes.io/instance=$RELEASE -o name)
  [[ -z $left ]] || { echo "left behind: $left"; false; }
}

@test "helm uninstall releases the ComputeDomains (they stay, without finalizer) and leaves no plugin pod, ResourceSlice, file on any node, DeviceClass or RBAC object" {
  local cd_ns
  # A ComputeDomain the controller holds with its finalizer: without the chart's pre-delete hook
  # (compute-domain-controller cleanup) it would keep the finalizer after the controller is gone,
  # and its namespace would never finish terminating. It is the user's: it stays.
  cd_ns=$(held_domain kept)
  # Above the hook's own limit (controller.uninstallCleanup.timeout, 4m), so that a domain left is
  # reported by the hook's Job rather than by Helm's timeout.
  helm -n "$DRIVER_NS" uninstall "$RELEASE" --wait --timeout 5m >&3
  # The hook stopped the controller and removed what it made (the channel template, the
  # finalizer); the ComputeDomain itself is there, not being deleted.
  run kubectl -n "$cd_ns" get computedomain kept -o json
  [[ $status -eq 0 ]] || { echo "$output"; false; }
  [[ $(jq -c '[.metadata.finalizers // [], .metadata.deletionTimestamp // null]' <<<"$output") == '[[],null]' ]] ||
    { echo "ComputeDomain $cd_ns/kept: $(jq -c .metadata <<<"$output")"; false; }
  run kubectl -n "$cd_ns" get resourceclaimtemplate kept-channel
  [[ $status -ne 0 && $output == *NotFound* ]]
  # Without the finalizer the namespace goes at once, the domain with it.
  kubectl delete namespace "$cd_ns" --wait=true --timeout=60s >/dev/null
  assert_nothing_left
}

@test "helm uninstall with controller.uninstallCleanup.deleteComputeDomains deletes every ComputeDomain first" {
  local cd_ns
  "$REPO_ROOT/hack/cluster/helm-driver.sh" install --set controller.uninstallCleanup.deleteComputeDomains=true >&3 2>&1
  cd_ns=$(held_domain doomed)
  helm -n "$DRIVER_NS" uninstall "$RELEASE" --wait --timeout 5m >&3
  # The hook deleted it and the controller finalized it (its template gone too) before the
  # controller itself went.
  run kubectl -n "$cd_ns" get computedomain doomed
  [[ $status -ne 0 && $output == *NotFound* ]]
  run kubectl -n "$cd_ns" get resourceclaimtemplate doomed-channel
  [[ $status -ne 0 && $output == *NotFound* ]]
  kubectl delete namespace "$cd_ns" --wait=true --timeout=60s >/dev/null
  assert_nothing_left
}
