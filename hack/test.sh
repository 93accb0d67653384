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
    ctest --test-dir build/asan -L unit --output-on-failure -j "$JOBS" | tail -n 3
fi

step "C++ build (default preset)"
cmake --preset default >/dev/null
cmake --build --preset default -j "$JOBS"

step "local control plane"
started_cluster=0
if ! hack/cluster/status.sh >/dev/null 2>&1; then
  started_cluster=1
fi
hack/cluster/up.sh
cleanup() {
  if [[ $started_cluster == 1 && ${DRA_KEEP_CLUSTER:-0} != 1 ]]; then
    step "stopping the local control plane"
    hack/cluster/down.sh || true
  fi
}
trap cleanup EXIT

step "unit and integration tests"
export DRA_CLUSTER_DIR=$CLUSTER_DIR
# Integration tests are RUN_SERIAL (they share one API server); unit tests run in parallel.
ctest --test-dir build/default --output-on-failure -j "$JOBS"

step "done in $((SECONDS - start))s"
