#!/usr/bin/env bash
# The README's first command: installs what is needed, builds, starts the local cluster and shows
# what it serves. Idempotent; a second run reuses every cached build and the running cluster.
#   hack/demo.sh          bring everything up and print the demo output
#   hack/demo.sh --down   stop the demo cluster
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source hack/cluster/lib.sh

if [[ ${1:-} == --down ]]; then
  exec hack/cluster/down.sh
fi

step() { printf '\n[demo %s] == %s\n' "$(date +%H:%M:%S)" "$*"; }
start=$SECONDS

step "dependencies"
hack/install-deps.sh
step "Kubernetes $K8S_VERSION and etcd (cached in $DRA_CACHE_DIR)"
hack/cluster/build.sh
step "C++ build"
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
step "local control plane"
hack/cluster/up.sh

kubectl() { "$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_PATH" "$@"; }
step "kubectl get --raw /readyz"
kubectl get --raw /readyz
echo
step "kubectl api-resources --api-group=resource.k8s.io"
kubectl api-resources --api-group=resource.k8s.io

step "ready in $((SECONDS - start))s; use: export KUBECONFIG=$KUBECONFIG_PATH; stop with: hack/demo.sh --down"
