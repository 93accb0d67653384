#!/usr/bin/env bash
# Runs bench/podstart (podstart_bench.cc) against the local cluster with the Helm-installed driver
# (as test/e2e/run.sh leaves it: node 1 with eight mock H100s). Build it first:
#   flock /tmp/dra-build.lock cmake --build build/default --target podstart_bench
#   flock /tmp/dra-e2e.lock bench/podstart/run.sh [--pods 20] [--node NODE]
# Extra arguments go to the program (podstart_bench.cc lists them).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$ROOT/hack/cluster/lib.sh"
source "$CLUSTER_DIR/nodes.env"
BIN=${PODSTART_BENCH:-$ROOT/build/default/bench/podstart/podstart_bench}
[[ -x $BIN ]] || die "podstart: $BIN is not built (cmake --build build/default --target podstart_bench)"
exec "$BIN" --kubeconfig "$KUBECONFIG_PATH" --node "$DRA_NODE_1_NAME" --image "$WORKLOAD_IMAGE" \
  --driver-namespace "${DRA_HELM_NAMESPACE:-nvidia-dra-driver-gpu}" "$@"
