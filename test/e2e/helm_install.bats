#!/usr/bin/env bats
# The driver as operators install it: `helm install` of deployments/helm/dra-driver-nvidia-gpu with
# the locally built image (hack/cluster/driver-image.sh). run.sh installed it for every scenario
# file (hack/cluster/helm-driver.sh: node preparation, image import, `helm upgrade --install` with
# hack/cluster/helm-values.yaml, docs/helm.md); this file checks the release itself: the DaemonSet
# pods on every node, the chart's objects, a surge
# `helm upgrade` to another image tag and a `helm rollback` under claim churn, and `helm uninstall`, whose pre-delete hook
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
# shellcheck disable=SC2086 # one line per name
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
  # Ready = the init step found the driver and the startup probe (gRPC: the plugin's own
  # sockets answer and the kubelet registered it) passed.
  wait_for 120 "$(node_count) Ready kubelet plugin pods" eval '(( $(ready_pods) == $(node_count) ))' || {
    plugin_pods -o wide; kubectl -n "$DRIVER_NS" describe pods; false
  }
  # One pod per node, on that node, on the pod network (not the host's).
  [ "$(plugin_pods -o jsonpath='{.items[*].spec.nodeName}' | tr ' ' '\n' | sort | xargs)" = "$(nodes | sort | xargs)" ]
  [ "$(plugin_pods -o json | jq '[.items[] | select(.spec.hostNetwork == true)] | length')" = 0 ]
  for n in $(nodes); do
    # Node 1: eight H100s; node 2: its A100s' MIG devices.
    want=8
    # shellcheck disable=SC2034 # read by the eval of wait_for below
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

# --- helm upgrade and helm rollback under claim churn -------------------------------------------
#
# The chart rolls the plugins' DaemonSet by surge on this 1.36 cluster (docs/helm.md "Rolling
# updates of the kubelet plugins"): per node, the new pod starts beside the old one, both serve on
# sockets named after their pods, and the old one is stopped once the new one is Ready, which the
# plugin reports only after the kubelet registered it. The test proves the hand-over from what
# was recorded, not from sampling: the kubelet's own log of each registration socket it registers
# and unregisters (klog at --v=1, pkg/kubelet/pluginmanager/reconciler: "OperationExecutor.
# RegisterPlugin started" / "UnregisterPlugin started"), the plugins' logs ("plugin registered
# with kubelet", sent by the kubelet after it added the instance; "prepared claim"), and a watch
# of the plugin pods (when each deletion was seen).

# Evidence folder of the running test (its BATS_TEST_TMPDIR).
evid() { echo "$BATS_TEST_TMPDIR/evidence"; }

# follow_plugin_logs <since>: `kubectl logs -f --timestamps --since-time <since>` of both containers
# of every plugin pod not followed yet, into <evid>/<pod UID>.<container>.log; each follower ends
# with its container, so an old pod's log is complete up to its stop.
follow_plugin_logs() {
  local name uid c
  while read -r name uid; do
    [[ -n $uid ]] || continue
    for c in gpus compute-domains; do
      [[ -e $(evid)/$uid.$c.log ]] && continue
      # The binary itself, so that the job teardown kills is the follower (lib.bash's kubectl is a
      # function, run in a subshell of its own), without lib.bash's --request-timeout=20s, which
      # would end the follow.
      "$K8S_BIN_DIR/kubectl" -n "$DRIVER_NS" logs -f --timestamps --since-time="$1" "$name" -c "$c" \
        >"$(evid)/$uid.$c.log" 2>&1 3>&- &
    done
  done < <(plugin_pods -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.metadata.uid}{"\n"}{end}')
}

# "<node> <pod UID>" of every plugin pod (one per node after helm-driver.sh install).
plugin_uids() {
  plugin_pods -o jsonpath='{range .items[*]}{.spec.nodeName}{" "}{.metadata.uid}{"\n"}{end}' | sort
}
uid_on() { awk -v n="$2" '$1 == n {print $2}' "$1"; }

# watch_plugin_pods <log> <pid file>: every change of a plugin pod as "<epoch> <event> <pod UID>
# <deletion timestamp or nothing>", stamped when the watch delivered it. The watch's PID goes to
# <pid file>: killing it ends the whole pipeline.
watch_plugin_pods() {
  local line
  {
    # The binary, as in follow_plugin_logs: $! is then the watch itself.
    "$K8S_BIN_DIR/kubectl" -n "$DRIVER_NS" get pods -l "$PLUGIN_SELECTOR" --watch --output-watch-events \
      -o jsonpath='{.type}{" "}{.object.metadata.uid}{" "}{.object.metadata.deletionTimestamp}{"\n"}' 2>/dev/null &
    echo $! >"$2"
    wait
  } | while read -r line; do echo "$(date +%s.%N) $line"; done >>"$1"
}

