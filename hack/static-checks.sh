#!/usr/bin/env bash
# The static checks the default build does not do, as one step of hack/test.sh:
#
#   1. the `check` preset: every target compiled by clang with -Wthread-safety as errors
#      (DRA_THREAD_SAFETY), so the ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED annotations are
#      checked, not just written (the same build also serves the sanitizer unit tests and the
#      fuzzers, CMakePresets.json);
#   2. clang-tidy (clang-tidy-22, or $DRA_CLANG_TIDY) with the repository's .clang-tidy on every
#      translation unit of ours (lib/, cmd/, test/, bench/; not the generated protobuf code), every
#      finding an error.
#   3. the docs lint (hack/docs-lint.sh): every repository path and C++ name that README.md and
#      docs/*.md mention exists;
#   4. docs/reference.md, and the steps tables of docs/prepare-flow.md and docs/compute-domains.md,
#      are what hack/gen-reference.sh generates from the check build's binaries (flags, gates,
#      metrics, prepare steps) and the chart (and every variable the chart sets is read by a flag);
#   5. shellcheck (or $DRA_SHELLCHECK) on every shell script in the repository (the tracked *.sh,
#      *.bash and *.bats files and those with a shell #! line), with the settings of .shellcheckrc,
#      every finding an error;
#   6. the include graph agrees with the CMake graph (hack/include-graph.py on the check build): no
#      file of ours includes a header of a library its own target does not depend on.
#
# clang-tidy results are cached: a translation unit is checked again only when its compile
# command, its source or one of the headers it includes (ninja's dependency log of the clang
# build), .clang-tidy or clang-tidy itself changed. Cache: $DRA_CACHE_DIR/clang-tidy (default
# ~/.cache/dra-driver-nvidia-gpu/clang-tidy).
#
# Usage: hack/static-checks.sh [-j N] [FILE.cc ...]   (files: only these translation units)
# Prints the findings, then one line "static: N passed, N failed, 0 skipped" (the build counts as
# one check, the docs lint as one, each script and each translation unit as one); exits non-zero
# on any failure.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
JOBS=$(nproc)
# clang-tidy 22 skips system headers (nlohmann, Abseil, gRPC, GoogleTest) when it matches, where 14
# walked them in every unit; .clang-tidy lists its checks one by one, so the set does not change
# with the version.
CLANG_TIDY=${DRA_CLANG_TIDY:-clang-tidy-22}
# Its compiler front end is newer than the build's: libstdc++ 12's std::stable_sort calls
# std::get_temporary_buffer, which clang 22 reports as deprecated inside the system header. Our own
# uses of deprecated declarations are errors in the check build (clang 14, -Werror) already.
TIDY_ARGS="--extra-arg=-Wno-deprecated-declarations"
if [[ ${1:-} == -j ]]; then JOBS=${2:?-j needs a number}; shift 2; fi
CACHE=${DRA_CACHE_DIR:-$HOME/.cache/dra-driver-nvidia-gpu}/clang-tidy
BUILD=build/check
mkdir -p "$CACHE"
# ccache keys relative to the checkout, so that every clone shares the compiled objects.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}

progress() { printf '[static %(%H:%M:%S)T] %s\n' -1 "$*"; }

passed=0 failed=0
progress "docs lint (hack/docs-lint.sh)"
if hack/docs-lint.sh; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "static: the docs name paths or code that do not exist (above)" >&2
fi

