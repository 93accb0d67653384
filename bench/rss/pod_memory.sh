#!/usr/bin/env bash
# bench/rss/pod_memory.sh: the memory of the driver's containers on the local cluster as the kubelet
# counts it, beside the process's own figures. Per container of every pod in the driver's namespace
# (the GPU and compute-domain plugins, the controller, the webhook, the IMEX daemons):
#   ws        working set = usage - inactive_file (0 if negative): what `kubectl top`, the kubelet's
#             eviction and the summary API report. cadvisor v0.56.2
#             container/libcontainer/handler.go setMemoryStats ("workingSet := ret.Memory.Usage ...
#             workingSet -= v" with v = total_inactive_file on cgroup v1); containerd v2.4.2
#             internal/cri/server/container_stats_list.go getWorkingSet, the same formula.
#   usage     memory.usage_in_bytes (anonymous + page cache charged to the container, kernel memory)
#   inact_f   total_inactive_file of memory.stat (page cache not recently used: reclaimed first)
#   act_f     total_active_file (page cache used more than once recently: counted in ws)
#   rss       total_rss of memory.stat (anonymous memory of the cgroup)
#   VmRSS     VmRSS of the container's main process (/proc/<pid>/status; its mapped file pages
#             count here whether or not they are charged to this cgroup)
#   VmHWM     its peak VmRSS since exec
# The container's cgroup is found from the pod UID and container ID (cgroup v1, cgroupfs driver, each
# local node's pods under /sys/fs/cgroup/memory/<node>/kubepods[/burstable|/besteffort]/pod<uid>/<id>,
# hack/cluster/node-config.sh). The main process is the one in cgroup.procs whose parent is not.
# Values in MiB. Reads files and calls kubectl only: run on the machine that runs the local nodes.
#
# Usage: bench/rss/pod_memory.sh                    one snapshot
#        bench/rss/pod_memory.sh --watch SECONDS    samples every --interval (1 s) for SECONDS and
#                                                   prints each container's peak ws sample
#        bench/rss/pod_memory.sh --during -- CMD... a snapshot, then samples while CMD runs (e.g. an
#                                                   e2e file or a bench), then the peaks
# Options: --namespace NS (default $DRA_HELM_NAMESPACE or nvidia-dra-driver-gpu), --interval S.
# Peaks are kept per component and container (the chart's component label; compute-domain-daemon for
# the IMEX daemon pods of every ComputeDomain; else the pod's generateName), across pods that come
# and go (a reinstall, a restart, other domains).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$ROOT/hack/cluster/lib.sh"
NS=${DRA_HELM_NAMESPACE:-nvidia-dra-driver-gpu}
INTERVAL=1
MODE=snapshot
WATCH=0
CG=/sys/fs/cgroup/memory
while (($#)); do
  case $1 in
  --namespace) NS=$2; shift 2 ;;
  --interval) INTERVAL=$2; shift 2 ;;
  --watch) MODE=watch; WATCH=$2; shift 2 ;;
  --during) MODE=during; shift; [[ ${1:-} == -- ]] && shift; break ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) die "pod_memory.sh: unknown argument $1 (--help)" ;;
  esac