# The epoch (seconds, fractional) of an RFC 3339 time, or of a klog header's "MMDD hh:mm:ss.us".
epoch() { date -u -d "$1" +%s.%N; }
klog_epoch() { epoch "$(date -u +%Y)-${1:0:2}-${1:2:2} $2"; }

# kubelet_plugin_events <node> <byte offset>: "<epoch> register|unregister <socket file>" for every
# registration socket the node's kubelet started to register or unregister after that offset of
# its log.
kubelet_plugin_events() {
  local mmdd t op sock
  tail -c +"$(($2 + 1))" "$LOG_DIR/$1/kubelet.log" |
    sed -nE 's/^I([0-9]{4}) ([0-9:.]+) .*"OperationExecutor\.(Register|Unregister)Plugin started" plugin=\{"SocketPath":"[^"]*\/([^"/]+)".*/\1 \2 \3 \4/p' |
    while read -r mmdd t op sock; do echo "$(klog_epoch "$mmdd" "$t") ${op,,} $sock"; done
}

# registered_at <pod UID> <container>: the epoch of the container's first "plugin registered with
# kubelet" line (the kubelet's NotifyRegistrationStatus, which it sends after it added the
# instance); nothing when there is none.
registered_at() {
  local t
  t=$(awk '/"plugin registered with kubelet"/ {print $1; exit}' "$(evid)/$1.$2.log" 2>/dev/null)
  [[ -z $t ]] || epoch "$t"
}
has_prepared() { grep -q '"prepared claim"' "$(evid)/$1.gpus.log" 2>/dev/null; }

# assert_handover <step> <node> <old UID> <new UID> <kubelet events> <pod watch>: for both drivers,
# the kubelet registered the new pod's socket and told the new plugin so before it unregistered
# the old pod's socket (both registered in between), did not unregister the new one before that,
# and the old pod's deletion came after the new plugin's registration.
assert_handover() {
  local step=$1 n=$2 old=$3 new=$4 ev=$5 watch=$6 drv c t_start t_reg t_unreg t_del
  for drv in gpu.nvidia.com compute-domain.nvidia.com; do
    c=gpus
    [[ $drv == gpu.nvidia.com ]] || c=compute-domains
    t_start=$(awk -v s="$drv-$new-reg.sock" '$2 == "register" && $3 == s {print $1; exit}' "$ev")
    t_reg=$(registered_at "$new" "$c")
    t_unreg=$(awk -v s="$drv-$old-reg.sock" '$2 == "unregister" && $3 == s {print $1; exit}' "$ev")
    t_del=$(awk -v u="$old" '$3 == u && $4 != "" {print $1; exit}' "$watch")
    [[ -n $t_start && -n $t_reg && -n $t_unreg && -n $t_del ]] || {
      echo "$step on $n, $drv: missing evidence: kubelet registered new '$t_start', new plugin registered '$t_reg'," \
        "kubelet unregistered old '$t_unreg', old pod deleted '$t_del'; the kubelet's events:"
      cat "$ev"
      return 1
    }
    awk -v a="$t_start" -v b="$t_reg" -v c="$t_unreg" -v d="$t_del" 'BEGIN { exit !(a <= b && b < c && b < d) }' || {
      echo "$step on $n, $drv: out of order: kubelet registered the new socket at $t_start, the new plugin" \
        "was registered at $t_reg, the old socket unregistered at $t_unreg, the old pod's deletion seen at $t_del"
      return 1
    }
    # (The next rollout unregisters it, later.)
    ! awk -v s="$drv-$new-reg.sock" -v c="$t_unreg" '$2 == "unregister" && $3 == s && $1 <= c {f = 1} END {exit !f}' "$ev" || {
      echo "$step on $n, $drv: the kubelet unregistered the new pod's socket $drv-$new-reg.sock before the old one's"
      return 1
    }
    echo "# $step on $n, $drv: new pod registered $(awk -v a="$t_start" -v b="$t_reg" 'BEGIN {printf "%.2f", b - a}') s after the kubelet found its socket; both registered for $(awk -v b="$t_reg" -v c="$t_unreg" 'BEGIN {printf "%.2f", c - b}') s until the old socket was unregistered" >&3
  done
}

