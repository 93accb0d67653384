#!/usr/bin/env bash
# The README's first command: installs what is needed, builds, starts a local cluster with one node
# that has eight mock H100 GPUs and three GB200 nodes of one NVLink clique, installs the driver on
# them the way operators do (`helm upgrade --install` of deployments/helm/dra-driver-nvidia-gpu
# into nvidia-dra-driver-gpu, with the locally built image; hack/cluster/helm-driver.sh), runs the
# public driver's quickstart workloads (demo/specs/quickstart/gpu-test1..3 on the H100 node, the
# ComputeDomain examples imex-test1..2 on the GB200 nodes) and prints what each pod sees and the
# ComputeDomains' status. Idempotent: a second run reuses the builds, the cluster, the release and
# the pods.
#   hack/demo.sh          bring everything up and print the demo output
#   hack/demo.sh --down   delete the demo workloads, uninstall the release, stop the cluster
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source hack/cluster/lib.sh
export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=true

SPECS=(gpu-test1 gpu-test2 gpu-test3 imex-test1 imex-test2)
NODE=dra-node-1
PROFILE=h100-8x
# Nodes 2..4: GB200 compute trays (multi-node NVLink fabric, one clique) for the ComputeDomains.
CD_NODES=(dra-node-2 dra-node-3 dra-node-4)
CD_PROFILE=gb200-4x
RELEASE=dra-driver-nvidia-gpu
HELM_NS=nvidia-dra-driver-gpu
export DRA_HELM_RELEASE=$RELEASE DRA_HELM_NAMESPACE=$HELM_NS
start=$SECONDS

step() { printf '\n[demo %s] == %s\n' "$(date +%H:%M:%S)" "$*"; }
kubectl() { "$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_PATH" --request-timeout=20s "$@"; }
fail() { printf '[demo] error: %s\n' "$*" >&2; exit 1; }

# The demo's namespaces go first, while the API server is up and the driver runs (it unprepares
# the claims), so that a later demo starts from fresh claims; then the release (helm uninstall) and
# the node preparation; then down.sh stops nodes and the control plane and checks nothing is left.
demo_down() {
  if component_pid kube-apiserver >/dev/null 2>&1 && component_healthy kube-apiserver; then
    step "deleting the demo namespaces ${SPECS[*]}"
    kubectl delete namespace "${SPECS[@]}" --ignore-not-found --wait=true --timeout=60s
    step "uninstalling the driver (release $RELEASE in $HELM_NS)"
    hack/cluster/helm-driver.sh uninstall || printf '[demo] the uninstall failed; stopping the cluster anyway\n' >&2
    hack/cluster/helm-driver.sh unprepare-nodes || true
  fi
  step "stopping the cluster"
  exec hack/cluster/down.sh
}

# Everything is cached: Kubernetes, containerd and Helm by build.sh, the C++ tree by CMake/ninja,
# the image by driver-image.sh (its archive name is a hash of its inputs). Only the targets the demo
# needs are built, not the whole tree with its tests: the image's two binaries (the image holds the
# webhook too, although these values do not enable it) and the mock driver's files.
build() {
  step "dependencies"
  hack/install-deps.sh
  step "Kubernetes $K8S_VERSION, etcd, containerd, Helm $HELM_VERSION (cached in $DRA_CACHE_DIR)"
  hack/cluster/build.sh
  step "C++ build: the image's five binaries, mock libnvidia-ml.so.1, fake nvidia-smi, MPS control and IMEX"
  cmake --preset default >/dev/null
  cmake --build --preset default --target gpu-kubelet-plugin webhook compute-domain-kubelet-plugin \
    compute-domain-controller compute-domain-daemon mock_nvml nvidia_smi nvidia_cuda_mps_control \
    fake_nvidia_imex fake_nvidia_imex_ctl
  step "driver image (hack/cluster/driver-image.sh)"
  hack/cluster/driver-image.sh build
}

