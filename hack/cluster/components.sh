# shellcheck shell=bash
# How each control-plane component is started and probed. Sourced by lib.sh; relies on its settings.

# Command lines. One function per component fills the global array CMD, so that up.sh and
# restart-apiserver.sh run exactly the same flags (and up.sh can tell when a running one differs).

cmd_etcd() {
  CMD=("$ETCD_BIN_DIR/etcd" --name=dra --data-dir="$CLUSTER_DIR/etcd"
    --listen-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT"
    --advertise-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT"
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT"
    --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT"
    --initial-cluster="dra=http://127.0.0.1:$ETCD_PEER_PORT"
    # Throwaway test data: skipping fsync makes every API write several times faster on this disk.
    # A crash of the etcd process alone loses nothing (the page cache survives it).
    --unsafe-no-fsync=true --log-level=warn)
}

cmd_kube_apiserver() {
  # shellcheck disable=SC2054 # the commas are inside flag values
  CMD=("$K8S_BIN_DIR/kube-apiserver"
    --etcd-servers="http://127.0.0.1:$ETCD_CLIENT_PORT"
    # Every address: host clients use 127.0.0.1, pods $APISERVER_POD_IP.
    --bind-address=0.0.0.0 --secure-port="$APISERVER_PORT"
    # Without it the apiserver advertises the first non-loopback interface address.
    --advertise-address=127.0.0.1
    # The default "lease" reconciler writes the advertise address into the endpoints of the
    # `kubernetes` Service, and Endpoints/EndpointSlice validation rejects loopback addresses, so it
    # would log an error every 10 s. "none" keeps the Service (ClusterIP $SERVICE_FIRST_IP) without
    # endpoints; nothing here routes Service IPs anyway (no kube-proxy).
    --endpoint-reconciler-type=none
    # Services the API server calls itself (admission webhooks, aggregated APIs) are dialled at
    # their endpoints' pod addresses: without kube-proxy a Service's ClusterIP leads nowhere.
    --enable-aggregator-routing=true
    --tls-cert-file="$PKI_DIR/apiserver.crt" --tls-private-key-file="$PKI_DIR/apiserver.key"
    --client-ca-file="$PKI_DIR/ca.crt"
    # The front-proxy (request header) setup kubeadm uses. Without it the
    # extension-apiserver-authentication ConfigMap lacks requestheader-client-ca-file, and the
    # scheduler and controller-manager (delegated authentication) log an error for it forever.
    # It also lets aggregated API servers (metrics-server) authenticate the apiserver's proxy.
    --requestheader-client-ca-file="$PKI_DIR/front-proxy-ca.crt"
    --requestheader-allowed-names=front-proxy-client
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group
    --requestheader-extra-headers-prefix=X-Remote-Extra-
    --proxy-client-cert-file="$PKI_DIR/front-proxy-client.crt"
    --proxy-client-key-file="$PKI_DIR/front-proxy-client.key"
    # The kubelet API (logs, exec) at the node's InternalIP: node names do not resolve here.
    --kubelet-preferred-address-types=InternalIP,Hostname
    --kubelet-client-certificate="$PKI_DIR/apiserver-kubelet-client.crt"
    --kubelet-client-key="$PKI_DIR/apiserver-kubelet-client.key"
    --service-account-key-file="$PKI_DIR/sa.pub"
    --service-account-signing-key-file="$PKI_DIR/sa.key"
    --service-account-issuer="$SA_ISSUER" --api-audiences="$SA_ISSUER"
    --service-cluster-ip-range="$SERVICE_CIDR"
    --authorization-mode=Node,RBAC
    # NodeRestriction is what a real cluster runs next to the Node authorizer; kubelet tests rely on it.
    --enable-admission-plugins=NodeRestriction
    # Kubelet plugin DaemonSets run privileged.
    --allow-privileged=true
    --runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true
    # On SIGTERM the HTTP server otherwise waits up to 60 s (the request timeout) for the open
    # watches of the controller-manager and scheduler, which never end by themselves, so a restart
    # took 60 s. With this it drains the short requests, answers new ones 429 + Retry-After, then
    # closes the watches after 2 s.
    --shutdown-send-retry-after=true
    --cert-dir="$PKI_DIR/apiserver-generated")
  [[ -z $FEATURE_GATES ]] || CMD+=(--feature-gates="$FEATURE_GATES")
}

