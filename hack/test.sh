#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs dependencies, builds Kubernetes (cached) and
# the C++ tree, runs the unit tests under ASan+UBSan, the static checks (clang -Wthread-safety,
# clang-tidy: hack/static-checks.sh), runs every libFuzzer target briefly (hack/fuzz.sh), starts
# the local cluster, and runs unit and integration tests against it in one ctest run, then the
# end-to-end scenarios. Exits non-zero on any failure. The last line counts every result:
# `all: N passed, N failed, N skipped`.
#
#   --fresh  Run as on a new machine. Every cache the suite fills (Kubernetes/etcd/containerd
#            binaries and images, the Go module and build caches, ccache) and all cluster and node
#            state live under one new folder instead of their usual places, so nothing an earlier
#            run left on this machine is reused, and nothing of it is moved or changed. A local
#            cluster already running on the default ports is stopped first (its state stays). The
#            folder is removed at the end (DRA_KEEP_FRESH=1 keeps it). Needs a checkout without
#            build/, i.e. a fresh clone:
#              git clone . /tmp/dra-fresh-clone && /tmp/dra-fresh-clone/hack/test.sh --fresh
#
# Environment: DRA_TEST_ASAN=0 skips the sanitizer build, DRA_TEST_STATIC=0 the static checks,
# DRA_TEST_FUZZ=0 the fuzzing (DRA_TEST_FUZZ_SECONDS per target, default 10);
# DRA_TEST_CLUSTER_LOCK=<file> takes a flock on <file> before the cluster steps;
# DRA_KEEP_CLUSTER=1 leaves a cluster that this script started running afterwards.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

fresh=0
case ${1:-} in
  --fresh) fresh=1 ;;
  "") ;;
  -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: $0 [--fresh]" >&2; exit 2 ;;
esac

current_step="start"
step() {
  current_step=$*
  printf '\n[test %s] == %s\n' "$(date +%H:%M:%S)" "$*"
}
start=$SECONDS
finished=0 a_passed=0 a_failed=0 a_skipped=0 c_passed=0 c_failed=0 c_skipped=0
s_passed=0 s_failed=0 s_skipped=0 f_passed=0 f_failed=0 f_skipped=0

# --fresh: point every cache and state location at a new folder before lib.sh reads them.
FRESH_ROOT= FRESH_RUN=
if ((fresh)); then
  [[ ! -e build ]] || {
    echo "[test] error: --fresh needs a checkout without build/ (a fresh clone), and $ROOT/build exists;" \
      "run: git clone $ROOT /tmp/dra-fresh-clone && /tmp/dra-fresh-clone/hack/test.sh --fresh" >&2
    exit 2
  }
  # Also a half-running one: its processes would hold the ports, node addresses and bridges that
  # do not move with the folders. down.sh is idempotent.
  step "--fresh: stopping any local cluster on the default ports (its state is kept)"
  hack/cluster/down.sh
  FRESH_ROOT=$(mktemp -d /var/tmp/dra-fresh.XXXXXX)
  # Node runtime state (sockets, mount namespace pins) stays on a tmpfs, as /run/dra-nodes is.
  FRESH_RUN=$(mktemp -d /run/dra-fresh.XXXXXX)
  export DRA_CACHE_DIR=$FRESH_ROOT/dra-cache DRA_CLUSTER_DIR=$FRESH_ROOT/cluster
  export DRA_NODE_STATE_ROOT=$FRESH_ROOT/nodes DRA_NODE_RUN_ROOT=$FRESH_RUN/nodes
  export CCACHE_DIR=$FRESH_ROOT/ccache GOCACHE=$FRESH_ROOT/go-build GOMODCACHE=$FRESH_ROOT/go-mod
  step "--fresh: caches and state under $FRESH_ROOT and $FRESH_RUN"
fi

source hack/cluster/lib.sh
# ccache keys use paths relative to the checkout, so every clone (CI's included) shares the cache.
export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=true
JOBS=${DRA_BUILD_JOBS:-$(nproc)}

asan_log=$(mktemp) ctest_log=$(mktemp) e2e_log=$(mktemp) static_log=$(mktemp) fuzz_log=$(mktemp)
started_cluster=0
rc=0

remove_fresh_root() {
  [[ -n $FRESH_ROOT ]] || return 0
  if [[ ${DRA_KEEP_FRESH:-0} == 1 ]]; then
    step "--fresh: kept $FRESH_ROOT and $FRESH_RUN (DRA_KEEP_FRESH=1)"
    return 0
  fi
  # Never delete through a mount that a node left behind: that would reach into what it shows.
  if findmnt -rn -o TARGET | grep -qE "^($FRESH_ROOT|$FRESH_RUN)(/|$)"; then
    step "--fresh: something is still mounted under $FRESH_ROOT or $FRESH_RUN; left in place"
    return 0
  fi
  chmod -R u+w "$FRESH_ROOT" 2>/dev/null || true # the Go module cache is read-only
  rm -rf "$FRESH_ROOT" "$FRESH_RUN"
  step "--fresh: removed $FRESH_ROOT and $FRESH_RUN"
}
cleanup() {
  local code=$?
  if ((!finished)); then
    # A step died under `set -e` before the results were counted: say so in the closing line too.
    echo "[test] error: stopped with exit code $code during: $current_step" >&2
    echo "all: $((a_passed + s_passed + f_passed + c_passed)) passed, $((a_failed + s_failed + f_failed + c_failed + 1)) failed," \
      "$((a_skipped + s_skipped + f_skipped + c_skipped)) skipped"
  fi
  if [[ $started_cluster == 1 && ${DRA_KEEP_CLUSTER:-0} == 1 ]]; then
    [[ -z $FRESH_ROOT ]] || step "--fresh: the cluster still runs from $FRESH_ROOT (DRA_KEEP_CLUSTER=1)"
  else
    if [[ $started_cluster == 1 ]]; then
      step "stopping the local control plane"
      hack/cluster/down.sh || true
    fi
    remove_fresh_root
  fi
  rm -f "$asan_log" "$ctest_log" "$e2e_log" "$static_log" "$fuzz_log"
}
trap cleanup EXIT