start_cluster() {
  step "local cluster: control plane and four nodes ($NODE, ${CD_NODES[*]})"
  hack/cluster/up.sh --nodes 4
  step "preparing the nodes as an operator would: mock driver roots ($NODE: $PROFILE, ${CD_NODES[*]}: $CD_PROFILE) at /run/nvidia/driver, label nvidia.com/gpu.present=true"
  local n profiles=(--profile "$NODE=$PROFILE")
  for n in "${CD_NODES[@]}"; do profiles+=(--profile "$n=$CD_PROFILE"); done
  hack/cluster/helm-driver.sh prepare-nodes "${profiles[@]}" --nodes "$NODE ${CD_NODES[*]}"
  step "GPU driver: helm upgrade --install $RELEASE into $HELM_NS with the local image"
  hack/cluster/helm-driver.sh install
  step "what the driver publishes (kubectl get resourceslices)"
  kubectl get resourceslices -o json --field-selector "spec.nodeName=$NODE,spec.driver=gpu.nvidia.com" |
    jq -r '["DEVICE", "PRODUCT", "UUID", "MEMORY"], (.items[].spec.devices[] | [.name,
      .attributes.productName.string, .attributes.uuid.string, .capacity.memory.value]) | @tsv' |
    awk -F'\t' '{ printf "    %-8s %-24s %-42s %s\n", $1, $2, $3, $4 }'
}

# Fails with the pods' state, their events and the log tail of the plugin pod on the node.
fail_spec() {
  local ns=$1
  kubectl -n "$ns" get pods,resourceclaims -o wide >&2 || true
  kubectl -n "$ns" get events --sort-by=.lastTimestamp 2>/dev/null | tail -n 10 >&2 || true
  hack/cluster/helm-driver.sh logs --node "$NODE" --tail 20 >&2 || true
  fail "$ns: $2"
}

# Waits until every container of the pod has printed its `nvidia-smi -L` (Ready means started).
wait_logs() {
  local ns=$1 pod=$2 ctr deadline=$((SECONDS + WAIT_TIMEOUT))
  for ctr in $(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.spec.containers[*].name}'); do
    until [[ -n $(kubectl -n "$ns" logs "$pod" -c "$ctr" 2>/dev/null) ]]; do
      ((SECONDS < deadline)) || fail_spec "$ns" "pod $pod container $ctr printed nothing in ${WAIT_TIMEOUT}s"
      sleep 0.3
    done
  done
}

run_spec() {
  local ns=$1 file=demo/specs/quickstart/$1.yaml pod ctr
  step "$ns: $(sed -n '1,2s/^# //p' "$file" | paste -sd ';' | sed 's/;/; /')"
  kubectl apply -f "$file"
  local d
  for d in $(kubectl -n "$ns" get deployments -o name); do
    kubectl -n "$ns" rollout status "$d" --timeout="${WAIT_TIMEOUT}s" >/dev/null ||
      fail_spec "$ns" "$d not rolled out within ${WAIT_TIMEOUT}s"
  done
  kubectl -n "$ns" wait --for=condition=Ready pod --all --timeout="${WAIT_TIMEOUT}s" >/dev/null ||
    fail_spec "$ns" "pods not Ready within ${WAIT_TIMEOUT}s"
  for pod in $(kubectl -n "$ns" get pods -o jsonpath='{.items[*].metadata.name}'); do
    wait_logs "$ns" "$pod"
    for ctr in $(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.spec.containers[*].name}'); do
      echo "\$ kubectl -n $ns logs $pod -c $ctr"
      kubectl -n "$ns" logs "$pod" -c "$ctr" | sed 's/^/    /'
    done
  done
  if [[ -n $(kubectl -n "$ns" get computedomains -o name 2>/dev/null) ]]; then
    echo "\$ kubectl -n $ns get computedomains"
    kubectl -n "$ns" get computedomains -o custom-columns='NAME:.metadata.name,STATUS:.status.status,NODES:.status.nodes[*].name,CLIQUE:.status.nodes[0].cliqueID' |
      sed 's/^/    /'
  fi
  echo "\$ kubectl -n $ns get resourceclaims"
  kubectl -n "$ns" get resourceclaims -o custom-columns='CLAIM:.metadata.name,DEVICES:.status.allocation.devices.results[*].device,RESERVED FOR:.status.reservedFor[*].name' |
    sed 's/^/    /'
}

main() {
  case ${1:-} in
    --down) demo_down ;;
    "") ;;
    *) fail "usage: $0 [--down]" ;;
  esac
  build
  start_cluster
  local s
  for s in "${SPECS[@]}"; do run_spec "$s"; done
  step "done in $((SECONDS - start))s. Try: export KUBECONFIG=$KUBECONFIG_PATH; kubectl get pods -A;" \
    "hack/cluster/helm-driver.sh status. Stop everything with: hack/demo.sh --down"
}

main "$@"
