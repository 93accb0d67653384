#!/usr/bin/env bash
# Installs the GPU driver on the local nodes the way operators install it: `helm upgrade --install`
# of deployments/helm/dra-driver-nvidia-gpu with the locally built image (driver-image.sh) and the
# local cluster's values (hack/cluster/helm-values.yaml, docs/helm.md "On the local cluster"). The
# one way the harness runs the driver: used by hack/demo.sh, test/e2e/run.sh and the e2e files.
#
#   helm-driver.sh prepare-nodes [--profile P | --profile NODE=P ...] [--nodes "NODE ..."]
#       what an operator (or the GPU Operator) does before the install, per node: a mock driver
#       root (test/doubles/make-driver-root.sh, default profile h100-8x) under the node's state
#       folder, bind-mounted at /run/nvidia/driver inside that node's mount namespace only
#       (/run/nvidia made a shared mount first), and the label nvidia.com/gpu.present=true.
#       Default: every running node. Idempotent: mounts that exist are kept, the root is refreshed.
#   helm-driver.sh install [--release R] [--namespace NS] [HELM ARGS ...]
#       imports the image into every running node (built first when an input changed),
#       applies the chart's CRDs (Helm never upgrades them),
#       prints and runs `helm upgrade --install` (extra arguments, e.g. --set k=v or -f file, are
#       passed on), then waits until the kubelet-plugin DaemonSet is rolled out (the old pods of
#       a surge rollout gone) and every prepared node publishes devices. A second run is an
#       upgrade to the same revision content: the pods stay.
#   helm-driver.sh uninstall [--release R] [--namespace NS]
#       `helm uninstall --wait`, the namespace, and the driver's ResourceSlices left behind (the
#       kubelet would delete them 30 s after the plugin unregistered). Idempotent.
#   helm-driver.sh unprepare-nodes [--nodes "NODE ..."]
#       undoes prepare-nodes: label, mounts, mock roots. Default: every node that has any of them.
#   helm-driver.sh status [--release R] [--namespace NS]
#       the release, the plugin pods and the devices each node publishes.
#   helm-driver.sh logs [--release R] [--namespace NS] [--node NODE] [--tail N]
#       the log tail of the plugin pods (of one node).
# Defaults: release dra-driver-nvidia-gpu, namespace nvidia-dra-driver-gpu (the public docs'), or
# $DRA_HELM_RELEASE / $DRA_HELM_NAMESPACE.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_CLUSTER_DIR/node-lib.sh"
source "$HACK_CLUSTER_DIR/gpu-nodes-lib.sh"
REPO_ROOT=$(cd "$HACK_CLUSTER_DIR/../.." && pwd)

RELEASE=${DRA_HELM_RELEASE:-dra-driver-nvidia-gpu}
NAMESPACE=${DRA_HELM_NAMESPACE:-nvidia-dra-driver-gpu}
# Relative to the repository root, so that the printed command can be pasted there.
CHART=deployments/helm/dra-driver-nvidia-gpu
VALUES=hack/cluster/helm-values.yaml
DRIVER=$GPU_DRIVER_NAME
# The chart's nvidiaDriverRoot in helm-values.yaml, and the label its node affinity accepts.
CHART_ROOT=/run/nvidia/driver
GPU_LABEL=nvidia.com/gpu.present
PLUGIN_SELECTOR=dra-driver-nvidia-gpu-component=kubelet-plugin
# shellcheck disable=SC2034 # read by profile_for (gpu-nodes-lib.sh)
DEFAULT_PROFILE=${DRA_GPU_PROFILE:-h100-8x}
HELM=$HELM_BIN_DIR/helm

kubectl() { "$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_PATH" --request-timeout=20s "$@"; }
helm() { "$HELM" --kubeconfig "$KUBECONFIG_PATH" "$@"; }
# The mock root of a node on the host; the node's namespace sees the host's /var/lib, so the same
# path works inside it as the source of the bind mount.
helm_root() { echo "$NODE_STATE_ROOT/$1/helm-driver-root"; }
in_node() { local n=$1; shift; node_nsenter "$n" "$@"; }
is_mount() { in_node "$1" mountpoint -q "$2"; }
plugin_pods() { kubectl -n "$NAMESPACE" get pods -l "$PLUGIN_SELECTOR" "$@"; }

