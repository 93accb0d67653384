#!/usr/bin/env bash
# Runs every libFuzzer target (cmake/fuzz.cmake) for a bounded time, seeded from its corpus under
# lib/*/fuzz_corpus, and prints per target the executions per second and libFuzzer's coverage
# numbers (cov: instrumented edges reached, ft: features) at the start (seeds only) and the end.
#
#   hack/fuzz.sh [--no-build] [SECONDS] [TARGET...]
#
# SECONDS per target (default 60); TARGETs are the short names below (default: all). The targets
# run DRA_FUZZ_JOBS at a time (default: the number of CPUs), each a single-threaded libFuzzer
# process, so each gets a whole CPU for its SECONDS, as it would alone. Without
# --no-build it configures the `check` preset (clang, build/check) and builds the `fuzzers` target.
# New inputs libFuzzer finds go to build/check/fuzz-work/<target>/ (emptied at each run), so the
# repository's corpora only change by hand. A crash, leak, timeout or out-of-memory input is kept
# as build/check/fuzz-artifacts/<target>-crash-<sha1>; turn it into a corpus file of that target
# (the replay tests then run it in every CI build) and fix the code. Reproduce one with
#   build/check/<binary> <file>
# The last line counts the targets: `fuzz: N passed, N failed, 0 skipped` (failed: a finding, or a
# fuzzer that did not run).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# short name, binary under the build dir, seed corpus, then any libFuzzer options of the target.
# Without -max_len libFuzzer mutates inputs up to the largest seed or 4 KiB; the webhook's limit is
# a review nested 10,002 levels deep (20 KB of brackets, 60 KB of {"a": objects), so its inputs
# may reach 128 KiB.
TARGETS=(
  "api_config lib/api/api_config_fuzzer lib/api/fuzz_corpus"
  "webhook_admission lib/webhook/webhook_admission_fuzzer lib/webhook/fuzz_corpus -max_len=131072"
  "checkpoint lib/checkpoint/checkpoint_fuzzer lib/checkpoint/fuzz_corpus"
  "cdi_spec lib/cdi/cdi_spec_fuzzer lib/cdi/fuzz_corpus"
  "k8s_http_response lib/k8s/k8s_http_response_fuzzer lib/k8s/fuzz_corpus/http_response"
  "k8s_watch lib/k8s/k8s_watch_fuzzer lib/k8s/fuzz_corpus/watch"
  "k8s_objects lib/k8s/k8s_objects_fuzzer lib/k8s/fuzz_corpus/objects"
  "k8s_kubeconfig lib/k8s/k8s_kubeconfig_fuzzer lib/k8s/fuzz_corpus/kubeconfig"
  "k8s_typed_objects lib/k8s/k8s_typed_objects_fuzzer lib/k8s/fuzz_corpus/typed"
  "http_request lib/httpserver/http_request_fuzzer lib/httpserver/fuzz_corpus_http_request"
  "gpu_checkpoint_records lib/gpuplugin/prepare/gpu_checkpoint_records_fuzzer lib/gpuplugin/prepare/fuzz_corpus/records"
  "cddaemon_imex_files lib/cddaemon/cddaemon_imex_files_fuzzer lib/cddaemon/fuzz_corpus/imex_files"
  "cdplugin_claim_records lib/cdplugin/cdplugin_claim_records_fuzzer lib/cdplugin/fuzz_corpus/claim_records"
)

build=1
if [[ ${1:-} == --no-build ]]; then
  build=0
  shift
