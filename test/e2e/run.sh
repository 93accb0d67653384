#!/usr/bin/env bash
# Runs the e2e scenarios (test/e2e/*.bats, or the files given) against the local cluster and nodes,
# which must already be up:   hack/cluster/up.sh --nodes 2 && test/e2e/run.sh
# It installs (or keeps) the driver with Helm first (hack/cluster/helm-driver.sh).
# Prints TAP, then one summary line "e2e: N passed, N failed, N skipped"; exits non-zero on any
# failure. Needs root (mknod, nsenter into the nodes' mount namespaces).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$ROOT/hack/cluster/lib.sh"

{ "$ROOT/hack/cluster/status.sh" >/dev/null 2>&1 && [[ -s $CLUSTER_DIR/nodes.env ]]; } || {
  "$ROOT/hack/cluster/status.sh" >&2 || true
  die "e2e: the cluster and its nodes must be up first: hack/cluster/up.sh --nodes 2"
}
# The scenarios run against the driver installed the way operators install it: the Helm chart
# with the locally built image (hack/cluster/helm-driver.sh, docs/helm.md). Node 1 serves eight
# mock H100s, node 2 MIG-partitioned A100s; hack/cluster/helm-values.yaml enables time-slicing
# (gpu_sharing.bats). Both steps are idempotent: with the release already installed with these
# values, nothing is restarted. helm_install.bats runs last: it ends with `helm uninstall`.
export DRA_HELM_RELEASE=${DRA_HELM_RELEASE:-dra-driver-nvidia-gpu}
export DRA_HELM_NAMESPACE=${DRA_HELM_NAMESPACE:-nvidia-dra-driver-gpu}
if (($# == 0)); then
  for f in "$ROOT"/test/e2e/*.bats; do [[ $f == */helm_install.bats ]] || set -- "$@" "$f"; done
  set -- "$@" "$ROOT/test/e2e/helm_install.bats"
fi
"$ROOT/hack/cluster/helm-driver.sh" prepare-nodes --profile h100-8x \
  --profile "${NODE_PREFIX:-dra-node}-2=a100-mig-4x" ||
  die "e2e: preparing the nodes for the driver failed (hack/cluster/helm-driver.sh prepare-nodes)"
"$ROOT/hack/cluster/helm-driver.sh" install ||
  die "e2e: the driver did not install (hack/cluster/helm-driver.sh install)"

# The demo's workloads (hack/demo.sh) hold GPUs the scenarios count on, and helm_install.bats ends
# with `helm uninstall`, which would leave them without their driver: they go first, once the
# driver runs (it unprepares their claims).
demo_ns=$("$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_PATH" get namespaces -o name 2>/dev/null |
  grep -oE '(gpu|imex)-test[0-9]+$' | xargs) || true
if [[ -n $demo_ns ]]; then
  echo "[e2e] deleting the demo's namespaces first (hack/demo.sh runs them again): $demo_ns"
  # shellcheck disable=SC2086 # one name per word
  "$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_PATH" delete namespace $demo_ns --wait=true --timeout=90s >/dev/null ||
    die "e2e: the demo's namespaces ($demo_ns) did not go; run hack/demo.sh --down first"
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
# -T: each result line ends in "in <N>ms"; the slowest are listed below the results.
bats --tap -T "$@" | tee "$out" || rc=$?
echo "[e2e] the slowest scenarios:"
# awk reads to the end (NR <= 10, not head): under pipefail, head's early exit could SIGPIPE sort
# and end this script with 141 before the summary line.
sed -nE 's/^(not )?ok [0-9]+ (.*) in ([0-9]+)ms.*/\3 \2/p' "$out" | sort -rn |
  awk 'NR <= 10 { t = $1; $1 = ""; printf "  %6.1fs %s\n", t / 1000, substr($0, 2, 110) }'
passed=$(grep -Ec '^ok [0-9]+ ' "$out" || true)
skipped=$(grep -Ec '^ok [0-9]+ .*# skip' "$out" || true)
failed=$(grep -Ec '^not ok ' "$out" || true)
echo "e2e: $((passed - skipped)) passed, $failed failed, $skipped skipped"
exit "$rc"
