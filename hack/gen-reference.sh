#!/usr/bin/env bash
# Generates docs/reference.md: every flag of every binary with its environment variable, the chart
# value that sets it and its default, the feature gates, and the metrics a binary serves, from the
# code itself (each binary's unlisted `--help-markdown` and `--help-metrics-markdown`,
# lib/common/flags.h) and the chart's templates (which value each container's environment
# variables and arguments come from). The file is never edited by hand. It also writes each
# kubelet plugin's table of prepare steps (`<plugin> --help-steps-markdown`) into its doc, between
# the lines "<!-- BEGIN generated: <plugin> --help-steps-markdown -->" and
# "<!-- END generated -->": gpu-kubelet-plugin's (GpuStepTable,
# lib/gpuplugin/prepare/claim_steps.cc) into docs/prepare-flow.md, compute-domain-kubelet-plugin's
# (CdStepTable, lib/cdplugin/claim_steps.cc) into docs/compute-domains.md.
#
# Usage: hack/gen-reference.sh [--check] [BUILD_DIR]   (BUILD_DIR: default build/default)
#   without --check: writes docs/reference.md and the steps tables;
#   --check: writes nothing, exits 1 (with the diff) when any of them differs from what it would
#            write. A step of hack/static-checks.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
CHECK=0
if [[ ${1:-} == --check ]]; then CHECK=1; shift; fi
BUILD=${1:-build/default}
OUT=docs/reference.md
TEMPLATES=deployments/helm/dra-driver-nvidia-gpu/templates

