#!/usr/bin/env bash
# The whole test suite, from a fresh clone. Every run starts from nothing but content-addressed
# caches: a new, empty control plane and new node state (etcd data, kubelet and containerd state,
# CDI and plugin folders, Helm releases, CRDs) under one state folder that is removed at the end,
# whatever the outcome. What it runs, in two lanes that share the machine:
#
#   foreground (normal priority), the critical path:
#     dependencies; Kubernetes, etcd, containerd and helm (hack/cluster/build.sh) beside the
#     `default` build of what the cluster steps need (target cluster-deps: product binaries,
#     hardware doubles, integration tests); the local cluster; the integration tests; the
#     end-to-end scenarios; then, once the background lane is done, the unit tests and fuzzing.
#   background (its own session and autogroup at nice 19, SCHED_IDLE: it only gets CPU the
#     foreground and the cluster leave idle, so the timing of the cluster tests is not disturbed):
#     the `check` build (clang: ASan + UBSan, -Wthread-safety as errors, the libFuzzer targets)
#     and clang-tidy (hack/static-checks.sh).
#
# Afterwards it prints each part's duration, one summary line per part (`unit:`, `static:`,
# `fuzz:`, `integration:`, `e2e:`) and last `all: N passed, N failed, N skipped`. Exits non-zero on
# any failure.
#
#   --fresh  Also every cache (Kubernetes/etcd/containerd/helm binaries and images, the Go module
#            and build caches, ccache, the clang-tidy cache) in a new folder, removed at the end
#            (DRA_KEEP_FRESH=1 keeps it): the timing of a new machine. Needs a checkout without
#            build/, i.e. a fresh clone:
#              git clone . /tmp/dra-fresh-clone && /tmp/dra-fresh-clone/hack/test.sh --fresh
#
# Environment: DRA_TEST_STATIC=0 skips the static checks, DRA_TEST_FUZZ=0 the fuzzing
# (DRA_TEST_FUZZ_SECONDS per target, default 10), DRA_TEST_UNIT=0 the check build's unit tests
# (with DRA_TEST_STATIC=0 too, the check build is skipped); DRA_TEST_STATE_DIR (default
# /var/tmp/dra-test) and DRA_TEST_RUN_DIR (default /run/dra-test, a tmpfs) hold the run's cluster
# and node state; DRA_TEST_CLUSTER_LOCK (default /tmp/dra-e2e.lock, which the soak and the benches
# take too) is flocked for the whole run, since the local cluster's ports are the machine's;
# DRA_KEEP_CLUSTER=1 leaves the cluster running afterwards (and its state folder).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

fresh=0
case ${1:-} in
  --fresh) fresh=1 ;;
  "") ;;
  -h | --help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: $0 [--fresh]" >&2; exit 2 ;;
esac

current_step="start"
step() {
  current_step=$*
  printf '\n[test %s] == %s\n' "$(date +%H:%M:%S)" "$*"
}
start=$SECONDS
# Durations of the parts, in the order they ended: "name seconds".
durations=()
took() { durations+=("$1 $2"); }
finished=0
u_passed=0 u_failed=0 u_skipped=0 i_passed=0 i_failed=0 i_skipped=0
s_passed=0 s_failed=0 s_skipped=0 f_passed=0 f_failed=0 f_skipped=0 e_passed=0 e_failed=0 e_skipped=0

# Whatever a local cluster from the default folders (hack/demo.sh, a developer's up.sh) runs holds
# the ports: stop it. Its state stays where it is, for its owner.
step "stopping any local cluster on the default ports (its state is kept)"
hack/cluster/down.sh

# The one lock for the machine's cluster ports: a second run (or anyone else using the local
# cluster under the same lock) waits instead of stopping this run's cluster.
exec 8>"${DRA_TEST_CLUSTER_LOCK:-/tmp/dra-e2e.lock}"
if ! flock -n 8; then
  echo "[test] waiting for the cluster lock ${DRA_TEST_CLUSTER_LOCK:-/tmp/dra-e2e.lock}"
  flock 8
fi