# load_pods <stop file> <log>: one short pod with a fresh single-GPU claim on $GPU_NODE every 1.5 s
# (the load's pace) until the stop file exists; each name goes to <log> when created.
load_pods() {
  local i=0
  until [[ -e $1 ]]; do
    i=$((i + 1))
    pod "load$i" "$GPU_NODE" "gpu=template:single-gpu" "" Never "nvidia-smi -L" && echo "load$i" >>"$2"
    sleep 1.5
  done
}

# What a running workload pod has of its GPU: what nvidia-smi lists and the device nodes, from
# inside the container.
pod_devices() { k exec "$1" -- sh -c 'nvidia-smi -L; ls /dev | grep nvidia' 2>&1; }
pod_state() {
  k get pod "$1" -o jsonpath='{.status.phase} {.status.containerStatuses[0].state.running.startedAt} {.status.containerStatuses[0].restartCount}'
}

# The release's kubelet-plugin DaemonSet, as daemonset/<name>.
plugin_ds() {
  kubectl -n "$DRIVER_NS" get daemonsets -l "app.kubernetes.io/instance=$RELEASE" -o json |
    jq -r '.items[] | select(.spec.template.metadata.labels["dra-driver-nvidia-gpu-component"] == "kubelet-plugin") |
      "daemonset/\(.metadata.name)"'
}
# rolled_out: the plugins' DaemonSet is rolled out and its old pods are gone (what
# helm-driver.sh install waits for).
rolled_out() {
  local ds
  ds=$(plugin_ds)
  kubectl -n "$DRIVER_NS" rollout status "$ds" --timeout=120s >/dev/null &&
    wait_for 120 "the old plugin pods of $ds to go" eval \
      '[[ $(kubectl -n "$DRIVER_NS" get '"$ds"' -o jsonpath="{.status.desiredNumberScheduled}") == $(plugin_pods -o name | grep -c .) ]]'
}

teardown() {
  # The upgrade test's background jobs and pods, also when it failed half-way: a pod left holding
  # a claim would keep the driver's files on the node through the uninstall tests below.
  [[ ! -d $(evid) ]] || touch "$(evid)/stop"
  local j
  [[ ! -s $(evid)/watch.pid ]] || kill "$(cat "$(evid)/watch.pid")" 2>/dev/null || true
  for j in $(jobs -p); do kill "$j" 2>/dev/null || true; done
  k delete pods --all --wait=true --timeout=120s >/dev/null 2>&1 || true
}

