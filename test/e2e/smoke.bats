#!/usr/bin/env bats
# Smoke test of the local nodes, no DRA driver involved: pods run with the locally built images,
# logs come back through the kubelet API, and containerd injects hand-written CDI devices from the
# node's own CDI spec dirs. Run through test/e2e/run.sh.

setup_file() {
  load lib
  make_test_namespace smoke
}

teardown_file() {
  load lib
  kubectl delete namespace "$E2E_NS" --wait=false >/dev/null 2>&1 || true
}

setup() {
  load lib
}

@test "every node is Ready" {
  for n in $DRA_NODES; do
    run kubectl get node "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
    [ "$status" -eq 0 ]
    [ "$output" = True ]
  done
}

@test "a pod with the workload image succeeds and its log comes back" {
  # shellcheck disable=SC2153 # DRA_NODE_<i>_NAME come from the cluster's nodes.env (run.sh)
  kubectl -n "$E2E_NS" apply -f - <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  restartPolicy: Never
  nodeName: $DRA_NODE_1_NAME
  containers:
  - name: hello
    image: $DRA_WORKLOAD_IMAGE
    imagePullPolicy: Never
    # glibc is there (the dynamic loader runs), and so is the busybox shell.
    command: ["/bin/sh", "-c", "/lib64/ld-linux-x86-64.so.2 --version | head -1; echo smoke-ok from \$(hostname)"]
EOF2
  wait_pod_phase hello Succeeded 60
  run kubectl -n "$E2E_NS" logs hello
  [ "$status" -eq 0 ]
  [[ $output == *"smoke-ok from hello"* ]]
  [[ $output == *"GNU C Library"* || $output == *"ld.so"* ]]
}

@test "a running pod has an IP from its node's pod range on every node" {
  local i=0 n ip
  for n in $DRA_NODES; do
    i=$((i + 1))
    kubectl -n "$E2E_NS" run "sleep-$i" --image="$DRA_WORKLOAD_IMAGE" --image-pull-policy=Never \
      --restart=Never --overrides="{\"spec\":{\"nodeName\":\"$n\"}}" -- sleep 600 >/dev/null
  done
  for ((j = 1; j <= i; j++)); do
    wait_pod_phase "sleep-$j" Running 60
    ip=$(kubectl -n "$E2E_NS" get pod "sleep-$j" -o jsonpath='{.status.podIP}')
    [[ $ip == 10.244.$j.* ]] || { echo "pod sleep-$j has IP '$ip'"; false; }
  done
}

# The CDI spec a DRA driver would write, by hand: a device node (its numbers taken from the host
# file, as for /dev/nvidia0) and an environment variable.
write_cdi_spec() { # <dir> <vendor/class> <device> <host device node>
  mkdir -p "$1"
  cat >"$1/${2//\//-}.json" <<EOF2
{"cdiVersion": "0.5.0", "kind": "$2",
 "devices": [{"name": "$3", "containerEdits": {
   "env": ["DRA_E2E_DEVICE=$3"],
   "deviceNodes": [{"path": "/dev/dra-e2e-$3", "hostPath": "$4", "permissions": "rw"}]}}]}
EOF2
}

@test "CDI: containerd injects a device node and env from the node's /etc/cdi and /var/run/cdi" {
  local dev=$BATS_FILE_TMPDIR/fake-gpu0 kind=e2e.dra.local/smoke$RANDOM
  mknod "$dev" c 195 7
  write_cdi_spec "$DRA_NODE_1_CDI_STATIC_DIR" "$kind" static0 "$dev"
  write_cdi_spec "$DRA_NODE_1_CDI_DYNAMIC_DIR" "$kind-dyn" dynamic0 "$dev"
  run node_ctr 1 run --rm --device "$kind=static0" --device "$kind-dyn=dynamic0" "$DRA_WORKLOAD_IMAGE" \
    "cdi-$RANDOM" sh -c 'stat -c "%n %F %t:%T" /dev/dra-e2e-*; env | grep ^DRA_E2E_DEVICE= | sort'
  rm -f "$DRA_NODE_1_CDI_STATIC_DIR/${kind//\//-}.json" "$DRA_NODE_1_CDI_DYNAMIC_DIR/${kind//\//-}-dyn.json"
  echo "$output"
  [ "$status" -eq 0 ]
  # 195:7 in hex, as stat prints it.
  [[ $output == *"/dev/dra-e2e-static0 character special file c3:7"* ]]
  [[ $output == *"/dev/dra-e2e-dynamic0 character special file c3:7"* ]]
  [[ $output == *"DRA_E2E_DEVICE=dynamic0"* || $output == *"DRA_E2E_DEVICE=static0"* ]]
}

@test "CDI: a device the spec does not inject is absent from the container" {
  run node_ctr 1 run --rm "$DRA_WORKLOAD_IMAGE" "nocdi-$RANDOM" sh -c 'ls /dev; env'
  [ "$status" -eq 0 ]
  [[ $output != *dra-e2e* && $output != *DRA_E2E_DEVICE* ]]
}

@test "CDI: spec dirs are per node (a spec for node 1 is unknown on node 2)" {
  [[ -n ${DRA_NODE_2_NAME:-} ]] || skip "needs 2 nodes (hack/cluster/up.sh --nodes 2)"
  local dev=$BATS_FILE_TMPDIR/fake-gpu1 kind=e2e.dra.local/iso$RANDOM
  mknod "$dev" c 195 8
  write_cdi_spec "$DRA_NODE_1_CDI_STATIC_DIR" "$kind" dev0 "$dev"
  run node_ctr 2 run --rm --device "$kind=dev0" "$DRA_WORKLOAD_IMAGE" "iso-$RANDOM" true
  rm -f "$DRA_NODE_1_CDI_STATIC_DIR/${kind//\//-}.json"
  echo "$output"
  [ "$status" -ne 0 ]
  [[ $output == *"unresolvable CDI devices"* ]]
}

@test "hostPath /var/lib/kubelet/plugins_registry and /var/run/cdi are the node's own folders" {
  local marker=hostpath-$RANDOM
  kubectl -n "$E2E_NS" apply -f - <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: hostpath}
spec:
  restartPolicy: Never
  nodeName: $DRA_NODE_1_NAME
  containers:
  - name: c
    image: $DRA_WORKLOAD_IMAGE
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "touch /reg/$marker /cdi/$marker.json.tmp"]
    volumeMounts:
    - {name: reg, mountPath: /reg}
    - {name: cdi, mountPath: /cdi}
  volumes:
  - {name: reg, hostPath: {path: /var/lib/kubelet/plugins_registry, type: Directory}}
  - {name: cdi, hostPath: {path: /var/run/cdi, type: DirectoryOrCreate}}
EOF2
  wait_pod_phase hostpath Succeeded 60
  [ -e "$DRA_NODE_1_KUBELET_DIR/plugins_registry/$marker" ]
  [ -e "$DRA_NODE_1_CDI_DYNAMIC_DIR/$marker.json.tmp" ]
  rm -f "$DRA_NODE_1_KUBELET_DIR/plugins_registry/$marker" "$DRA_NODE_1_CDI_DYNAMIC_DIR/$marker.json.tmp"
}