SHELLCHECK=${DRA_SHELLCHECK:-shellcheck}
mapfile -t scripts < <({
  git ls-files -- '*.sh' '*.bash' '*.bats'
  git ls-files | while read -r f; do
    [[ -f $f && ${f##*/} != *.* ]] && head -n 1 "$f" | grep -qE '^#!.*(bash|/sh|bats)' && echo "$f"
  done
} | sort -u)
progress "shellcheck on ${#scripts[@]} scripts"
if ! command -v "$SHELLCHECK" >/dev/null; then
  failed=$((failed + ${#scripts[@]}))
  echo "static: no $SHELLCHECK; install it with hack/install-deps.sh" >&2
else
  sc_out=$("$SHELLCHECK" -f gcc "${scripts[@]}" 2>&1) && sc_rc=0 || sc_rc=$?
  [[ -z $sc_out ]] || printf '%s\n' "$sc_out" >&2
  # A script with findings is one failed check; shellcheck failing without any is all of them.
  sc_failed=$(printf '%s\n' "$sc_out" | grep -E '^[^:]+:[0-9]+:[0-9]+: ' | cut -d: -f1 | sort -u | grep -c . || true)
  if ((sc_rc != 0 && sc_failed == 0)); then
    sc_failed=${#scripts[@]}
    echo "static: $SHELLCHECK failed (exit $sc_rc)" >&2
  fi
  passed=$((passed + ${#scripts[@]} - sc_failed))
  failed=$((failed + sc_failed))
fi

t=$SECONDS
progress "clang build with -Wthread-safety as errors ($BUILD)"
cmake --preset check >/dev/null
if cmake --build --preset check -j "$JOBS"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "static: the check preset does not build (errors above)" >&2
fi
progress "clang build done in $((SECONDS - t)) s"

# Includes against the CMake graph of the configured check build (its own unit test first).
progress "include graph against the CMake graph (hack/include-graph.py $BUILD)"
if ! ig_out=$(python3 hack/include-graph.py --self-test 2>&1); then
  printf '%s\n' "$ig_out" >&2
  failed=$((failed + 1))
  echo "static: hack/include-graph.py --self-test failed (above)" >&2
elif python3 hack/include-graph.py "$BUILD"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "static: a file includes a header of a library its target does not depend on (above)" >&2
fi

# The generated reference (flags, variables, chart values, gates) against the code and the chart.
progress "docs/reference.md and the steps table (hack/gen-reference.sh --check $BUILD)"
if hack/gen-reference.sh --check "$BUILD"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "static: docs/reference.md is not what the binaries and the chart say (above)" >&2
fi

# The translation units to check: ours, from the clang build's compile commands.
if (($#)); then
  units=$(printf '%s\n' "$@" | sed "s|^\\([^/]\\)|$ROOT/\\1|")
else
  units=$(jq -r '.[].file' "$BUILD/compile_commands.json" | grep -E "^$ROOT/(lib|cmd|test|bench)/" | sort -u)
fi
deps_file=$(mktemp)
results=$(mktemp -d)
trap 'rm -rf "$deps_file" "$results"' EXIT
# "<object>: #deps N ..." blocks, then the dependency paths indented.
ninja -C "$BUILD" -t deps >"$deps_file" 2>/dev/null || true
fingerprint=$( { "$CLANG_TIDY" --version; echo "$TIDY_ARGS"; cat .clang-tidy; } | sha256sum | cut -c1-16)

# key <unit>: hash of the tool, the config, the unit's compile command and the contents of the
# unit and every header the last clang build read for it, with the checkout's path taken out (so
# that every clone shares the results). A unit without dependency data (never built) gets a
# unique key, so it is always checked.
key() {
  local unit=$1 obj cmd
  cmd=$(jq -r --arg f "$unit" '[.[] | select(.file == $f)][0] | .command' "$BUILD/compile_commands.json")
  obj=$(sed -nE 's/.* -o ([^ ]+\.o) .*/\1/p' <<<"$cmd")
  {
    echo "$fingerprint ${cmd//$ROOT/@ROOT@}"
    if [[ -n $obj ]] && grep -q "^$obj: #deps" "$deps_file"; then
      awk -v o="$obj: #deps" 'index($0, o) == 1 {on = 1; next} /^[^ ]/ {on = 0} on && NF {print $1}' "$deps_file" |
        sort -u | xargs -r sha256sum 2>/dev/null | sed "s|$ROOT|@ROOT@|g"
    else
      echo "no-deps $RANDOM$RANDOM$EPOCHREALTIME"
    fi
  } | sha256sum | cut -c1-32
}

# check <unit>: runs clang-tidy unless the cache says this exact input was clean.
check() {
  local unit=$1 k out name
  name=$(sed "s|^$ROOT/||; s|/|_|g" <<<"$unit")
  k=$(key "$unit")
  if [[ -e $CACHE/$k ]]; then
    echo cached >"$results/$name.ok"
    return
  fi
  if out=$("$CLANG_TIDY" "$TIDY_ARGS" -p "$BUILD" --quiet --warnings-as-errors='*' "$unit" 2>&1); then
    : >"$CACHE/$k"
    echo checked >"$results/$name.ok"
  else
    printf '%s\n' "$out" | grep -vE '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Error while processing|^Suppressed [0-9]+ warnings|^Use -header-filter' \
      >"$results/$name.fail"
  fi
}
export -f check key
export ROOT BUILD CACHE deps_file results fingerprint CLANG_TIDY TIDY_ARGS

t=$SECONDS
progress "clang-tidy on $(grep -c . <<<"$units") translation units (-j $JOBS, cache $CACHE)"
xargs -r -P "$JOBS" -I{} bash -c 'check "$@"' _ {} <<<"$units"
for f in "$results"/*.fail; do
  [[ -e $f ]] || continue
  cat "$f"
  failed=$((failed + 1))
done
ok=$(find "$results" -name '*.ok' | wc -l)
passed=$((passed + ok))
progress "clang-tidy done in $((SECONDS - t)) s: $ok clean ($(grep -l cached "$results"/*.ok 2>/dev/null | wc -l) from the cache)"
echo "static: $passed passed, $failed failed, 0 skipped"
((failed == 0))
