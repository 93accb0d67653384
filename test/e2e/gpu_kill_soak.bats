#!/usr/bin/env bats
# Kill soak (docs/soak-and-podstart.md): pods with GPU claims are created and deleted on both nodes
# (full GPUs, MIG devices, a claim shared by two pods, time-sliced GPUs) while the GPU plugin's
# process is killed with SIGKILL at random moments, SOAK_KILLS times (default 10, the short variant
# the test command runs, about a minute; 500: the long run), in rounds of one kill or of one kill
# on each node. After each round the churn pauses until the nodes settle and the invariants are
# checked:
#   1. every Running pod sees exactly the devices its claims are allocated (nvidia-smi -L);
#   2. every CDI spec has a prepared claim in the checkpoint and every prepared claim its spec;
#   3. the checkpoint holds the claims the kubelet's own DRA checkpoint holds;
#   4. no GPU keeps a time-slice and no MPS control daemon runs for a claim that is not prepared.
# It prints kills, pods started, violations, the longest start of a pod that a kill overlapped and
# where the time per kill goes (a progress line every 25 kills). Run through run.sh; needs 2 nodes
# for the MIG pods (with one, MIG pods are left out).

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace gpu-soak
  record_baseline "$GPU_NODE"
  [[ -z $MIG_NODE ]] || record_baseline "$MIG_NODE"
}

teardown_file() {
  load lib
  load gpu_lib
  kubectl delete namespace "$E2E_NS" --wait=false >/dev/null 2>&1 || true
}

setup() {
  load lib
  load gpu_lib
  SOAK_DIR=$BATS_FILE_TMPDIR/soak
  mkdir -p "$SOAK_DIR"
}

teardown() {
  touch "$SOAK_DIR/stop"
  [[ -z ${CHURN_PID:-} ]] || wait "$CHURN_PID" 2>/dev/null || true
  clean_node "$GPU_NODE"
  [[ -z $MIG_NODE ]] || clean_node "$MIG_NODE"
}

soak_nodes() { echo "$GPU_NODE" ${MIG_NODE:+"$MIG_NODE"}; }
now_ms() { date +%s%3N; }