# --fresh: point every cache at a new folder before lib.sh reads the locations.
FRESH_ROOT=
if ((fresh)); then
  [[ ! -e build ]] || {
    echo "[test] error: --fresh needs a checkout without build/ (a fresh clone), and $ROOT/build exists;" \
      "run: git clone $ROOT /tmp/dra-fresh-clone && /tmp/dra-fresh-clone/hack/test.sh --fresh" >&2
    exit 2
  }
  FRESH_ROOT=$(mktemp -d /var/tmp/dra-fresh.XXXXXX)
  export DRA_CACHE_DIR=$FRESH_ROOT/dra-cache CCACHE_DIR=$FRESH_ROOT/ccache
  export GOCACHE=$FRESH_ROOT/go-build GOMODCACHE=$FRESH_ROOT/go-mod
  step "--fresh: every cache under $FRESH_ROOT"
fi

# The run's state: fixed folders, so that what a killed run left behind is found and removed here
# (its leftover processes name these folders, which down.sh looks for).
STATE_DIR=${DRA_TEST_STATE_DIR:-/var/tmp/dra-test}
RUN_STATE_DIR=${DRA_TEST_RUN_DIR:-/run/dra-test}
export DRA_CLUSTER_DIR=$STATE_DIR/cluster DRA_NODE_STATE_ROOT=$STATE_DIR/nodes
export DRA_NODE_RUN_ROOT=$RUN_STATE_DIR/nodes

# Removes a state folder; never through a mount a node left behind (that would reach into what it
# shows): then it stays, and the run fails.
remove_state() {
  local d
  for d in "$STATE_DIR" "$RUN_STATE_DIR"; do
    [[ -e $d ]] || continue
    if findmnt -rn -o TARGET | grep -qE "^$d(/|$)"; then
      echo "[test] error: something is still mounted under $d; left in place" >&2
      return 1
    fi
    rm -rf "$d"
  done
}
if [[ -e $STATE_DIR || -e $RUN_STATE_DIR ]]; then
  step "removing what an earlier run left in $STATE_DIR and $RUN_STATE_DIR"
  hack/cluster/down.sh
  remove_state
fi
mkdir -p "$STATE_DIR" "$RUN_STATE_DIR"

source hack/cluster/lib.sh
# ccache keys use paths relative to the checkout, so every clone (CI's included) shares the cache.
export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=true
JOBS=${DRA_BUILD_JOBS:-$(nproc)}

logs=$(mktemp -d)
unit_log=$logs/unit ctest_log=$logs/integration e2e_log=$logs/e2e static_log=$logs/static
fuzz_log=$logs/fuzz go_log=$logs/go
bg_pid=
rc=0

remove_fresh_root() {
  [[ -n $FRESH_ROOT ]] || return 0
  if [[ ${DRA_KEEP_FRESH:-0} == 1 ]]; then
    step "--fresh: kept $FRESH_ROOT (DRA_KEEP_FRESH=1)"
    return 0
  fi
  chmod -R u+w "$FRESH_ROOT" 2>/dev/null || true # the Go module cache is read-only
  rm -rf "$FRESH_ROOT"
  step "--fresh: removed $FRESH_ROOT"
}
cleanup() {
  local code=$?
  [[ -z ${go_pid:-} ]] || kill "$go_pid" 2>/dev/null || true
  if [[ -n $bg_pid ]] && kill -0 "$bg_pid" 2>/dev/null; then
    # Its own process group (the setsid below): the build and clang-tidy under it go too.
    kill -- "-$bg_pid" 2>/dev/null || true
    wait "$bg_pid" 2>/dev/null || true
  fi
  if ((!finished)); then
    # A step died under `set -e` before the results were counted: say so in the closing line too.
    echo "[test] error: stopped with exit code $code during: $current_step" >&2
    echo "all: $((u_passed + s_passed + f_passed + i_passed + e_passed)) passed," \
      "$((u_failed + s_failed + f_failed + i_failed + e_failed + 1)) failed," \
      "$((u_skipped + s_skipped + f_skipped + i_skipped + e_skipped)) skipped"
  fi
  if [[ ${DRA_KEEP_CLUSTER:-0} == 1 ]]; then
    step "the cluster still runs from $STATE_DIR (DRA_KEEP_CLUSTER=1); stop it with:" \
      "DRA_CLUSTER_DIR=$DRA_CLUSTER_DIR hack/cluster/down.sh"
  else
    step "stopping the local cluster and removing $STATE_DIR and $RUN_STATE_DIR"
    hack/cluster/down.sh || true
    remove_state || true
  fi
  remove_fresh_root
  rm -rf "$logs"
}
trap cleanup EXIT