done
[[ $MODE != during || $# -gt 0 ]] || die "pod_memory.sh: --during needs a command after --"
kubectl() { "$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_PATH" --request-timeout=20s "$@"; }

# One line per running container: key node uid container-id.
containers() {
  kubectl -n "$NS" get pods -o json | jq -r '.items[] | select(.status.phase == "Running") |
    (.metadata.labels["dra-driver-nvidia-gpu-component"] //
     (if .metadata.labels["resource.nvidia.com/computeDomain"] then "compute-domain-daemon" else null end) //
     ((.metadata.generateName // .metadata.name) | sub("-[a-z0-9]{5,10}-?$"; "") | sub("-$"; ""))) as $c |
    .spec.nodeName as $n | .metadata.uid as $u |
    .status.containerStatuses[]? | select(.containerID != null and .state.running != null) |
    "\($c)/\(.name) \($n) \($u) \(.containerID | sub("^[a-z]+://"; ""))"'
}

stat_field() { awk -v k="$2" '$1 == k { print $2; exit }' "$1/memory.stat"; }
status_kib() { awk -v k="$2:" '$1 == k { print $2; exit }' "/proc/$1/status" 2>/dev/null || true; }

# sample: prints "key ws usage inact_f act_f rss vmrss vmhwm" (bytes; KiB * 1024 for the Vm*).
sample() {
  local key node uid id dir usage inact act rss ws pid main procs p ppid
  while read -r key node uid id; do
    dir=
    for d in "$CG/$node/kubepods/pod$uid/$id" "$CG/$node/kubepods/burstable/pod$uid/$id" \
      "$CG/$node/kubepods/besteffort/pod$uid/$id"; do
      [[ -d $d ]] && { dir=$d; break; }
    done
    [[ -n $dir ]] || continue
    # A container that ends between the listing and the reads is skipped.
    usage=$(cat "$dir/memory.usage_in_bytes" 2>/dev/null) || continue
    inact=$(stat_field "$dir" total_inactive_file 2>/dev/null) || continue
    act=$(stat_field "$dir" total_active_file 2>/dev/null) || continue
    rss=$(stat_field "$dir" total_rss 2>/dev/null) || continue
    [[ -n $usage && -n $inact && -n $act && -n $rss ]] || continue
    ws=$((usage > inact ? usage - inact : 0))
    mapfile -t procs < <(cat "$dir/cgroup.procs" 2>/dev/null)
    main=
    for p in "${procs[@]}"; do
      ppid=$(awk '$1 == "PPid:" { print $2 }' "/proc/$p/status" 2>/dev/null) || continue
      [[ " ${procs[*]} " == *" $ppid "* ]] || { main=$p; break; }
    done
    # The process may be gone between the listing and the reads (a restart): 0 then.
    local vmrss=0 vmhwm=0 kib
    if [[ -n $main ]]; then
      kib=$(status_kib "$main" VmRSS); vmrss=$((${kib:-0} * 1024))
      kib=$(status_kib "$main" VmHWM); vmhwm=$((${kib:-0} * 1024))
    fi
    echo "$key $ws $usage $inact $act $rss $vmrss $vmhwm"
  done < <(containers)
}

header() { printf '%-42s %7s %7s %7s %7s %7s %7s %7s\n' "$1 (MiB)" ws usage inact_f act_f rss VmRSS VmHWM; }
table() {
  awk '{ printf "%-42s", $1; for (i = 2; i <= 8; i++) printf " %7.1f", $i / 1048576; printf "\n" }' | sort
}

# Reads samples on stdin, keeps per key the sample with the largest ws and the largest VmHWM.
peaks() {
  awk '{ if (!($1 in ws) || $2 > ws[$1]) { ws[$1] = $2; line[$1] = $0 }
         if ($8 > hwm[$1]) hwm[$1] = $8 }
       END { for (k in line) { n = split(line[k], f, " "); f[8] = hwm[k]; s = f[1];
             for (i = 2; i <= n; i++) s = s " " f[i]; print s } }'
}

watch_until() { # watch_until <pid or 0> <deadline epoch s or 0>
  local pid=$1 end=$2
  while :; do
    sample
    [[ $pid == 0 ]] || kill -0 "$pid" 2>/dev/null || break
    [[ $end == 0 ]] || ((EPOCHSECONDS < end)) || break
    sleep "$INTERVAL"
  done
}

echo "pod_memory: namespace $NS, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
header "now"
sample | table
case $MODE in
snapshot) exit 0 ;;
watch)
  watch_until 0 $((EPOCHSECONDS + WATCH)) | peaks >"${TMPDIR:-/tmp}/pod_memory.$$"
  label="peak over ${WATCH}s" ;;
during)
  "$@" &
  cmd=$!
  watch_until "$cmd" 0 | peaks >"${TMPDIR:-/tmp}/pod_memory.$$"
  rc=0
  wait "$cmd" || rc=$?
  label="peak during: $* (rc $rc)" ;;
esac
echo "$label"
header "peak ws sample (VmHWM: the largest seen)"
table <"${TMPDIR:-/tmp}/pod_memory.$$"
rm -f "${TMPDIR:-/tmp}/pod_memory.$$"