# chart_sources TEMPLATE CONTAINER: "ENV<TAB>source" and "--flag<TAB>source" lines for one container
# of a template, where source is the chart value (`a.b.c`), "pod: <fieldPath>", "fixed: <text>" or
# "chart: <helper>" (a value the chart computes in a named template).
chart_sources() {
  awk -v want="$2" '
    function resolve(expr,   m, v, rest) {
      # The first value reference of a template expression, with $variables resolved.
      if (match(expr, /include "[^"]+"/)) {
        m = substr(expr, RSTART + 9, RLENGTH - 10)
        sub(/^dra-driver-nvidia-gpu\./, "", m)
        return "chart: " m
      }
      if (match(expr, /\.Values\.[A-Za-z0-9_.]+/)) return "`" substr(expr, RSTART + 8, RLENGTH - 8) "`"
      if (match(expr, /\$[A-Za-z]+(\.[A-Za-z0-9_.]+)?/)) {
        m = substr(expr, RSTART, RLENGTH)
        v = m; rest = ""
        if (index(m, ".") > 0) { v = substr(m, 1, index(m, ".") - 1); rest = substr(m, index(m, ".")) }
        if (v in vars) {
          m = resolve(vars[v])
          if (rest != "" && m ~ /^`.*`$/) return substr(m, 1, length(m) - 1) rest "`"
          return m
        }
      }
      return ""
    }
    # Variable definitions at file level: {{- $kp := .Values.kubeletPlugin }}
    /^\{\{-? *\$[A-Za-z]+ := / {
      line = $0; sub(/^\{\{-? */, "", line); sub(/ *-?\}\}.*$/, "", line)
      split(line, parts, " := "); vars[parts[1]] = parts[2]
      next
    }
    # A container starts at six spaces of indentation.
    /^      - name: / { container = $3; next }
    container != want { next }
    # range $name, $key := dict "ENV" "key" ...  with  $v := index $gpus $key
    /range \$name, \$key := dict / {
      n = split($0, words, "\"")
      for (i = 2; i + 2 <= n; i += 4) pending[words[i]] = words[i + 2]
      next
    }
    /\$v := index \$[A-Za-z]+ \$key/ {
      match($0, /index \$[A-Za-z]+/); base = substr($0, RSTART + 6, RLENGTH - 6)
      for (e in pending) { s = resolve(base); if (s ~ /^`.*`$/) print e "\t" substr(s, 1, length(s) - 1) "." pending[e] "`" }
      delete pending
      next
    }
    /^        - name: [A-Z][A-Z0-9_]*$/ { env = $3; next }
    env != "" && /^          value: / {
      v = $0; sub(/^          value: /, "", v)
      if (v ~ /\{\{/) { s = resolve(v); if (s == "") s = "chart" } else { gsub(/"/, "", v); s = "fixed: `" v "`" }
      print env "\t" s; env = ""; next
    }
    env != "" && /^ +fieldPath: / { print env "\tpod: `" $2 "`"; env = ""; next }
    env != "" && /^ +(valueFrom|fieldRef):/ { next }
    { env = "" }
    # Arguments: - --flag=value
    /^        - --[a-z0-9-]+=/ {
      a = $0; sub(/^        - /, "", a); f = a; sub(/=.*/, "", f); v = substr(a, length(f) + 2)
      if (v ~ /\{\{/) { s = resolve(v); if (s == "") s = "chart" } else s = "fixed: `" v "`"
      print f "\t" s
    }
    # command: [binary, -v, $(LOG_VERBOSITY)]: -v follows that variable
    /^        command: .*-v, \$\(LOG_VERBOSITY\)/ { print "-v\t$LOG_VERBOSITY" }
  ' "$1"
}

# Variables the chart sets in a plugin, controller or webhook container that no flag of its binary
# reads, and who reads them instead. Any other such variable fails the generation: a chart setting
# a variable its binary ignores is a typo or a dead value.
declare -A NOT_FLAGS=(
  [NODE_IP]="expanded by the kubelet in other values (\$(NODE_IP) in endpoints)"
  [LOG_VERBOSITY]="expanded by the kubelet into the command's -v"
  [NVIDIA_VISIBLE_DEVICES]="read by the NVIDIA container runtime"
  [NVIDIA_MIG_CONFIG_DEVICES]="read by the NVIDIA container runtime"
  [MASK_NVIDIA_DRIVER_PARAMS]="read by the gpus container's start-up shell (kubeletplugin.yaml)"
)
unread=()

# flags_with_chart BINARY_COMMAND TEMPLATE CONTAINER: the binary's flag table with a "Chart" column.
flags_with_chart() {
  local cmd=$1 template=$2 container=$3 sources
  sources=$(if [[ -n $template ]]; then chart_sources "$TEMPLATES/$template" "$container"; fi)
  local table key
  table=$($cmd --help-markdown)
  while IFS=$'\t' read -r key _; do
    [[ -z $key || $key == -v || -n ${NOT_FLAGS[$key]:-} ]] && continue
    grep -qF -- "\`$key\`" <<<"$table" || unread+=("$template container $container sets $key; no flag of ${cmd##*/} reads it")
  done <<<"$sources"
  # shellcheck disable=SC2086
  $cmd --help-markdown | awk -F'\t' -v sources="$sources" '
    BEGIN {
      n = split(sources, lines, "\n")
      for (i = 1; i <= n; i++) { split(lines[i], kv, "\t"); if (kv[1] != "") src[kv[1]] = kv[2] }
      if ("-v" in src && src["-v"] == "$LOG_VERBOSITY") src["-v"] = ("LOG_VERBOSITY" in src) ? src["LOG_VERBOSITY"] : ""
    }
    /^Feature gates/ { gates = 1 }
    gates { next }
    /^\| Flag \| Environment \|/ { print "| Flag | Environment | Chart | Default | Description |"; next }
    /^\|---\|---\|---\|---\|$/ { print "|---|---|---|---|---|"; next }
    /^\| `/ {
      split($0, cells, " \\| ")
      flag = cells[1]; sub(/^\| `/, "", flag); sub(/`.*/, "", flag)
      chart = ""
      if (flag in src) chart = src[flag]
      envs = cells[2]
      m = split(envs, names, ", ")
      for (i = 1; i <= m && chart == ""; i++) { e = names[i]; gsub(/`/, "", e); if (e in src) chart = src[e] }
      rest = $0; sub(/^\| [^|]*\| [^|]*\| /, "", rest)
      print cells[1] " | " cells[2] " | " chart " | " rest
      next
    }
    { print }
  '
}

gates_table() { "$1" --help-markdown | sed -n '/^| Gate |/,$p'; }

metrics_table() {
  echo "| Metric | Type | Labels | Help |"
  echo "|---|---|---|---|"
  "$1" --help-metrics-markdown
}

bin() { echo "$BUILD/cmd/$1/$1"; }
for b in gpu-kubelet-plugin compute-domain-kubelet-plugin compute-domain-controller compute-domain-daemon webhook; do
  [[ -x $(bin "$b") ]] || { echo "gen-reference: $(bin "$b") is not built" >&2; exit 2; }
done

generate() {
  cat <<'EOF'
# Reference: flags, environment variables, chart values, feature gates, metrics

Generated by `hack/gen-reference.sh` from each binary's flag declarations (its unlisted
`--help-markdown`), its metric registrations (`--help-metrics-markdown`) and the chart's
templates; do not edit it by hand. The static checks (`hack/static-checks.sh`) fail when it
differs from what the script generates: run `hack/gen-reference.sh` after changing a flag, a gate,
a metric or the chart's environment variables.

Every flag can also be set by its environment variable (the command line wins). The **Chart**
column names what the chart sets the variable or flag from in its pods: a value of `values.yaml`,
`pod:` a field of the pod itself (downward API), `fixed:` a constant, `chart:` a value the chart
computes in a named template of `_helpers.tpl` (e.g. `featureGates` from the `featureGates` value
and the chart's defaults). Empty: the chart does not set it and the default applies;
`kubeletPlugin.containers.<container>.env`, `controller.containers.computeDomain.env` and
`webhook.containers.webhook.env` add any variable.

EOF
  echo "## gpu-kubelet-plugin"
  echo
  echo "The \`gpus\` container of the kubelet-plugin DaemonSet (\`templates/kubeletplugin.yaml\`)."
  echo
  flags_with_chart "$(bin gpu-kubelet-plugin)" kubeletplugin.yaml gpus
  echo
  echo "### gpu-kubelet-plugin export-go-checkpoint"
  echo
  echo "Run by the operator, not by the chart (docs/compatibility.md)."
  echo
  flags_with_chart "$(bin gpu-kubelet-plugin) export-go-checkpoint" "" ""
  echo
  echo "## compute-domain-kubelet-plugin"
  echo
  echo "The \`compute-domains\` container of the kubelet-plugin DaemonSet."
  echo
  flags_with_chart "$(bin compute-domain-kubelet-plugin)" kubeletplugin.yaml compute-domains
  echo
  echo "## compute-domain-controller"
  echo
  echo "The controller Deployment (\`templates/controller.yaml\`); its \`cleanup\` command runs in the"
  echo "uninstall hook (\`templates/uninstall-cleanup.yaml\`)."
  echo
  flags_with_chart "$(bin compute-domain-controller)" controller.yaml compute-domain
  echo
  echo "## compute-domain-daemon"
  echo
  echo "Run in the IMEX daemon pods, whose DaemonSet the controller creates per ComputeDomain"
  echo "(\`lib/cdcontroller/templates.cc\`), not the chart."
  echo
  flags_with_chart "$(bin compute-domain-daemon)" "" ""
  echo
  echo "## webhook"
  echo
  echo "The webhook Deployment (\`templates/webhook.yaml\`)."
  echo
  flags_with_chart "$(bin webhook)" webhook.yaml webhook
  echo
  echo "## Feature gates"
  echo
  echo "One registry for every binary (\`--feature-gates\`, env \`FEATURE_GATES\`, chart value"
  echo "\`featureGates\`); each binary acts on the gates that concern it."
  echo
  gates_table "$(bin gpu-kubelet-plugin)"
  echo
  cat <<'EOF'
## Metrics

The Prometheus metric families a binary serves on its `--http-endpoint` (path `--metrics-path`),
printed by its unlisted `--help-metrics-markdown`, which registers them in an empty registry
without starting anything (a unit test starts the binary's servers and compares). A family with
labels has one series per label values seen; a histogram adds `_bucket`, `_sum` and `_count`.
The compute-domain-daemon serves none.

EOF
  echo "### gpu-kubelet-plugin metrics"
  echo
  metrics_table "$(bin gpu-kubelet-plugin)"
  echo
  echo "### compute-domain-kubelet-plugin metrics"
  echo
  metrics_table "$(bin compute-domain-kubelet-plugin)"
  echo
  echo "### compute-domain-controller metrics"
  echo
  metrics_table "$(bin compute-domain-controller)"
  echo
  echo "### webhook metrics"
  echo
  metrics_table "$(bin webhook)"
}

# FILE with the lines between its BEGIN line for COMMAND and the next "<!-- END generated -->"
# replaced by stdin. Fails when FILE has no such pair of lines.
fill_section() {
  local file=$1 begin="<!-- BEGIN generated: $2 -->" body
  body=$(cat)
  if ! grep -qxF -- "$begin" "$file"; then
    echo "gen-reference: $file has no line '$begin'" >&2
    return 1
  fi
  BODY=$body awk -v begin="$begin" '
    $0 == begin { print; print ENVIRON["BODY"]; skip = 1; next }
    skip && $0 == "<!-- END generated -->" { skip = 0 }
    !skip { print }
    END { if (skip) exit 1 }
  ' "$file" || { echo "gen-reference: $file: no '<!-- END generated -->' after '$begin'" >&2; return 1; }
}

# The steps tables: "BINARY DOC" pairs; each DOC's section for BINARY is written from it.
STEPS=(
  "gpu-kubelet-plugin docs/prepare-flow.md"
  "compute-domain-kubelet-plugin docs/compute-domains.md"
)
tmp=$(mktemp)
steps_dir=$(mktemp -d)
trap 'rm -rf "$tmp" "$steps_dir"' EXIT
generate | cat -s >"$tmp"
for pair in "${STEPS[@]}"; do
  read -r b doc <<<"$pair"
  "$(bin "$b")" --help-steps-markdown |
    fill_section "$doc" "$b --help-steps-markdown" >"$steps_dir/$b"
done
if ((${#unread[@]})); then
  printf 'gen-reference: %s\n' "${unread[@]}" >&2
  exit 1
fi
# The gates must be the same in every binary that prints them.
for b in compute-domain-kubelet-plugin compute-domain-controller compute-domain-daemon; do
  if ! diff -q <(gates_table "$(bin gpu-kubelet-plugin)") <(gates_table "$(bin "$b")") >/dev/null &&
    [[ -n $(gates_table "$(bin "$b")") ]]; then
    echo "gen-reference: $b registers other feature gates than gpu-kubelet-plugin" >&2
    exit 1
  fi
done
if ((CHECK)); then
  rc=0
  if ! diff -u "$OUT" "$tmp"; then
    echo "gen-reference: $OUT is not what hack/gen-reference.sh generates (diff above); run it" >&2
    rc=1
  fi
  for pair in "${STEPS[@]}"; do
    read -r b doc <<<"$pair"
    if ! diff -u "$doc" "$steps_dir/$b"; then
      echo "gen-reference: the steps table of $doc is not what hack/gen-reference.sh" \
        "generates (diff above); run it" >&2
      rc=1
    fi
  done
  exit "$rc"
fi
cp "$tmp" "$OUT"
echo "gen-reference: wrote $OUT"
for pair in "${STEPS[@]}"; do
  read -r b doc <<<"$pair"
  cp "$steps_dir/$b" "$doc"
  echo "gen-reference: wrote the steps table of $doc"
done