# ctest's per-test "Start"/"Passed" lines are dropped; failures with their output, the summary and
# the list of failed tests stay.
quiet_ctest() { grep -vE '^ *(Start +[0-9]+: |[0-9]+/[0-9]+ Test +#[0-9]+: .* +Passed +[0-9.]+ sec$)' || true; }

# Prints "passed failed skipped" for one ctest log. A log without ctest's summary line (the run
# died, or never started) counts as one failure, so a broken step can never read as success.
ctest_counts() {
  local summary failed total skipped
  summary=$(sed -nE 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1 \2/p' "$1" | tail -n 1)
  if [[ -z $summary ]]; then
    echo "0 1 0"
    return
  fi
  read -r failed total <<<"$summary"
  # ctest counts a skipped test as "not failed"; it is listed as skipped, never as passed.
  skipped=$(grep -cE '^[[:space:]]+[0-9]+ - .* \(Skipped\)$' "$1" || true)
  echo "$((total - failed - skipped)) $failed $skipped"
}

# Prints "passed failed skipped" from the e2e runner's summary line (one failure when it is missing).
e2e_counts() {
  local line
  line=$(sed -nE 's/^e2e: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\1 \2 \3/p' "$1" |
    tail -n 1)
  echo "${line:-0 1 0}"
}

step "dependencies"
hack/install-deps.sh

step "Kubernetes, etcd, containerd and helm (cached in $DRA_CACHE_DIR)"
hack/cluster/build.sh

if [[ ${DRA_TEST_ASAN:-1} != 0 ]]; then
  step "C++ build and unit tests with AddressSanitizer + UndefinedBehaviorSanitizer"
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$JOBS"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build/asan -L unit --output-on-failure -j "$JOBS" 2>&1 | tee "$asan_log" |
    quiet_ctest || rc=1
  read -r a_passed a_failed a_skipped < <(ctest_counts "$asan_log")
  echo "asan-unit: $a_passed passed, $a_failed failed, $a_skipped skipped"
fi

step "C++ build (default preset)"
cmake --preset default >/dev/null
cmake --build --preset default -j "$JOBS"

if [[ ${DRA_TEST_STATIC:-1} != 0 ]]; then
  step "static checks: clang with -Wthread-safety, clang-tidy (hack/static-checks.sh)"
  hack/static-checks.sh -j "$JOBS" 2>&1 | tee "$static_log" || rc=1
  # A missing summary line (the script died) counts as one failure.
  read -r s_passed s_failed s_skipped < <(sed -nE 's/^static: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\1 \2 \3/p' \
    "$static_log" | tail -n 1 | grep . || echo "0 1 0")
  echo "static: $s_passed passed, $s_failed failed, $s_skipped skipped"
fi

if [[ ${DRA_TEST_FUZZ:-1} != 0 ]]; then
  step "fuzzing: every libFuzzer target for ${DRA_TEST_FUZZ_SECONDS:-10}s (hack/fuzz.sh)"
  hack/fuzz.sh "${DRA_TEST_FUZZ_SECONDS:-10}" 2>&1 | tee "$fuzz_log" || rc=1
  read -r f_passed f_failed f_skipped < <(sed -nE 's/^fuzz: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\1 \2 \3/p' \
    "$fuzz_log" | tail -n 1 | grep . || echo "0 1 0")
fi

step "local control plane"
# A developer's machine may share its cluster with long runs (docs/development.md): with
# DRA_TEST_CLUSTER_LOCK=<file> the cluster steps wait for a flock on that file first.
if [[ -n ${DRA_TEST_CLUSTER_LOCK:-} ]]; then
  exec 8>"$DRA_TEST_CLUSTER_LOCK"
  echo "waiting for the cluster lock $DRA_TEST_CLUSTER_LOCK"
  flock 8
fi
if ! hack/cluster/status.sh >/dev/null 2>&1; then
  started_cluster=1
fi
hack/cluster/up.sh --nodes 2

export DRA_CLUSTER_DIR=$CLUSTER_DIR

step "unit and integration tests"
# Integration tests are RUN_SERIAL (they share one API server); unit tests run in parallel.
ctest --test-dir build/default --output-on-failure -j "$JOBS" 2>&1 | tee "$ctest_log" || rc=1

step "end-to-end scenarios on the local nodes"
test/e2e/run.sh 2>&1 | tee "$e2e_log" || rc=1

read -r c_passed c_failed c_skipped < <(ctest_counts "$ctest_log")
read -r e_passed e_failed e_skipped < <(e2e_counts "$e2e_log")
failed=$((a_failed + s_failed + f_failed + c_failed + e_failed))
((failed == 0)) || rc=1
finished=1
step "done in $((SECONDS - start))s"
echo "asan-unit: $a_passed passed, $a_failed failed, $a_skipped skipped"
echo "static: $s_passed passed, $s_failed failed, $s_skipped skipped"
echo "fuzz: $f_passed passed, $f_failed failed, $f_skipped skipped"
echo "ctest: $c_passed passed, $c_failed failed, $c_skipped skipped"
echo "e2e: $e_passed passed, $e_failed failed, $e_skipped skipped"
echo "all: $((a_passed + s_passed + f_passed + c_passed + e_passed)) passed, $failed failed," \
  "$((a_skipped + s_skipped + f_skipped + c_skipped + e_skipped)) skipped"
exit "$rc"