@test "helm upgrade to another image tag, then helm rollback, under claim churn: surge hand-over on every node, no failed prepare, running pods keep their devices" {
  local i n image rev0 pods p failed errors held_state held_devs
  local ev=$BATS_TEST_TMPDIR/evidence stop created watch load1 load_pid t0
  mkdir -p "$ev"
  # The plugins' log lines from here on (a second earlier: the API's times have whole seconds).
  t0=$(date -u -d '-1 sec' +%Y-%m-%dT%H:%M:%SZ)
  stop=$ev/stop created=$ev/created watch=$ev/pod-watch
  image=$(upgrade_image)
  # The default path: no updateStrategy given, and the chart chose the surge.
  [ "$(kubectl -n "$DRIVER_NS" get "$(plugin_ds)" -o jsonpath='{.spec.updateStrategy.rollingUpdate.maxSurge} {.spec.updateStrategy.rollingUpdate.maxUnavailable}')" = "1 0" ]
  rev0=$(helm -n "$DRIVER_NS" status "$RELEASE" -o json | jq -r .version)
  # The "new release" of the image: the same content under a second tag, in every node's containerd.
  for i in $(seq "$(node_count)"); do
    node_ctr "$i" images tag --force "$("$REPO_ROOT/hack/cluster/driver-image.sh" name)" "$image" >/dev/null
  done
  for n in $(nodes); do echo "$n $(stat -c %s "$LOG_DIR/$n/kubelet.log")"; done >"$ev/kubelet-offsets"
  : >"$created"
  : >"$watch"
  watch_plugin_pods "$watch" "$ev/watch.pid" 3>&- &
  plugin_uids >"$ev/uids-0"
  follow_plugin_logs "$t0"

  # A pod holding a GPU claim through both rollouts.
  claim_template single-gpu
  pod held "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase held Running 60
  wait_log held
  held_state=$(pod_state held)
  held_devs=$(pod_devices held)
  grep -q '^GPU 0: ' <<<"$held_devs" || { echo "held sees: $held_devs"; false; }

  # Claim churn; the first pod's claim is prepared by the plugin pods of before the upgrade.
  load_pods "$stop" "$created" 3>&- &
  load_pid=$!
  wait_for 60 "the first load pod to start" eval '[[ $(k get pod load1 -o jsonpath="{.status.phase}" 2>/dev/null) =~ ^(Running|Succeeded)$ ]]'
  load1=$(k get resourceclaim "$(claim_of load1 gpu)" -o jsonpath='{.metadata.uid}')
  wait_for 30 "the first plugin on $GPU_NODE to log the prepare of load1's claim" \
    grep -q "\"prepared claim\" claim=\"$load1\"" "$ev/$(uid_on "$ev/uids-0" "$GPU_NODE").gpus.log"

  "$REPO_ROOT/hack/cluster/helm-driver.sh" install --set image.tag="$UPGRADE_TAG" >&3 2>&1
  [ "$(plugin_pods -o jsonpath='{.items[*].spec.containers[?(@.name=="gpus")].image}' | tr ' ' '\n' | sort -u)" = "$image" ]
  plugin_uids >"$ev/uids-1"
  follow_plugin_logs "$t0"
  # The upgraded plugin of the GPU node prepares the churn's claims.
  wait_for 60 "the upgraded plugin on $GPU_NODE to prepare a claim" has_prepared "$(uid_on "$ev/uids-1" "$GPU_NODE")"

  helm -n "$DRIVER_NS" rollback "$RELEASE" "$rev0" --wait --timeout 2m >&3 2>&1
  rolled_out
  [ "$(plugin_pods -o jsonpath='{.items[*].spec.containers[?(@.name=="gpus")].image}' | tr ' ' '\n' | sort -u)" = \
    "$("$REPO_ROOT/hack/cluster/driver-image.sh" name)" ]
  plugin_uids >"$ev/uids-2"
  follow_plugin_logs "$t0"
  wait_for 60 "the rolled-back plugin on $GPU_NODE to prepare a claim" has_prepared "$(uid_on "$ev/uids-2" "$GPU_NODE")"
  touch "$stop"
  wait "$load_pid"

  # Per node and driver, the hand-over of both rollouts, from the kubelet's log, the plugins' logs
  # and the pod watch.
  for n in $(nodes); do
    kubelet_plugin_events "$n" "$(awk -v n="$n" '$1 == n {print $2}' "$ev/kubelet-offsets")" >"$ev/kubelet-$n"
    assert_handover upgrade "$n" "$(uid_on "$ev/uids-0" "$n")" "$(uid_on "$ev/uids-1" "$n")" "$ev/kubelet-$n" "$watch"
    assert_handover rollback "$n" "$(uid_on "$ev/uids-1" "$n")" "$(uid_on "$ev/uids-2" "$n")" "$ev/kubelet-$n" "$watch"
  done
  # Every pod of the churn ran to completion with its GPU.
  pods=$(grep -c . "$created")
  local created_pods
  mapfile -t created_pods <"$created"
  for p in "${created_pods[@]}"; do
    wait_pod_phase "$p" Succeeded 90
    assert_gpus "$p" 1
  done
  # No prepare failed: no kubelet event of a failed prepare, no plugin error about a prepare.
  failed=$(k get events -o json | jq '[.items[] | select(.reason == "FailedPrepareDynamicResources" or
    (.type == "Warning" and (.message | test("prepare"; "i"))))] | length')
  errors=$(cat "$ev"/*.log | grep -E ' E[0-9]{4} ' | grep -ic 'prepar' || true)
  echo "# upgrade and rollback: $pods pods with new claims during the rollouts, $failed failed prepares, $errors plugin errors about prepares" >&3
  [ "$failed" = 0 ] || { k get events; false; }
  [ "$errors" = 0 ] || { cat "$ev"/*.log | grep -E ' E[0-9]{4} ' | grep -i 'prepar' | head; false; }
  # The holder was never disturbed: same container, still Running, not restarted, the same devices.
  [ "$(pod_state held)" = "$held_state" ] || { echo "held: before '$held_state', now '$(pod_state held)'"; false; }
  [ "$(pod_devices held)" = "$held_devs" ] || { echo "held saw: $held_devs"; echo "now: $(pod_devices held)"; false; }
  # The rolled-back plugin unprepares the claim the first plugin prepared.
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
    -l "app.kubernetes.io/instance=$RELEASE" -o name)
  # The hook's Job, ServiceAccount, ClusterRole(Binding) and Role(Binding) too
  # (hook-delete-policy hook-succeeded).
  left+=$(kubectl get roles,rolebindings,serviceaccounts,daemonsets,deployments,jobs -A -l "app.kubernetes.io/instance=$RELEASE" -o name)
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