cmd_prepare_nodes() {
  local n profile t=$EPOCHREALTIME parent=${CHART_ROOT%/*}
  for n in $(select_nodes "$1"); do
    profile=$(profile_for "$n")
    local before after
    before=$(sha256sum "$(helm_root "$n")/var/lib/mock-nvml/profile.json" 2>/dev/null) || before=
    "$REPO_ROOT/test/doubles/make-driver-root.sh" "$profile" "$(helm_root "$n")" >/dev/null
    after=$(sha256sum "$(helm_root "$n")/var/lib/mock-nvml/profile.json")
    # Other hardware under a running plugin: its pod goes (the DaemonSet makes a new one, which
    # discovers the new GPUs), as an operator restarts the driver after a hardware change. A pod
    # that kept running would publish the old GPUs.
    if [[ -n $before && $before != "$after" ]]; then
      local pods
      pods=$(kubectl get pods -A -l "$PLUGIN_SELECTOR" --field-selector "spec.nodeName=$n" \
        -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}' 2>/dev/null) || pods=
      for p in $pods; do
        kubectl -n "${p%%/*}" delete pod "${p#*/}" --wait=false >/dev/null &&
          progress "$n: profile changed, restarting the plugin pod ${p#*/}"
      done
    fi
    in_node "$n" mkdir -p "$CHART_ROOT"
    # /run/nvidia becomes a shared mount point of its own in the node's namespace (the host's / is
    # private here, unlike on a systemd host): the chart mounts it with HostToContainer
    # propagation, and containerd refuses that for a source that is not a shared or slave mount.
    if ! is_mount "$n" "$parent"; then
      in_node "$n" mount --bind "$parent" "$parent"
      in_node "$n" mount --make-shared "$parent"
    fi
    is_mount "$n" "$CHART_ROOT" || in_node "$n" mount --bind "$(helm_root "$n")" "$CHART_ROOT"
    kubectl label node "$n" "$GPU_LABEL=true" --overwrite >/dev/null
    progress "$n: mock driver root $(helm_root "$n") (profile $profile) at $CHART_ROOT in the node's" \
      "mount namespace; label $GPU_LABEL=true"
  done
  progress "nodes prepared in $(elapsed "$t")"
}

# Nodes with anything of prepare-nodes left: a mock root or the label (running or not).
prepared_nodes() {
  local p
  for p in "$NODE_STATE_ROOT/$NODE_PREFIX"-*/helm-driver-root; do
    [[ -e $p ]] && basename "$(dirname "$p")"
  done
  if component_healthy kube-apiserver 2>/dev/null; then
    kubectl get nodes -l "$GPU_LABEL" -o jsonpath='{.items[*].metadata.name}' 2>/dev/null | tr ' ' '\n'
  fi
}

