#!/usr/bin/env bats
# What the GPU plugin tells the cluster when something is wrong on the node: a corrupt checkpoint
# (Warning Event on the Node, metric, the plugin carries on). Pods run on node 1 (mock h100-8x).
# Run through run.sh.

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace gpu-health
  record_baseline "$GPU_NODE"
}

teardown_file() {
  load lib
  load gpu_lib
  # A test that failed half-way must not leave the node's plugin stopped.
  "$REPO_ROOT/hack/cluster/gpu-plugin.sh" start "$GPU_NODE" >/dev/null
  kubectl delete namespace "$E2E_NS" --wait=false >/dev/null 2>&1 || true
}

setup() {
  load lib
  load gpu_lib
}

teardown() {
  clean_node "$GPU_NODE"
}

plugin_metric() {
  curl -sf "http://127.0.0.1:$((10280 + 100 * ($(node_idx "$1") - 1)))/metrics" |
    awk -v m="$2" '$1 == m {print $2}'
}

@test "a corrupt checkpoint is moved aside, reported as a Node event and a metric, and the plugin works on" {
  local dir cp before_events
  dir="$(node_var "$(node_idx "$GPU_NODE")" KUBELET_DIR)/plugins/$DRIVER"
  cp="$dir/checkpoint.json"
  before_events=$(kubectl get events -A -o json \
    --field-selector "involvedObject.kind=Node,involvedObject.name=$GPU_NODE,reason=CheckpointCorrupt" |
    jq '[.items[] | .count // 1] | add // 0')

  "$REPO_ROOT/hack/cluster/gpu-plugin.sh" stop "$GPU_NODE"
  rm -f "$dir"/checkpoint.json.corrupt-*
  printf '{"checksum": 1, "data": {"preparedClaims": {tru' >"$cp"
  "$REPO_ROOT/hack/cluster/gpu-plugin.sh" start "$GPU_NODE"

  # The corrupt bytes are kept for a post-mortem, and a fresh checkpoint took their place.
  local moved
  moved=$(find "$dir" -maxdepth 1 -name 'checkpoint.json.corrupt-*' | head -n 1)
  [ -n "$moved" ]
  grep -q 'preparedClaims": {tru' "$moved"
  jq -e '.data.preparedClaims' "$cp" >/dev/null

  # The Node carries a Warning event that says what happened and where the file went.
  local deadline=$((SECONDS + 20)) events
  while :; do
    events=$(kubectl get events -A -o json \
      --field-selector "involvedObject.kind=Node,involvedObject.name=$GPU_NODE,reason=CheckpointCorrupt")
    (($(jq '[.items[] | .count // 1] | add // 0' <<<"$events") > before_events)) && break
    ((SECONDS < deadline)) || { echo "no CheckpointCorrupt event; have: $events" >&2; false; }
    sleep 0.5
  done
  jq -e --arg m "$(basename "$moved")" \
    '[.items[] | select(.type == "Warning" and (.message | contains($m)))] | length > 0' <<<"$events"
  [ "$(plugin_metric "$GPU_NODE" nvidia_dra_checkpoint_corruptions_total)" = 1 ]

  # The plugin goes on preparing claims.
  claim_template single-gpu
  pod pod1 "$GPU_NODE" "gpu=template:single-gpu"
  wait_pod_phase pod1 Running 60
  wait_log pod1
  assert_gpus pod1 1
  rm -f "$dir"/checkpoint.json.corrupt-*
}