# --- The churn: groups of pods created and deleted until $SOAK_DIR/stop exists ------------------
# A group is one pod (full GPU, MIG or time-sliced, claim from a template) or two pods sharing one
# ResourceClaim. At most 4 groups live on the GPU node and 3 on the MIG node; the oldest goes first.
# While $SOAK_DIR/pause exists it creates and deletes nothing, and says so by copying it to
# $SOAK_DIR/paused (it holds the kill's number: a paused file from an earlier pause does not count).
churn() {
  set +e  # a failed create or delete must not end the churn
  local i=0 kind live=() g
  while [[ ! -f $SOAK_DIR/stop ]]; do
    if [[ -f $SOAK_DIR/pause ]]; then
      cp "$SOAK_DIR/pause" "$SOAK_DIR/paused"
      sleep 0.1
      continue
    fi
    i=$((i + 1))
    kind=$((RANDOM % 4))
    [[ -n $MIG_NODE ]] || ((kind != 1)) || kind=0
    g="g$i"
    case $kind in
      0) pod "$g" "$GPU_NODE" "gpu=template:soak-gpu" ;;
      1) pod "$g" "$MIG_NODE" "mig=template:soak-mig" ;;
      2) claim "$g" && pod "$g-a" "$GPU_NODE" "gpu=claim:$g" && pod "$g-b" "$GPU_NODE" "gpu=claim:$g" ;;
      3) pod "$g" "$GPU_NODE" "gpu=template:soak-ts" ;;
    esac
    live+=("$kind:$g")
    # The oldest group of the node this one went to, when that node is full.
    local on_gpu=0 on_mig=0 x
    for x in "${live[@]}"; do if [[ $x == 1:* ]]; then on_mig=$((on_mig + 1)); else on_gpu=$((on_gpu + 1)); fi; done
    for x in "${live[@]}"; do
      if { [[ $x == 1:* ]] && ((on_mig > 3)); } || { [[ $x != 1:* ]] && ((on_gpu > 4)); }; then
        delete_group "$x"
        local keep=() y
        for y in "${live[@]}"; do [[ $y == "$x" ]] || keep+=("$y"); done
        live=("${keep[@]}")
        break
      fi
    done
    sleep "0.$((RANDOM % 5))"
  done
}
delete_group() {
  local g=${1#*:}
  if [[ $1 == 2:* ]]; then
    k delete pod "$g-a" "$g-b" --wait=false >/dev/null 2>&1
    k delete resourceclaim "$g" --wait=false >/dev/null 2>&1
  else
    k delete pod "$g" --wait=false >/dev/null 2>&1
  fi
}

# sjq [jq options] <definition call> [files]: jq with the soak's definitions (soak.jq).
sjq() {
  local opts=()
  while [[ $1 == -* ]]; do
    opts+=("$1")
    [[ $1 == --slurpfile || $1 == --arg ]] && { opts+=("$2" "$3"); shift 2; }
    shift
  done
  local program=$1
  shift
  jq -L "$BATS_TEST_DIRNAME" "${opts[@]}" "include \"soak\"; $program" "$@"
}

# The soak's pods and claims (one `kubectl get pods,resourceclaims`): $SOAK_DIR/all.json, and the
# pods alone in $SOAK_DIR/pods.json.
fetch_pods() {
  k get pods,resourceclaims -o json >"$SOAK_DIR/all.json.tmp" &&
    jq '{items: [.items[] | select(.kind == "Pod")]}' "$SOAK_DIR/all.json.tmp" >"$SOAK_DIR/pods.json" &&
    mv -f "$SOAK_DIR/all.json.tmp" "$SOAK_DIR/all.json"
}

# Waits (at most 180 s) until every pod runs and nothing is being deleted or prepared: no pod
# Pending or terminating, no PrepareStarted entry in the checkpoints, the kubelet's and the
# plugin's claim sets equal. The churn is paused already (soak_kill).
# The kubelet's retries are slow: a pod whose NodePrepareResources failed while the plugin was down
# is retried only at the pod's next periodic sync (syncFrequency, 1 min plus up to 50 %: SyncPod
# returns from a failed prepare without an error, kuberuntime_manager.go in v1.36), and a pod whose
# NodeUnprepareResources failed after the 10-15 s error back-off of its pod worker. Any change of
# the pod object reaches its worker at once, so the soak annotates (soak-nudge) the pods that still
# wait, every second: Pending pods with a FailedPrepareDynamicResources event since the kill, and
# pods terminating for more than 1 s. They are counted ($SOAK_DIR/nudged): the soak measures the
# plugin, not the kubelet's retry timers (docs/soak-and-podstart.md).
settle() {
  local deadline=$((SECONDS + 180)) next_nudge=0 waiting
  wait_for 30 "the churn to pause" cmp -s "$SOAK_DIR/pause" "$SOAK_DIR/paused"
  until settled; do
    ((SECONDS < deadline)) || { echo "timed out waiting for the soak pods to settle" >&2; unsettled >&2; return 1; }
    if ((SECONDS >= next_nudge)); then
      next_nudge=$((SECONDS + 1))
      fetch_pods || continue
      waiting=$(k get events -o json --field-selector reason=FailedPrepareDynamicResources |
        sjq -r --slurpfile pods "$SOAK_DIR/pods.json" --arg t "$(date -u -d "@$((KILL_S - 1))" +%FT%TZ)" \
          --arg old "$(date -u -d "@$(($(date +%s) - 1))" +%FT%TZ)" 'waiting_pods($pods[0]; $t; $old)')
      if [[ -n $waiting ]]; then
        # shellcheck disable=SC2086 # one name per word
        k annotate pods $waiting --overwrite "soak-nudge=$(now_ms)" >/dev/null 2>&1 || true
        echo "$waiting" >>"$SOAK_DIR/nudged"
      fi
    fi
    sleep 0.2
  done
}
# What keeps the nodes from settling, for the log of a failed run.
unsettled() {
  local n
  k get pods -o wide
  for n in $(soak_nodes); do
    echo "$n: kubelet claims [$(kubelet_claims "$n" | xargs)], checkpoint [$(checkpoint_uids "$n" | xargs)]"
    jq -c '.data.preparedClaims | to_entries[] | select(.value.state != "PrepareCompleted") | {uid: .key, state: .value.state}' "$(checkpoint_file "$n")"
  done
  k get events --sort-by=.lastTimestamp | tail -n 20
}
settled() {
  local n
  for n in $(soak_nodes); do
    [[ $(jq '[.data.preparedClaims[] | select(.state != "PrepareCompleted")] | length' "$(checkpoint_file "$n")") == 0 ]] ||
      { trace "$n: a claim being prepared"; return 1; }
    [[ $(kubelet_claims "$n") == $(checkpoint_uids "$n") ]] || { trace "$n: kubelet and checkpoint differ"; return 1; }
  done
  fetch_pods || return 1
  jq -e 'all(.items[]; .metadata.deletionTimestamp == null and .status.phase == "Running")' "$SOAK_DIR/pods.json" >/dev/null || {
    trace "$(jq -r '[.items[] | select(.metadata.deletionTimestamp != null or .status.phase != "Running") |
      "\(.metadata.name):\(if .metadata.deletionTimestamp then "terminating" else .status.phase end)"] | join(" ")' "$SOAK_DIR/pods.json")"
    return 1
  }
}
# With SOAK_TRACE=<file>, what each wait of settle waited for, with a timestamp (ms).
trace() { [[ -z ${SOAK_TRACE:-} ]] || echo "$(now_ms) $*" >>"$SOAK_TRACE"; }
resume() { rm -f "$SOAK_DIR/pause"; }

