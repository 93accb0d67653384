#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs dependencies, builds Kubernetes (cached) and
# the C++ tree, runs the unit tests under ASan+UBSan, starts the local cluster, and runs unit and
# integration tests against it in one final ctest run. Exits non-zero on any failure.
#
# Environment: DRA_TEST_ASAN=0 skips the sanitizer build; DRA_KEEP_CLUSTER=1 leaves a cluster that
# this script started running afterwards.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source hack/cluster/lib.sh

# ccache keys use paths relative to the checkout, so every clone (CI's included) shares the cache.
export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=true

step() { printf '\n[test %s] == %s\n' "$(date +%H:%M:%S)" "$*"; }
JOBS=${DRA_BUILD_JOBS:-$(nproc)}
start=$SECONDS

step "dependencies"
hack/install-deps.sh

step "Kubernetes and etcd (cached in $DRA_CACHE_DIR)"
hack/cluster/build.sh

if [[ ${DRA_TEST_ASAN:-1} != 0 ]]; then
  step "C++ build and unit tests with AddressSanitizer + UndefinedBehaviorSanitizer"
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$JOBS"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build/asan -L unit --output-on-failure -j "$JOBS" | tail -n 8
fi

step "C++ build (default preset)"
cmake --preset default >/dev/null
cmake --build --preset default -j "$JOBS"

step "local control plane"
started_cluster=0
if ! hack/cluster/status.sh >/dev/null 2>&1; then
  started_cluster=1
fi
hack/cluster/up.sh --nodes 2
cleanup() {
  if [[ $started_cluster == 1 && ${DRA_KEEP_CLUSTER:-0} != 1 ]]; then
    step "stopping the local control plane"
    hack/cluster/down.sh || true
  fi
}
trap cleanup EXIT

export DRA_CLUSTER_DIR=$CLUSTER_DIR
ctest_log=$(mktemp) e2e_log=$(mktemp)
rc=0

step "unit and integration tests"
# Integration tests are RUN_SERIAL (they share one API server); unit tests run in parallel.
ctest --test-dir build/default --output-on-failure -j "$JOBS" 2>&1 | tee "$ctest_log" || rc=1

step "end-to-end scenarios on the local nodes"
test/e2e/run.sh 2>&1 | tee "$e2e_log" || rc=1

# One closing line for everything: ctest's "N tests failed out of M" plus the e2e summary.
read -r c_failed c_total < <(sed -nE 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1 \2/p' \
  "$ctest_log" | tail -n 1)
read -r e_passed e_failed e_skipped < <(sed -nE \
  's/^e2e: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\1 \2 \3/p' "$e2e_log" | tail -n 1)
# ctest counts a skipped test as "not failed"; list it as skipped, never as passed.
c_skipped=$(grep -cE '^[[:space:]]+[0-9]+ - .* \(Skipped\)$' "$ctest_log" || true)
c_failed=${c_failed:-1} c_total=${c_total:-0} e_passed=${e_passed:-0} e_failed=${e_failed:-1}
rm -f "$ctest_log" "$e2e_log"
step "done in $((SECONDS - start))s"
echo "all: $((c_total - c_failed - c_skipped + e_passed)) passed, $((c_failed + e_failed)) failed, $((c_skipped + ${e_skipped:-0})) skipped"
exit "$rc"
