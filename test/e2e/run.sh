#!/usr/bin/env bash
# Runs the e2e scenarios (test/e2e/*.bats, or the files given) against the local cluster and nodes,
# which must already be up:   hack/cluster/up.sh --nodes 2 && test/e2e/run.sh
# It starts (or keeps) the GPU kubelet plugins on the nodes first (hack/cluster/gpu-plugin.sh).
# Prints TAP, then one summary line "e2e: N passed, N failed, N skipped"; exits non-zero on any
# failure. Needs root (mknod, nsenter into the nodes' mount namespaces).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$ROOT/hack/cluster/lib.sh"

"$ROOT/hack/cluster/status.sh" >/dev/null 2>&1 && [[ -s $CLUSTER_DIR/nodes.env ]] || {
  "$ROOT/hack/cluster/status.sh" >&2 || true
  die "e2e: the cluster and its nodes must be up first: hack/cluster/up.sh --nodes 2"
}
# helm_install.bats replaces the host-process plugins with the Helm-installed driver for its
# duration; it runs last, so that a failure to restore them cannot disturb the other files.
if (($# == 0)); then
  for f in "$ROOT"/test/e2e/*.bats; do [[ $f == */helm_install.bats ]] || set -- "$@" "$f"; done
  set -- "$@" "$ROOT/test/e2e/helm_install.bats"
fi

# The GPU scenarios need the kubelet plugin on the nodes: node 1 with eight mock H100s, node 2
# with MIG-partitioned A100s, time-slicing enabled (gpu_sharing.bats). A no-op in a second when
# they already run with these profiles and gates. helm_install.bats starts them again with the
# same arguments.
export DRA_E2E_GPU_PLUGIN_UP="--profile h100-8x --profile ${NODE_PREFIX:-dra-node}-2=a100-mig-4x
  --feature-gates ${DRA_GPU_PLUGIN_FEATURE_GATES:-TimeSlicingSettings=true}"
# shellcheck disable=SC2086 # the words are gpu-plugin.sh arguments
"$ROOT/hack/cluster/gpu-plugin.sh" up $DRA_E2E_GPU_PLUGIN_UP ||
  die "e2e: the GPU plugins did not start (hack/cluster/gpu-plugin.sh up)"

out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
bats --tap "$@" | tee "$out" || rc=$?
passed=$(grep -Ec '^ok [0-9]+ ' "$out" || true)
skipped=$(grep -Ec '^ok [0-9]+ .*# skip' "$out" || true)
failed=$(grep -Ec '^not ok ' "$out" || true)
echo "e2e: $((passed - skipped)) passed, $failed failed, $skipped skipped"
exit "$rc"