# ctest's per-test "Start"/"Passed" lines are dropped; failures with their output, the summary and
# the list of failed tests stay.
quiet_ctest() { grep -vE '^ *(Start +[0-9]+: |[0-9]+/[0-9]+ Test +#[0-9]+: .* +Passed +[0-9.]+ sec$)' || true; }

# Prints "passed failed skipped" for one ctest log. A log without ctest's summary line (the run
# died, or never started) counts as one failure, so a broken step can never read as success.
ctest_counts() {
  local summary failed total skipped
  summary=$(sed -nE 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1 \2/p' "$1" 2>/dev/null | tail -n 1)
  if [[ -z $summary ]]; then
    echo "0 1 0"
    return
  fi
  read -r failed total <<<"$summary"
  # ctest counts a skipped test as "not failed"; it is listed as skipped, never as passed.
  skipped=$(grep -cE '^[[:space:]]+[0-9]+ - .* \(Skipped\)$' "$1" || true)
  echo "$((total - failed - skipped)) $failed $skipped"
}

# Prints "passed failed skipped" from a "<word>: N passed, N failed, N skipped" line of $2 in log
# $1; one failure when it is missing (the step died before it could count).
summary_counts() {
  local line
  line=$(sed -nE "s/^$2: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\\1 \\2 \\3/p" "$1" 2>/dev/null |
    tail -n 1)
  echo "${line:-0 1 0}"
}

t=$SECONDS
step "dependencies"
hack/install-deps.sh
took dependencies $((SECONDS - t))

# The background lane: the check build and clang-tidy, only on CPU time nothing else wants. Its own
# process group, so that cleanup can stop all of it.
run_checks=0
[[ ${DRA_TEST_STATIC:-1} == 0 && ${DRA_TEST_UNIT:-1} == 0 && ${DRA_TEST_FUZZ:-1} == 0 ]] || run_checks=1
if ((run_checks)); then
  step "background: the check build and the static checks (log follows at the end)"
  if [[ ${DRA_TEST_STATIC:-1} != 0 ]]; then
    checks=(hack/static-checks.sh -j "$JOBS")
  else
    checks=(bash -c 'cmake --preset check >/dev/null && cmake --build --preset check -j "$1"' _ "$JOBS")
  fi
  # Its own session, so its own scheduler autogroup, at nice 19: with autogroups (the kernel's
  # default where sched_autogroup_enabled is 1), nice and SCHED_IDLE only rank processes within one
  # session, and the cluster's daemons (each started in a session of its own) would otherwise share
  # the CPU equally with this lane instead of coming first. The session leader is also the
  # process group that cleanup stops.
  setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec chrt --idle 0 nice -n 19 "$@"' \
    _ "${checks[@]}" >"$static_log" 2>&1 &
  bg_pid=$!
  bg_start=$SECONDS
fi

t=$SECONDS
step "Kubernetes, etcd, containerd and helm (cached in $DRA_CACHE_DIR), beside the default build"
hack/cluster/build.sh >"$go_log" 2>&1 &
go_pid=$!
cmake --preset default >/dev/null
cmake --build --preset default --target cluster-deps -j "$JOBS"
took "default build" $((SECONDS - t))
go_rc=0
wait "$go_pid" || go_rc=$?
go_pid=
if ((go_rc != 0)); then
  cat "$go_log"
  echo "[test] error: hack/cluster/build.sh failed (its output above)" >&2
  exit 1
fi
grep -E '\] built |up to date' "$go_log" || true
took "Go builds + default build" $((SECONDS - t))

t=$SECONDS
step "local control plane and two nodes (new, empty: $STATE_DIR)"
hack/cluster/up.sh --nodes 2
took "cluster up" $((SECONDS - t))

t=$SECONDS
step "integration tests (build/default, against the local cluster)"
# RUN_SERIAL: they share one API server.
ctest --test-dir build/default -L integration --output-on-failure -j "$JOBS" 2>&1 | tee "$ctest_log" |
  quiet_ctest || rc=1
read -r i_passed i_failed i_skipped < <(ctest_counts "$ctest_log")
echo "integration: $i_passed passed, $i_failed failed, $i_skipped skipped"
took integration $((SECONDS - t))

t=$SECONDS
step "end-to-end scenarios on the local nodes"
test/e2e/run.sh 2>&1 | tee "$e2e_log" || rc=1
read -r e_passed e_failed e_skipped < <(summary_counts "$e2e_log" e2e)
took e2e $((SECONDS - t))

if ((run_checks)); then
  t=$SECONDS
  step "waiting for the background lane (check build, static checks)"
  bg_rc=0
  wait "$bg_pid" || bg_rc=$?
  bg_pid=
  # ninja's one line per compiled unit is left out; errors, findings and the timings stay.
  grep -vE '^\[[0-9]+/[0-9]+\] (Building|Linking|Generating|Running|Automatic)' "$static_log" || true
  took "background lane (after e2e)" $((SECONDS - t))
  took "background lane (in all)" $((SECONDS - bg_start))
  # Its parts, from hack/static-checks.sh's progress lines (wall time, on the CPU left idle).
  part=$(sed -nE 's/.*clang build done in ([0-9]+) s.*/\1/p' "$static_log" | tail -n 1)
  [[ -z $part ]] || took "  check build (background)" "$part"
  part=$(sed -nE 's/.*clang-tidy done in ([0-9]+) s.*/\1/p' "$static_log" | tail -n 1)
  [[ -z $part ]] || took "  clang-tidy (background)" "$part"
  if [[ ${DRA_TEST_STATIC:-1} != 0 ]]; then
    read -r s_passed s_failed s_skipped < <(summary_counts "$static_log" static)
    echo "static: $s_passed passed, $s_failed failed, $s_skipped skipped"
  elif ((bg_rc != 0)); then
    s_failed=1
    echo "static: the check build failed (its output above)"
  fi
  ((s_failed == 0)) || rc=1
fi

if [[ ${DRA_TEST_UNIT:-1} != 0 ]]; then
  t=$SECONDS
  step "unit tests (build/check: AddressSanitizer + UndefinedBehaviorSanitizer)"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build/check -L unit --output-on-failure -j "$JOBS" 2>&1 | tee "$unit_log" |
    quiet_ctest || rc=1
  read -r u_passed u_failed u_skipped < <(ctest_counts "$unit_log")
  echo "unit: $u_passed passed, $u_failed failed, $u_skipped skipped"
  took unit $((SECONDS - t))
fi

if [[ ${DRA_TEST_FUZZ:-1} != 0 ]]; then
  t=$SECONDS
  step "fuzzing: every libFuzzer target for ${DRA_TEST_FUZZ_SECONDS:-10}s (hack/fuzz.sh)"
  hack/fuzz.sh --no-build "${DRA_TEST_FUZZ_SECONDS:-10}" 2>&1 | tee "$fuzz_log" || rc=1
  read -r f_passed f_failed f_skipped < <(summary_counts "$fuzz_log" fuzz)
  took fuzz $((SECONDS - t))
fi

failed=$((u_failed + s_failed + f_failed + i_failed + e_failed))
((failed == 0)) || rc=1
finished=1
step "done in $((SECONDS - start))s"
for d in "${durations[@]}"; do
  printf 'took: %-30s %5ds\n' "${d% *}" "${d##* }"
done
echo "unit: $u_passed passed, $u_failed failed, $u_skipped skipped"
echo "static: $s_passed passed, $s_failed failed, $s_skipped skipped"
echo "fuzz: $f_passed passed, $f_failed failed, $f_skipped skipped"
echo "integration: $i_passed passed, $i_failed failed, $i_skipped skipped"
echo "e2e: $e_passed passed, $e_failed failed, $e_skipped skipped"
echo "all: $((u_passed + s_passed + f_passed + i_passed + e_passed)) passed, $failed failed," \
  "$((u_skipped + s_skipped + f_skipped + i_skipped + e_skipped)) skipped"
exit "$rc"