cmd_kube_controller_manager() {
  local kc=$CLUSTER_DIR/kube-controller-manager.kubeconfig
  CMD=("$K8S_BIN_DIR/kube-controller-manager"
    --kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc"
    --bind-address=127.0.0.1 --secure-port="$CONTROLLER_MANAGER_PORT"
    --cert-dir="$PKI_DIR/kube-controller-manager-generated"
    --use-service-account-credentials=true
    --service-account-private-key-file="$PKI_DIR/sa.key"
    --root-ca-file="$PKI_DIR/ca.crt"
    --cluster-signing-cert-file="$PKI_DIR/ca.crt" --cluster-signing-key-file="$PKI_DIR/ca.key"
    --service-cluster-ip-range="$SERVICE_CIDR"
    --leader-elect=false)
  [[ -z $FEATURE_GATES ]] || CMD+=(--feature-gates="$FEATURE_GATES")
}

cmd_kube_scheduler() {
  local kc=$CLUSTER_DIR/kube-scheduler.kubeconfig
  CMD=("$K8S_BIN_DIR/kube-scheduler"
    --kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc"
    --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT"
    --cert-dir="$PKI_DIR/kube-scheduler-generated"
    --leader-elect=false)
  [[ -z $FEATURE_GATES ]] || CMD+=(--feature-gates="$FEATURE_GATES")
}

# Health.

health_url() {
  case $1 in
    */*) node_health_url "$1" ;;
    etcd) echo "http://127.0.0.1:$ETCD_CLIENT_PORT/health" ;;
    kube-apiserver) echo "https://127.0.0.1:$APISERVER_PORT/readyz" ;;
    kube-controller-manager) echo "https://127.0.0.1:$CONTROLLER_MANAGER_PORT/healthz" ;;
    kube-scheduler) echo "https://127.0.0.1:$SCHEDULER_PORT/healthz" ;;
    *) return 1 ;;
  esac
}

component_port() {
  case $1 in
    etcd) echo "$ETCD_CLIENT_PORT" ;;
    kube-apiserver) echo "$APISERVER_PORT" ;;
    kube-controller-manager) echo "$CONTROLLER_MANAGER_PORT" ;;
    kube-scheduler) echo "$SCHEDULER_PORT" ;;
  esac
}

# Probes the component's health endpoint once. Only the apiserver's /readyz is checked with the
# admin certificate and the cluster CA; the others serve self-signed certificates (hence -k) and
# allow /healthz to anonymous callers.
component_healthy() {
  [[ $1 != */* ]] || { node_component_healthy "$1"; return; }
  local url; url=$(health_url "$1") || return 1
  local body
  case $1 in
    etcd) body=$(curl -sf -m 2 "$url") && [[ $(jq -r .health <<<"$body" 2>/dev/null) == true ]] ;;
    kube-apiserver)
      body=$(curl -sf -m 3 --cacert "$PKI_DIR/ca.crt" --cert "$PKI_DIR/admin.crt" \
        --key "$PKI_DIR/admin.key" "$url") && [[ $body == ok ]] ;;
    # Its /healthz passes as soon as it serves, but it builds its controllers only afterwards and
    # exits if the apiserver goes away meanwhile (seen when a test restarted the apiserver right
    # after up.sh). The per-controller checks appear, all at once, when the build is done.
    kube-controller-manager)
      body=$(curl -skf -m 2 "$url?verbose") && [[ $body == *"[+]resourceclaim-controller ok"* ]] ;;
    *) body=$(curl -skf -m 2 "$url") && [[ $body == ok ]] ;;
  esac
}