# --- Invariants (each prints one line per violation) --------------------------------------------
# They read a snapshot in $SOAK_DIR/snap, taken while the churn is paused and the nodes settled
# (snapshot): the pods (pods.json of settled), the claims, the MPS Deployments, and per node its
# checkpoint, the kubelet's claims, the CDI specs, the GPUs' compute policies and each new pod's
# log (from the node's pod-logs folder on the host).

checkpoint_file() { echo "$(node_var "$(node_idx "$1")" KUBELET_DIR)/plugins/$DRIVER/checkpoint.json"; }
checkpoint_uids() { jq -r '.data.preparedClaims | keys[]' "$(checkpoint_file "$1")" | sort; }
cdi_uids() { cdi_specs "$1" | sed -E 's/.*-claim_([0-9a-f-]{36}).*/\1/' | sort -u; }
# The claim UIDs in the kubelet's own DRA checkpoint (its claim info cache, "dra_manager_state").
kubelet_claims() {
  local f
  f=$(find "$(node_var "$(node_idx "$1")" KUBELET_DIR)" -maxdepth 1 -name 'dra_manager_state*' | head -n 1)
  [[ -n $f ]] || return 0
  grep -oE 'ClaimUID[^0-9a-f]{1,12}[0-9a-f-]{36}' "$f" | grep -oE '[0-9a-f-]{36}$' | sort -u
}
# The folder of pod $2 (uid $3) of namespace $1 in its node's pod-logs (node $4), on the host.
pod_log_dir() { echo "$(node_var "$(node_idx "$4")" STATE_DIR)/pod-logs/$1_$2_$3"; }