cmd_unprepare_nodes() {
  local n nodes=$1
  [[ -n $nodes ]] || nodes=$(prepared_nodes | grep . | sort -u -t- -k3n || true)
  for n in ${nodes//,/ }; do
    kubectl label node "$n" "$GPU_LABEL-" >/dev/null 2>&1 || true
    if [[ -e $(node_mntns "$n") ]]; then
      ! is_mount "$n" "$CHART_ROOT" || in_node "$n" umount "$CHART_ROOT"
      ! is_mount "$n" "${CHART_ROOT%/*}" || in_node "$n" umount "${CHART_ROOT%/*}"
    fi
    rm -rf "$(helm_root "$n")"
    progress "$n: label, mounts and mock driver root of the Helm install removed"
  done
  # Only when no node has a root any more: removing a folder that is a mount point in another
  # node's namespace would detach that node's mount.
  if ! compgen -G "$NODE_STATE_ROOT/$NODE_PREFIX-*/helm-driver-root" >/dev/null; then
    rmdir "$CHART_ROOT" "${CHART_ROOT%/*}" 2>/dev/null || true
  fi
}

# Prints the pods' state, the namespace's warning events (a failed mount or probe names the cause
# there), the pods' description and log tails, then exits non-zero.
fail_install() {
  printf '[cluster] error: %s\n' "$*" >&2
  plugin_pods -o wide >&2 || true
  kubectl -n "$NAMESPACE" get events --field-selector type=Warning --sort-by=.lastTimestamp \
    -o custom-columns=LAST:.lastTimestamp,COUNT:.count,OBJECT:.involvedObject.name,REASON:.reason,MESSAGE:.message \
    2>/dev/null | tail -n 20 >&2 || true
  kubectl -n "$NAMESPACE" describe pods -l "$PLUGIN_SELECTOR" 2>/dev/null | tail -n 40 >&2 || true
  kubectl -n "$NAMESPACE" logs -l "$PLUGIN_SELECTOR" --all-containers --prefix --tail 20 >&2 || true
  exit 1
}

cmd_install() {
  local t=$EPOCHREALTIME ds n nodes deadline out helm_cmd
  [[ -x $HELM ]] || die "helm-driver: no helm at $HELM; build it: hack/cluster/build.sh helm"
  component_healthy kube-apiserver || die "helm-driver: the control plane is not up: hack/cluster/up.sh --nodes N"
  nodes=$(kubectl get nodes -l "$GPU_LABEL=true" -o jsonpath='{.items[*].metadata.name}')
  [[ -n $nodes ]] || die "helm-driver: no node has the label $GPU_LABEL=true; run $0 prepare-nodes first"
  "$HACK_CLUSTER_DIR/driver-image.sh" import
  # A `helm uninstall` whose pre-delete hook failed (docs/helm.md "Uninstall with ComputeDomains
  # left") leaves the release `uninstalling`, which `helm upgrade` refuses; finish it first.
  if [[ $(helm -n "$NAMESPACE" status "$RELEASE" -o json 2>/dev/null | jq -r '.info.status // empty') == uninstalling ]]; then
    progress "release $RELEASE is left uninstalling (a failed pre-delete hook?); finishing the uninstall first"
    helm -n "$NAMESPACE" uninstall "$RELEASE" --wait --timeout 5m ||
      die "helm-driver: finishing the uninstall of $RELEASE failed; see kubectl -n $NAMESPACE logs job/$RELEASE-uninstall-cleanup"
  fi
  # Helm installs crds/ with a release's first install only and never upgrades them; an operator
  # applies them on every chart upgrade, and so does this.
  kubectl apply --server-side --force-conflicts --field-manager=helm-driver -f "$REPO_ROOT/$CHART/crds" >/dev/null ||
    die "helm-driver: applying the chart's CRDs ($CHART/crds) failed"

  helm_cmd=("$HELM" --kubeconfig "$KUBECONFIG_PATH" upgrade --install "$RELEASE" "$CHART"
    --namespace "$NAMESPACE" --create-namespace --values "$VALUES" "${HELM_ARGS[@]}")
  printf '$ cd %s && %s\n' "$REPO_ROOT" "$(printf '%q ' "${helm_cmd[@]}" | sed 's/ $//')"
  out=$(cd "$REPO_ROOT" && "${helm_cmd[@]}" 2>&1) || { printf '%s\n' "$out" >&2; die "helm-driver: helm upgrade --install failed"; }
  printf '%s\n' "$out" | sed 's/^/    /'

  # Rolled out = every scheduled pod is updated and Ready: the init step found the driver and the
  # startup probe (gRPC: the plugin's own sockets answer and the kubelet registered it) passed.
  ds=$(kubectl -n "$NAMESPACE" get daemonsets -l "app.kubernetes.io/instance=$RELEASE" -o json | jq -r '.items[] |
    select(.spec.template.metadata.labels["dra-driver-nvidia-gpu-component"] == "kubelet-plugin") |
    "daemonset/\(.metadata.name)"')
  [[ -n $ds ]] || fail_install "the release has no kubelet-plugin DaemonSet (pod label $PLUGIN_SELECTOR)"
  kubectl -n "$NAMESPACE" rollout status "$ds" --timeout="${WAIT_TIMEOUT}s" >/dev/null ||
    fail_install "$ds not rolled out within ${WAIT_TIMEOUT}s"
  deadline=$((SECONDS + WAIT_TIMEOUT))
  # A surge rollout (the chart's default on 1.36, docs/helm.md "Rolling updates of the kubelet
  # plugins") is rolled out once every node's new pod is Ready; the old pods are stopped after
  # that. Wait until they are gone, so that every node has one plugin pod when this returns.
  until [[ $(kubectl -n "$NAMESPACE" get "$ds" -o jsonpath='{.status.desiredNumberScheduled}') == \
    "$(plugin_pods -o name | grep -c .)" ]]; do
    ((SECONDS < deadline)) || fail_install "the old plugin pods of $ds did not stop within ${WAIT_TIMEOUT}s"
    sleep 0.5
  done
  for n in $nodes; do
    until (($(slice_devices "$n") > 0)); do
      ((SECONDS < deadline)) || fail_install "$n published no $DRIVER devices within ${WAIT_TIMEOUT}s"
      sleep 0.5
    done
  done
  progress "release $RELEASE in $NAMESPACE: revision $(helm -n "$NAMESPACE" status "$RELEASE" -o json |
    jq -r '"\(.version) \(.info.status)"'), $(plugin_pods --no-headers | wc -l) plugin pod(s) Ready;" \
    "devices: $(for n in $nodes; do printf '%s=%s ' "$n" "$(slice_devices "$n")"; done)in $(elapsed "$t")"
}

cmd_uninstall() {
  local t=$EPOCHREALTIME
  [[ -x $HELM ]] || die "helm-driver: no helm at $HELM; build it: hack/cluster/build.sh helm"
  if [[ -n $(helm -n "$NAMESPACE" list -q --filter "^$RELEASE\$" 2>/dev/null) ]]; then
    printf '$ %s\n' "$(printf '%q ' "$HELM" --kubeconfig "$KUBECONFIG_PATH" -n "$NAMESPACE" uninstall \
      "$RELEASE" --wait --timeout 2m | sed 's/ $//')"
    helm -n "$NAMESPACE" uninstall "$RELEASE" --wait --timeout 2m
  else
    progress "no release $RELEASE in $NAMESPACE"
  fi
  kubectl delete namespace "$NAMESPACE" --ignore-not-found --wait=true --timeout=60s >/dev/null
  # The kubelet removes the slices of an unregistered driver after 30 s; a following install
  # should not meet them.
  kubectl delete resourceslices --field-selector "spec.driver=$DRIVER" >/dev/null 2>&1 || true
  progress "uninstalled in $(elapsed "$t")"
}

cmd_status() {
  local n
  if [[ ! -x $HELM ]]; then echo "helm: not built ($HELM)"; return 0; fi
  helm -n "$NAMESPACE" list --filter "^$RELEASE\$"
  plugin_pods -o wide 2>/dev/null || true
  for n in $(running_nodes); do
    printf '%s: label %s=%s, %s devices published\n' "$n" "$GPU_LABEL" \
      "$(kubectl get node "$n" -o jsonpath="{.metadata.labels.${GPU_LABEL//./\\.}}" 2>/dev/null)" \
      "$(slice_devices "$n")"
  done
}

cmd_logs() {
  local pods
  if [[ -n $LOG_NODE ]]; then
    pods=$(plugin_pods -o name --field-selector "spec.nodeName=$LOG_NODE")
  else
    pods=$(plugin_pods -o name)
  fi
  [[ -n $pods ]] || { echo "no plugin pod in $NAMESPACE${LOG_NODE:+ on $LOG_NODE}"; return 0; }
  for p in $pods; do
    echo "--- kubectl -n $NAMESPACE logs $p -c gpus --tail $LOG_TAIL"
    kubectl -n "$NAMESPACE" logs "$p" -c gpus --tail "$LOG_TAIL" || true
  done
}

main() {
  local cmd=${1:-} nodes=
  PROFILES=() HELM_ARGS=() LOG_NODE='' LOG_TAIL=20
  (($#)) && shift
  while (($#)); do
    case $1 in
      --nodes) nodes=${2:?--nodes needs a value}; shift 2 ;;
      --profile) PROFILES+=("${2:?--profile needs a value}"); shift 2 ;;
      --release) RELEASE=${2:?--release needs a value}; shift 2 ;;
      --namespace) NAMESPACE=${2:?--namespace needs a value}; shift 2 ;;
      --node) LOG_NODE=${2:?--node needs a value}; shift 2 ;;
      --tail) LOG_TAIL=${2:?--tail needs a value}; shift 2 ;;
      *) [[ $cmd == install ]] || die "usage: $0 prepare-nodes [--profile P|NODE=P]... [--nodes NODES]" \
           "| install [--release R] [--namespace NS] [helm args...] | uninstall [--release R] [--namespace NS]" \
           "| unprepare-nodes [--nodes NODES] | status | logs [--node NODE] [--tail N]"
         HELM_ARGS+=("$1"); shift ;;
    esac
  done
  case $cmd in
    prepare-nodes) cmd_prepare_nodes "$nodes" ;;
    unprepare-nodes) cmd_unprepare_nodes "$nodes" ;;
    install) cmd_install ;;
    uninstall) cmd_uninstall ;;
    status) cmd_status ;;
    logs) cmd_logs ;;
    *) die "usage: $0 prepare-nodes | install | uninstall | unprepare-nodes | status | logs (see the header)" ;;
  esac
}

main "$@"