fi
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
seconds=60
if [[ ${1:-} =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
wanted=("$@")

BUILD=$ROOT/build/check
if ((build)); then
  cmake --preset check >/dev/null
  cmake --build "$BUILD" --target fuzzers -j "${DRA_BUILD_JOBS:-$(nproc)}"
fi

work=$BUILD/fuzz-work artifacts=$BUILD/fuzz-artifacts logs=$BUILD/fuzz-logs
mkdir -p "$work" "$artifacts" "$logs"

# Prints "<cov> <ft>" from the last libFuzzer status line of $1 that carries `marker`.
cov_ft() {
  grep -E "^#[0-9]+[[:space:]]+$2 " "$1" | tail -n 1 |
    sed -nE 's/.* cov: ([0-9]+) ft: ([0-9]+).*/\1 \2/p'
}
stat() { sed -nE "s/^stat::$2: *([0-9]+).*/\1/p" "$1" | tail -n 1; }

# fuzz_one <name> <binary> <corpus> [options...]: runs one target and writes its table row to
# $logs/<name>.row and, when it failed, the lines that point at its input and log to
# $logs/<name>.more, and "ok" to $logs/<name>.ok when it passed (a finding, or a run that died,
# leaves no .ok file).
fuzz_one() {
  local name=$1 bin=$2 corpus=$3 log status=0 cov0='' ft0='' cov1='' ft1='' execs rate files result
  shift 3
  log=$logs/$name.log
  rm -f "$logs/$name.row" "$logs/$name.more" "$logs/$name.ok"
  if [[ ! -x $BUILD/$bin ]]; then
    printf '%-22s missing %s (build the fuzz preset)\n' "$name" "$BUILD/$bin" >"$logs/$name.row"
    return 0
  fi
  rm -rf "${work:?}/$name"
  mkdir -p "$work/$name"
  # -timeout: one input running 10 s is a finding (a hang); seeds are read, never written.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$BUILD/$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "$@" -artifact_prefix="$artifacts/$name-" "$work/$name" "$ROOT/$corpus" \
    >"$log" 2>&1 || status=$?
  read -r cov0 ft0 < <(cov_ft "$log" INITED || true) || true
  read -r cov1 ft1 < <(cov_ft "$log" 'DONE' || cov_ft "$log" '(NEW|REDUCE|pulse)' || true) || true
  if [[ -z ${cov1:-} ]]; then
    read -r cov1 ft1 < <(grep -E '^#[0-9]+' "$log" | tail -n 1 |
      sed -nE 's/.* cov: ([0-9]+) ft: ([0-9]+).*/\1 \2/p') || true
  fi
  execs=$(stat "$log" number_of_executed_units) rate=$(stat "$log" average_exec_per_sec)
  files=$(find "$work/$name" -type f | wc -l)
  result=ok
  if ((status != 0)); then
    result="FINDING (exit $status): $(grep -m1 -E 'ERROR: |runtime error|fuzz invariant|deadly signal' "$log" || echo "see $log")"
    {
      compgen -G "$artifacts/$name-*" | sed 's/^/    input: /' || true
      echo "    log: $log"
    } >"$logs/$name.more"
  fi
  printf '%-22s %10s %8s %14s %14s %6s  %s\n' "$name" "${execs:-?}" "${rate:-?}" \
    "${cov0:-?}->${cov1:-?}" "${ft0:-?}->${ft1:-?}" "+$files" "$result" >"$logs/$name.row"
  ((status != 0)) || echo ok >"$logs/$name.ok"
}

jobs_max=${DRA_FUZZ_JOBS:-$(nproc)}
names=()
for row in "${TARGETS[@]}"; do
  read -r name bin corpus options <<<"$row"
  read -r -a opts <<<"${options:-}"
  if ((${#wanted[@]})) && [[ " ${wanted[*]} " != *" $name "* ]]; then
    continue
  fi
  # At most jobs_max at once: wait for any one to end before starting the next.
  while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
  rm -f "$logs/$name.ok"
  fuzz_one "$name" "$bin" "$corpus" ${opts[@]+"${opts[@]}"} &
  names+=("$name")
done
wait

# The table in the targets' order; a target passed when its run wrote its .ok file.
passed=0 failed=0
printf '%-22s %10s %8s %14s %14s %6s  %s\n' target execs execs/s "cov seed->end" "ft seed->end" \
  corpus result
for name in ${names[@]+"${names[@]}"}; do
  if [[ -f $logs/$name.ok ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
  cat "$logs/$name.row" 2>/dev/null || printf '%-22s no result (its run died)\n' "$name"
  cat "$logs/$name.more" 2>/dev/null || true
done
echo "fuzz: $passed passed, $failed failed, 0 skipped (${seconds}s per target)"
((failed == 0))
