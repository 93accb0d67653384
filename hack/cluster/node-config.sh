# shellcheck shell=bash
# Configuration files of a local node (containerd, CNI, kubelet). Sourced by node-lib.sh. Every
# non-default setting says why; the paths are the ones inside the node's mount namespace.

write_containerd_config() {
  local n=$1 d; d=$(node_conf_dir "$n")
  cat >"$d/containerd.toml.tmp" <<EOF2
version = 4
# Per-node thanks to the mount namespace (node_binds).
root = '/var/lib/containerd'
state = '/run/containerd'
# No /etc/containerd/conf.d drop-ins: the node must not pick up the host's settings.
imports = []

[plugins]
  [plugins.'io.containerd.server.v1.grpc']
    # Outside the bind-mounted folders, so that kubelet, ctr and tests on the host reach it, and
    # down.sh finds the shims by it.
    address = '$(node_socket "$n")'
  [plugins.'io.containerd.server.v1.ttrpc']
    address = '$(node_socket "$n").ttrpc'
  # NRI would listen on the host-wide /var/run/nri/nri.sock, which the nodes would fight over.
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
  [plugins.'io.containerd.internal.v1.opt']
    path = '/var/lib/containerd/opt'
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = '$NODE_SNAPSHOTTER'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      # Imported by images.sh: no registry is reachable from here.
      sandbox = '$PAUSE_IMAGE'
  [plugins.'io.containerd.cri.v1.runtime']
    # CDI is what the DRA driver's NodePrepareResources answers feed (CRI CDI_devices); always on
    # since containerd 2.x dropped enable_cdi. Default dirs, the node's own in its mount namespace.
    cdi_spec_dirs = ['/etc/cdi', '/var/run/cdi']
    # Pod network namespaces are pinned under the per-node state dir (default /var/run/netns is
    # shared with the host and would keep empty files behind).
    netns_mounts_under_state_dir = true
    # Root here lacks CAP_SYS_RESOURCE (a VM sandbox), so negative oom_score_adj values (-998 for
    # sandboxes, -997 for Guaranteed pods) fail in runc ("can't get final child's PID from pipe").
    # This caps them at containerd's own score.
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          # Debian's runc; the default would search PATH.
          BinaryName = '$RUNC'
          # No systemd here: cgroupfs, as the kubelet (which asks containerd over CRI).
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['$CNI_BIN_DIR']
      conf_dir = '$d/net.d'
EOF2
  mv -f "$d/containerd.toml.tmp" "$d/containerd.toml"
}

# A bridge per node with host-local addresses. Routes only to the pod and node ranges and to the
# `kubernetes` Service's ClusterIP, no default route and no masquerading: pods get an IP and reach
# each other, the nodes and the API server, nothing else (there is no network beyond this machine
# to reach). No portmap (hostPort): it needs iptables, and its
# DEL fails without it.
write_cni_config() {
  local n=$1 i d; i=$(node_index "$n"); d=$(node_conf_dir "$n")/net.d
  mkdir -p "$d"
  jq -n --arg name "$n" --arg br "$(node_bridge "$n")" --arg subnet "$POD_NET.$i.0/24" \
    --arg pods "$POD_NET.0.0/16" --arg nodes "$NODE_IP_NET.0/24" --arg svc "$SERVICE_FIRST_IP/32" \
    '{cniVersion: "1.0.0", name: $name, plugins: [
       {type: "bridge", bridge: $br, isGateway: true, ipMasq: false, hairpinMode: true,
        ipam: {type: "host-local", ranges: [[{subnet: $subnet}]],
               routes: [{dst: $pods}, {dst: $nodes}, {dst: $svc}]}}]}' >"$d/10-dra.conflist.tmp"
  mv -f "$d/10-dra.conflist.tmp" "$d/10-dra.conflist"
}

write_kubelet_config() {
  local n=$1 d; d=$(node_conf_dir "$n")
  cat >"$d/kubelet.yaml.tmp" <<EOF2
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Listen on the node's own address and ports only (nodes share this machine's network).
address: $(node_ip "$n")
port: $(node_port "$n")
healthzBindAddress: 127.0.0.1
healthzPort: $(node_healthz_port "$n")
readOnlyPort: 0
tlsCertFile: $PKI_DIR/kubelet-$n-serving.crt
tlsPrivateKeyFile: $PKI_DIR/kubelet-$n-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI_DIR/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$(node_socket "$n")
# This VM has cgroup v1 (hybrid) and no systemd: since 1.35 the kubelet refuses v1 unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
# Each node's pods under their own cgroup (created by node.sh), not the shared /kubepods.
cgroupRoot: $(node_cgroup "$n")
# No swap here today; a machine with swap must not stop the tests.
failSwapOn: false
# No DNS server is reachable; pods get an empty resolv.conf instead of the host's dead one.
resolvConf: ""
# The kubelet's own defaults for these assume a real disk per node; every node here shares one, so
# hard eviction on disk pressure would evict every node's pods at once. Memory stays protected.
evictionHard: {memory.available: 100Mi}
imageGCHighThresholdPercent: 100
# No graceful node shutdown: it needs systemd-logind inhibitor locks.
shutdownGracePeriod: 0s
# The kubelet would add KUBE-FIREWALL and canary chains to the host's iptables, and nothing takes
# them away again; no kube-proxy here needs them.
makeIPTablesUtilChains: false
# The tests kill and restart the GPU plugin's container many times (test/e2e/gpu_kill_soak.bats:
# hundreds of SIGKILLs); the default crash-loop back-off (10 s doubling to 300 s) would hold the
# plugin down for minutes after a few kills. 1 s caps it (the minimum; the field needs the gate
# KubeletCrashLoopBackOffMax, beta and on by default since 1.35). A test-cluster setting, see
# docs/development.md "Settings that differ from the defaults".
# A failed NodePrepareResources is retried at the pod's next periodic sync (the kubelet records the
# event and ends the sync without an error, so its 10 s error back-off does not apply): 1 min by
# default. 10 s here, so the scenarios that wait for that retry take seconds, not a minute.
syncFrequency: 10s
EOF2
  # The kubelet refuses the field with its gate off (DRA_FEATURE_GATES=KubeletCrashLoopBackOffMax=false).
  [[ ,${FEATURE_GATES// /}, == *,KubeletCrashLoopBackOffMax=false,* ]] ||
    echo 'crashLoopBackOff: {maxContainerRestartPeriod: 1s}' >>"$d/kubelet.yaml.tmp"
  [[ -z $FEATURE_GATES ]] || printf 'featureGates:\n%s\n' \
    "$(tr ',' '\n' <<<"$FEATURE_GATES" | sed 's/=/: /; s/^/  /')" >>"$d/kubelet.yaml.tmp"
  mv -f "$d/kubelet.yaml.tmp" "$d/kubelet.yaml"
}
