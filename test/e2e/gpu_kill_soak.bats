#!/usr/bin/env bats
# Kill soak (docs/development.md "Kill soak"): pods with GPU claims are created and deleted without
# pause on both nodes (full GPUs, MIG devices, a claim shared by two pods, time-sliced GPUs) while
# the GPU plugin's process is killed with SIGKILL at random moments, SOAK_KILLS times (10: the
# short variant; 500: the long run; unset: skipped). After each restart the churn pauses until the
# nodes settle and the invariants are checked:
#   1. every Running pod sees exactly the devices its claims are allocated (nvidia-smi -L);
#   2. every CDI spec has a prepared claim in the checkpoint and every prepared claim its spec;
#   3. the checkpoint holds the claims the kubelet's own DRA checkpoint holds;
#   4. no GPU keeps a time-slice and no MPS control daemon runs for a claim that is not prepared.
# It prints kills, pods started, violations and the longest start of a pod that a kill overlapped.
# Run through run.sh; needs 2 nodes for the MIG pods (with one, MIG pods are left out).

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
# While $SOAK_DIR/pause exists it creates nothing and says so with $SOAK_DIR/paused.
churn() {
  set +e  # a failed create or delete must not end the churn
  local i=0 kind live=() g
  while [[ ! -f $SOAK_DIR/stop ]]; do
    if [[ -f $SOAK_DIR/pause ]]; then
      touch "$SOAK_DIR/paused"
      sleep 0.2
      continue
    fi
    rm -f "$SOAK_DIR/paused"
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
    sleep "0.$((RANDOM % 10))"
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

# Pauses the churn and waits (at most 180 s) until every pod runs and nothing is being deleted or
# prepared: no pod Pending or terminating, no PrepareStarted entry in the checkpoints.
settle() {
  touch "$SOAK_DIR/pause"
  wait_for 30 "the churn to pause" test -f "$SOAK_DIR/paused"
  wait_for 180 "the soak pods to settle" settled || { unsettled >&2; return 1; }
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
  k get pods -o json | jq -e 'all(.items[]; .metadata.deletionTimestamp == null and .status.phase == "Running")' >/dev/null || return 1
  for n in $(soak_nodes); do
    [[ $(jq '[.data.preparedClaims[] | select(.state != "PrepareCompleted")] | length' "$(checkpoint_file "$n")") == 0 ]] || return 1
    [[ $(kubelet_claims "$n") == $(checkpoint_uids "$n") ]] || return 1
  done
}
resume() { rm -f "$SOAK_DIR/pause"; }

# --- Invariants (each prints one line per violation) --------------------------------------------

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

check_devices() {
  local p claims want got c
  for p in $(k get pods -o json | jq -r '.items[] | select(.status.phase == "Running") | .metadata.name'); do
    want=$(k get pod "$p" -o json | jq -r '(.status.resourceClaimStatuses[]?.resourceClaimName // empty),
      (.spec.resourceClaims[]? | .resourceClaimName // empty)' | sort -u |
      while read -r c; do allocated "$c"; done | while read -r d; do slice_uuid "$d"; done | sort)
    wait_log "$p" || { echo "pod $p runs but printed nothing"; continue; }
    got=$(k logs "$p" 2>/dev/null | grep -oE '(GPU|MIG)-[0-9a-f-]+' | sort)
    [[ $want == MIG-* ]] && got=$(grep '^MIG-' <<<"$got")
    [[ $want == MIG-* ]] || got=$(grep '^GPU-' <<<"$got")
    [[ $want == "$got" ]] || echo "pod $p sees [$(echo $got)], its claims are allocated [$(echo $want)]"
  done
}
check_cdi_checkpoint() {
  local n=$1
  comm -23 <(cdi_uids "$n") <(checkpoint_uids "$n") | sed "s/^/$n: CDI spec without a prepared claim: /"
  comm -13 <(cdi_uids "$n") <(checkpoint_uids "$n") | sed "s/^/$n: prepared claim without a CDI spec: /"
}
check_kubelet() {
  local n=$1
  comm -23 <(kubelet_claims "$n") <(checkpoint_uids "$n") | sed "s/^/$n: the kubelet has prepared, the checkpoint not: /"
  comm -13 <(kubelet_claims "$n") <(checkpoint_uids "$n") | sed "s/^/$n: in the checkpoint, not prepared for the kubelet: /"
}
check_sharing() {
  local n=$1 cp held idx uuid
  cp=$(checkpoint_file "$n")
  held=$(jq -r '.data.preparedClaims[] | ((.preparedDevices[]? | select(.timeSliceApplied == true) | .uuid),
    (.steps[]? | select(.name == "timeSlicing") | .undo[]?.gpus[]?))' "$cp" | sort -u)
  node_smi "$n" compute-policy -l 2>/dev/null | awk '$1 == "GPU" && $4 != "Default" {print $2}' | while read -r idx; do
    uuid=$(node_smi "$n" -L | grep -E "^GPU $idx:" | grep -oE 'GPU-[0-9a-f-]+')
    grep -qx "$uuid" <<<"$held" || echo "$n: GPU $uuid keeps a time-slice no prepared claim holds"
  done
  held=$(jq -r '.data.preparedClaims[] | .steps[]? | select(.name == "mpsDaemons") | .undo[]?.id' "$cp" | sort -u)
  kubectl -n "$DRIVER_NS" get deployments -o name 2>/dev/null | grep -oE 'mps-control-daemon-.*' |
    sed 's/^mps-control-daemon-//' | while read -r id; do
    grep -qx "$id" <<<"$held" || echo "$n: MPS control daemon $id runs for no prepared claim"
  done
}
check_all() {
  local n
  check_devices
  for n in $(soak_nodes); do
    check_cdi_checkpoint "$n"
    check_kubelet "$n"
    check_sharing "$n"
  done
}

# Records "<pod> <created s> <started s>" of every running pod, once per pod.
record_starts() {
  k get pods -o json | jq -r '.items[] | select(.status.containerStatuses[0].state.running.startedAt != null) |
    "\(.metadata.name) \(.metadata.creationTimestamp | fromdate) \(.status.containerStatuses[0].state.running.startedAt | fromdate)"' \
    >>"$SOAK_DIR/starts"
}

# kill -9 of the plugin process on node $1 (a crash: no shutdown code runs). The kubelet restarts
# the container in place; once its restart back-off grows (CrashLoopBackOff), the pod is deleted
# instead and the DaemonSet's new pod starts at once, so that the soak measures the plugin, not the
# kubelet's back-off. Returns when the plugin is Ready again.
soak_kill() {
  local n=$1 pod before p pid= deadline
  pod=$(plugin_pod "$n")
  before=$(plugin_restarts "$n")
  for p in $(pgrep -f "(^|/)gpu-kubelet-plugin( |\$)"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "NODE_NAME=$n" && pid=$p
  done
  [[ -n $pid ]] || { echo "no gpu-kubelet-plugin process of $n found" >&2; return 1; }
  kill -9 "$pid"
  echo "$(date +%s) $n" >>"$SOAK_DIR/kills"
  deadline=$((SECONDS + 20))
  until (($(plugin_restarts "$n") > before)) && plugin_ready "$n"; do
    if [[ $(kubectl -n "$DRIVER_NS" get pod "$pod" -o jsonpath='{.status.containerStatuses[?(@.name=="gpus")].state.waiting.reason}') == CrashLoopBackOff ]] ||
      ((SECONDS > deadline)); then
      kubectl -n "$DRIVER_NS" delete pod "$pod" --grace-period=0 --force >/dev/null 2>&1 || true
      echo replaced >>"$SOAK_DIR/replaced"
      wait_plugin_ready "$n" "$pod"
      return
    fi
    sleep 0.2
  done
}

@test "kill soak: SIGKILL of the plugin under pod churn, invariants after every restart" {
  # Opt-in until a run on the cluster has passed (docs/soak-and-podstart.md "Results").
  [[ -n ${SOAK_KILLS:-} ]] || skip "set SOAK_KILLS (10: the short variant, 500: the long run)"
  local kills=$SOAK_KILLS i n violations=0 v started=0 start_s=$SECONDS
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
  : >"$SOAK_DIR/kills"
  : >"$SOAK_DIR/starts"
  : >"$SOAK_DIR/violations"
  rm -f "$SOAK_DIR/stop" "$SOAK_DIR/pause" "$SOAK_DIR/paused" "$SOAK_DIR/replaced"
  churn 3>&- &
  CHURN_PID=$!

  local nodes=($(soak_nodes))
  for ((i = 1; i <= kills; i++)); do
    sleep "$((RANDOM % 4)).$((RANDOM % 10))"
    n=${nodes[RANDOM % ${#nodes[@]}]}
    soak_kill "$n"
    settle
    record_starts
    v=$(check_all)
    if [[ -n $v ]]; then
      violations=$((violations + $(grep -c . <<<"$v")))
      printf 'after kill %d (%s):\n%s\n' "$i" "$n" "$v" | tee -a "$SOAK_DIR/violations" >&3
    fi
    resume
    ((i % 10)) || echo "# soak: $i/$kills kills, $violations violations, $((SECONDS - start_s)) s" >&3
  done

  # The end: churn stopped, everything settled, the same checks once more.
  touch "$SOAK_DIR/stop"
  wait "$CHURN_PID" || true
  CHURN_PID=
  wait_for 180 "the soak pods to settle" settled || { unsettled >&2; false; }
  record_starts
  v=$(check_all)
  [[ -z $v ]] || { violations=$((violations + $(grep -c . <<<"$v"))); printf 'at the end:\n%s\n' "$v" | tee -a "$SOAK_DIR/violations" >&3; }

  # Longest start (create -> container started) of a pod whose start a kill fell into.
  started=$(sort -u -k1,1 "$SOAK_DIR/starts" | grep -c . || true)
  local longest
  longest=$(sort -u -k1,1 "$SOAK_DIR/starts" | awk -v kf="$SOAK_DIR/kills" '
    BEGIN { while ((getline l < kf) > 0) { split(l, a, " "); k[++nk] = a[1] } }
    { for (i = 1; i <= nk; i++) if (k[i] >= $2 && k[i] <= $3) { if ($3 - $2 > m) m = $3 - $2; break } }
    END { print m + 0 }')
  echo "# soak: kills $kills (pods replaced after CrashLoopBackOff: $(grep -c . "$SOAK_DIR/replaced" 2>/dev/null || echo 0)), pods started $started, invariant violations $violations, longest start a kill overlapped ${longest}s, $((SECONDS - start_s)) s" >&3
  [ "$violations" -eq 0 ]
  ((started > 0))
}