snapshot() {
  local d=$SOAK_DIR/snap n p uid node f
  rm -rf "$d" && mkdir -p "$d"
  cp "$SOAK_DIR/pods.json" "$d/pods.json"
  jq '{items: [.items[] | select(.kind == "ResourceClaim")]}' "$SOAK_DIR/all.json" >"$d/claims.json"
  local jobs=()
  kubectl -n "$DRIVER_NS" get deployments -o name >"$d/deployments" 2>/dev/null &
  jobs+=($!)
  for n in $(soak_nodes); do
    mkdir -p "$d/$n"
    cp "$(checkpoint_file "$n")" "$d/$n/checkpoint.json"
    kubelet_claims "$n" >"$d/$n/kubelet"
    cdi_uids "$n" >"$d/$n/cdi"
    node_smi "$n" compute-policy -l >"$d/$n/policy" 2>/dev/null
    node_smi "$n" -L >"$d/$n/smi" 2>/dev/null
    # One pass over the checkpoint: "K <uid>" per entry, "N <uid>" per entry not PrepareCompleted,
    # "T <uuid>" per GPU a claim time-sliced, "M <id>" per MPS daemon a claim started.
    sjq -r checkpoint_entries "$d/$n/checkpoint.json" >"$d/$n/entries"
    sed -n 's/^K //p' "$d/$n/entries" | sort >"$d/$n/checkpoint"
  done
  # Each Running pod's `nvidia-smi -L` (printed once at container start), read once per pod.
  jq -r '.items[] | select(.status.phase == "Running") | "\(.metadata.name) \(.metadata.uid) \(.spec.nodeName)"' "$d/pods.json" |
    while read -r p uid node; do
      f=$SOAK_DIR/logs/$uid
      [[ -s $f ]] || read_pod_devices "$p" "$uid" "$node" >"$f" || rm -f "$f"
    done
  wait "${jobs[@]}" # not the churn
}
# The device UUIDs in the pod's log (CRI format, newest container log), waiting up to 30 s for
# `nvidia-smi -L` to have printed; a "#" line marks the log as read.
read_pod_devices() {
  local dir log deadline=$((SECONDS + 30))
  dir=$(pod_log_dir "$E2E_NS" "$1" "$2" "$3")/ctr
  # shellcheck disable=SC2012 # the newest by time; the kubelet names them N.log
  until log=$(ls -t "$dir"/*.log 2>/dev/null | head -n 1) && [[ -n $log ]] &&
    grep -qE ' (GPU |No devices|[Ee]rror|Failed)' "$log"; do
    ((SECONDS < deadline)) || { echo "pod $1 printed nothing in 30 s ($dir)" >&2; return 1; }
    sleep 0.2
  done
  grep -oE '(GPU|MIG)-[0-9a-f-]+' "$log" | sort
  echo "# $1"
}

# 1. Every Running pod sees exactly the devices its claims are allocated (UUIDs the slices
# announced, read once: $SOAK_DIR/uuids).
check_devices() {
  local d=$SOAK_DIR/snap p uid want got
  sjq -r --slurpfile claims "$d/claims.json" --slurpfile uuids "$SOAK_DIR/uuids" \
    'pod_devices($claims[0]; $uuids[0])' "$d/pods.json" | while IFS=$'\t' read -r p uid want; do
    [[ -s $SOAK_DIR/logs/$uid ]] || { echo "pod $p runs but printed nothing"; continue; }
    if [[ $want == MIG-* ]]; then got=$(grep '^MIG-' "$SOAK_DIR/logs/$uid"); else got=$(grep '^GPU-' "$SOAK_DIR/logs/$uid"); fi
    # shellcheck disable=SC2086,SC2116 # word splitting puts the lines on one
    got=$(echo $got)
    [[ $want == "$got" ]] || echo "pod $p sees [$got], its claims are allocated [$want]"
  done
}
# 2. CDI specs and checkpoint entries match one to one.
check_cdi_checkpoint() {
  local d=$SOAK_DIR/snap/$1
  comm -23 "$d/cdi" "$d/checkpoint" | sed "s/^/$1: CDI spec without a prepared claim: /"
  comm -13 "$d/cdi" "$d/checkpoint" | sed "s/^/$1: prepared claim without a CDI spec: /"
  sed -n "s/^N /$1: claim not PrepareCompleted after the nodes settled: /p" "$d/entries"
}
# 3. The checkpoint holds what the kubelet believes is prepared.
check_kubelet() {
  local d=$SOAK_DIR/snap/$1
  comm -23 "$d/kubelet" "$d/checkpoint" | sed "s/^/$1: the kubelet has prepared, the checkpoint not: /"
  comm -13 "$d/kubelet" "$d/checkpoint" | sed "s/^/$1: in the checkpoint, not prepared for the kubelet: /"
}
# 4. No time-slice on a GPU that no prepared claim of the node holds.
check_timeslice() {
  local d=$SOAK_DIR/snap/$1 idx uuid
  awk '$1 == "GPU" && $4 != "Default" {print $2}' "$d/policy" | while read -r idx; do
    uuid=$(grep -E "^GPU $idx:" "$d/smi" | grep -oE 'GPU-[0-9a-f-]+')
    grep -qx "T $uuid" "$d/entries" || echo "$1: GPU $uuid keeps a time-slice no prepared claim holds"
  done
}
# 4. No MPS control daemon (a Deployment in the driver's namespace) for a claim no node has prepared.
check_mps() {
  local n id
  grep -oE 'mps-control-daemon-.*' "$SOAK_DIR/snap/deployments" | sed 's/^mps-control-daemon-//' | while read -r id; do
    for n in $(soak_nodes); do grep -qx "M $id" "$SOAK_DIR/snap/$n/entries" && continue 2; done
    echo "MPS control daemon $id runs for no prepared claim"
  done
}
check_all() {
  local n
  check_devices
  for n in $(soak_nodes); do
    check_cdi_checkpoint "$n"
    check_kubelet "$n"
    check_timeslice "$n"
  done
  check_mps
}

# Records "<pod> <created s> <started s>" of every running pod, from $SOAK_DIR/pods.json.
record_starts() {
  jq -r '.items[] | select(.status.containerStatuses[0].state.running.startedAt != null) |
    "\(.metadata.name) \(.metadata.creationTimestamp | fromdate) \(.status.containerStatuses[0].state.running.startedAt | fromdate)"' \
    "$SOAK_DIR/pods.json" >>"$SOAK_DIR/starts"
}

# One round of kills: kill -9 (a crash: no shutdown code runs) of the plugin process of one random
# node or, in half of the rounds (with two nodes and $2 > 1 kills left), of both nodes in random
# order 0-0.9 s apart, the second while the first restarts. The churn pauses at the first kill
# ($1 marks the pause): no new pods while the plugins restart. The kubelet restarts the container
# in place: the local nodes cap its crash-loop back-off at 1 s (docs/development.md), so every kill
# is a restart in the same pod, never a new pod. Returns when every killed plugin has a new
# process; settle then waits for whatever needs it registered again, so a later kill may also hit
# a process that is still starting or not yet registered with the kubelet (its plugin watcher
# takes about 1.5 s). Sets KILLED to the number of kills; appends "<kill ms> <new process ms>
# <node>" per kill to $SOAK_DIR/kills.
kill_round() {
  local nodes targets=() pids=() t0s=() j n new
  read -ra nodes <<<"$(soak_nodes)"
  if ((${#nodes[@]} > 1 && $2 > 1 && RANDOM % 2)); then
    if ((RANDOM % 2)); then targets=("${nodes[0]}" "${nodes[1]}"); else targets=("${nodes[1]}" "${nodes[0]}"); fi
  else
    targets=("${nodes[RANDOM % ${#nodes[@]}]}")
  fi
  for j in "${!targets[@]}"; do
    ((j == 0)) || sleep "0.$((RANDOM % 10))"
    n=${targets[j]}
    pids[j]=$(plugin_pid "$n") || { echo "no gpu-kubelet-plugin process of $n found" >&2; return 1; }
    kill -9 "${pids[j]}"
    t0s[j]=$(now_ms)
    if ((j == 0)); then
      KILL_S=$((t0s[0] / 1000))
      echo "$1" >"$SOAK_DIR/pause"
    fi
  done
  for j in "${!targets[@]}"; do
    n=${targets[j]}
    until new=$(plugin_pid "$n") && [[ $new != "${pids[j]}" ]]; do
      (($(now_ms) - t0s[j] < 60000)) || {
        echo "the kubelet did not restart the plugin container of $n within 60 s (is the node's crash-loop back-off capped? hack/cluster/up.sh --nodes 2 writes it)" >&2
        plugin_pods -o wide >&2
        return 1
      }
      sleep 0.05
    done
    echo "${t0s[j]} $(now_ms) $n" >>"$SOAK_DIR/kills"
  done
  KILLED=${#targets[@]}
}

# The restart count of plugin pod $1 is $2 + $3.
restarts_grew() {
  local r
  r=$(kubectl -n "$DRIVER_NS" get pod "$1" -o jsonpath='{.status.containerStatuses[?(@.name=="gpus")].restartCount}')
  ((r == $2 + $3)) || { echo "$1: restart count $2 -> $r, kills $3" >&2; return 1; }
}

# Mean seconds per kill of each phase so far, from $SOAK_DIR/phases (per round, milliseconds: from
# the churn's resumption to the first kill (the checks run in this time, then a random pause), to
# the last new process, to settled nodes and the snapshot the checks read; and the round's kills).
phase_means() {
  awk '{ for (i = 1; i <= 4; i++) s[i] += $i } END { if (s[4]) printf "per kill (mean s): churn running, checks, kill %.1f, kill to new process %.1f, settle and snapshot %.1f, total %.1f (%.2f kills per round)",
    s[1]/s[4]/1000, s[2]/s[4]/1000, s[3]/s[4]/1000, (s[1]+s[2]+s[3])/s[4]/1000, s[4]/NR }' "$SOAK_DIR/phases"
}

@test "kill soak: SIGKILL of the plugin under pod churn, invariants after every restart" {
  local kills=${SOAK_KILLS:-10} n violations=0 v started=0 start_s=$SECONDS tc pods_before
  [[ $kills =~ ^[1-9][0-9]*$ ]] || { echo "SOAK_KILLS must be a positive number, not '$kills'" >&2; return 1; }
  claim_template soak-gpu
  [[ -z $MIG_NODE ]] || claim_template soak-mig mig.nvidia.com
  k apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: soak-ts}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
      config:
      - requests: [gpu]
        opaque:
          driver: gpu.nvidia.com
          parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: Long}}}
EOF
  # "pool/device" -> UUID of every device the driver announces (fixed for the run: mock hardware).
  kubectl get resourceslices -o json --field-selector "spec.driver=$DRIVER" | sjq device_uuids >"$SOAK_DIR/uuids"
  # The plugin pods and their restart counts before the soak.
  local pod restarts_before=()
  for n in $(soak_nodes); do
    pod=$(plugin_pod "$n")
    restarts_before+=("$(kubectl -n "$DRIVER_NS" get pod "$pod" -o jsonpath='{.status.containerStatuses[?(@.name=="gpus")].restartCount}')")
    pods_before+="$pod "
  done
  mkdir -p "$SOAK_DIR/logs"
  : >"$SOAK_DIR/kills"
  : >"$SOAK_DIR/phases"
  : >"$SOAK_DIR/starts"
  : >"$SOAK_DIR/violations"
  : >"$SOAK_DIR/nudged"
  rm -f "$SOAK_DIR/stop" "$SOAK_DIR/pause" "$SOAK_DIR/paused"
  churn 3>&- &
  CHURN_PID=$!

  local ta round=0 done_kills=0 k0 k1
  ta=$(now_ms)
  while ((done_kills < kills)); do
    # A random moment while the churn creates and deletes pods: after the checks of the previous
    # round (they read a snapshot) and 0-0.9 s more.
    if ((round > 0)); then
      v=$(check_all)
      if [[ -n $v ]]; then
        violations=$((violations + $(grep -c . <<<"$v")))
        printf 'after round %d (kills up to %d):\n%s\n' "$round" "$done_kills" "$v" | tee -a "$SOAK_DIR/violations" >&3
      fi
    fi
    sleep "0.$((RANDOM % 10))"
    round=$((round + 1))
    kill_round "$round" "$((kills - done_kills))"
    trace "round $round: $(tail -n "$KILLED" "$SOAK_DIR/kills" | awk '{print $3}' | xargs)"
    settle
    trace "settled"
    record_starts
    snapshot
    resume
    tc=$(now_ms)
    k0=$(tail -n "$KILLED" "$SOAK_DIR/kills" | head -n 1 | cut -d' ' -f1)
    k1=$(tail -n 1 "$SOAK_DIR/kills" | cut -d' ' -f2)
    echo "$((k0 - ta)) $((k1 - k0)) $((tc - k1)) $KILLED" >>"$SOAK_DIR/phases"
    ta=$tc
    (((done_kills + KILLED) / 25 == done_kills / 25)) ||
      echo "# soak: $((done_kills + KILLED))/$kills kills ($round rounds), $(sort -u -k1,1 "$SOAK_DIR/starts" | grep -c .) pods started, $violations violations so far, $((SECONDS - start_s)) s; $(phase_means)" >&3
    done_kills=$((done_kills + KILLED))
  done
  v=$(check_all)
  if [[ -n $v ]]; then
    violations=$((violations + $(grep -c . <<<"$v")))
    printf 'after round %d (kills up to %d):\n%s\n' "$round" "$done_kills" "$v" | tee -a "$SOAK_DIR/violations" >&3
  fi

  # The end: churn stopped, everything settled, the same checks once more.
  touch "$SOAK_DIR/stop"
  wait "$CHURN_PID" || true
  CHURN_PID=
  wait_for 180 "the soak pods to settle" settled || { unsettled >&2; false; }
  record_starts
  snapshot
  v=$(check_all)
  [[ -z $v ]] || { violations=$((violations + $(grep -c . <<<"$v"))); printf 'at the end:\n%s\n' "$v" | tee -a "$SOAK_DIR/violations" >&3; }

  # Longest start (create -> container started, whole seconds from the pod's timestamps) of a pod
  # whose start a kill fell into.
  started=$(sort -u -k1,1 "$SOAK_DIR/starts" | grep -c . || true)
  local longest pods_after='' j=0
  longest=$(sort -u -k1,1 "$SOAK_DIR/starts" | awk -v kf="$SOAK_DIR/kills" '
    BEGIN { while ((getline l < kf) > 0) { split(l, a, " "); k[++nk] = int(a[1] / 1000) } }
    { for (i = 1; i <= nk; i++) if (k[i] >= $2 && k[i] <= $3) { if ($3 - $2 > m) m = $3 - $2; break } }
    END { print m + 0 }')
  echo "# soak: kills $done_kills in $round rounds, pods started $started, invariant violations $violations, longest start a kill overlapped ${longest}s, pods nudged out of a kubelet retry wait $(sort -u "$SOAK_DIR/nudged" | grep -c . || true), $((SECONDS - start_s)) s in all; $(phase_means)" >&3
  # Every kill was a restart in place, counted by the kubelet: the plugin pods are the ones the
  # soak began with, and each one's restart count grew by the kills of its node.
  for n in $(soak_nodes); do
    pod=$(plugin_pod "$n")
    pods_after+="$pod "
    wait_for 20 "$pod's restart count to grow by the kills of $n" restarts_grew "$pod" "${restarts_before[j]}" "$(grep -c " $n\$" "$SOAK_DIR/kills" || true)"
    j=$((j + 1))
  done
  [ "$pods_after" = "$pods_before" ] || { echo "plugin pods replaced: [$pods_before] -> [$pods_after]" >&2; false; }
  [ "$violations" -eq 0 ]
  ((started > 0))
}
