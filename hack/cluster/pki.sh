# shellcheck shell=bash disable=SC2034 # its variables are read by the scripts that source it
# Certificates and kubeconfigs for the local cluster, made with openssl. Source it after lib.sh.
# Everything is RSA 2048 like kubeadm's defaults, so any TLS stack our C++ client links accepts it.

# issue_cert <name> <subject> <extendedKeyUsage> [subjectAltName] [ca name]: RSA key and certificate
# signed by the cluster CA (or the named one), valid one year; kept when both files exist.
issue_cert() {
  local name=$1 subj=$2 eku=$3 san=${4:-} ca=${5:-ca}
  [[ -s $PKI_DIR/$name.crt && -s $PKI_DIR/$name.key ]] && return 0
  local ext="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=$eku"
  [[ -z $san ]] || ext+=$'\n'"subjectAltName=$san"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI_DIR/$name.key" -subj "$subj" \
    -out "$PKI_DIR/$name.csr" 2>/dev/null || die "openssl: cannot create the key for $name"
  openssl x509 -req -in "$PKI_DIR/$name.csr" -CA "$PKI_DIR/$ca.crt" -CAkey "$PKI_DIR/$ca.key" \
    -CAcreateserial -days 365 -sha256 -extfile <(printf '%s\n' "$ext") \
    -out "$PKI_DIR/$name.crt" 2>/dev/null || die "openssl: cannot sign the certificate for $name"
  rm -f "$PKI_DIR/$name.csr"
}

b64() { base64 -w0 <"$1"; }

# write_kubeconfig <path> <user> <cert-name | ""> [token]: admin-style kubeconfig with the CA and the
# client credentials embedded, so the file stands alone (tests copy it around).
write_kubeconfig() {
  local path=$1 user=$2 cert=$3 token=${4:-} auth
  if [[ -n $cert ]]; then
    auth="    client-certificate-data: $(b64 "$PKI_DIR/$cert.crt")
    client-key-data: $(b64 "$PKI_DIR/$cert.key")"
  else
    auth="    token: $token"
  fi
  cat >"$path.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: dra
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(b64 "$PKI_DIR/ca.crt")
users:
- name: $user
  user:
$auth
contexts:
- name: $user@dra
  context:
    cluster: dra
    user: $user
current-context: $user@dra
EOF
  chmod 600 "$path.tmp"
  mv -f "$path.tmp" "$path"
}

# Creates the CA, the service-account key pair and every certificate that is missing. A missing CA
# invalidates everything signed by it, so then the whole folder is regenerated and PKI_FRESH=1 tells
# the caller that running components hold stale certificates.
ensure_pki() {
  PKI_FRESH=0
  mkdir -p "$PKI_DIR"
  if [[ ! -s $PKI_DIR/ca.crt || ! -s $PKI_DIR/ca.key || ! -s $PKI_DIR/front-proxy-ca.key ]]; then
    progress "generating the cluster CA and certificates in $PKI_DIR"
    rm -rf "${PKI_DIR:?}"/*
    local ca
    for ca in ca front-proxy-ca; do
      openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -sha256 -subj "/CN=dra-cluster-$ca" \
        -keyout "$PKI_DIR/$ca.key" -out "$PKI_DIR/$ca.crt" 2>/dev/null || die "openssl: cannot create $ca"
    done
    PKI_FRESH=1
  fi
  if [[ ! -s $PKI_DIR/sa.key || ! -s $PKI_DIR/sa.pub ]]; then
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI_DIR/sa.key" 2>/dev/null ||
      die "openssl: cannot create the service-account key"
    openssl pkey -in "$PKI_DIR/sa.key" -pubout -out "$PKI_DIR/sa.pub"
  fi
  # A certificate of an older checkout without the pods' address is replaced (the apiserver's
  # command line changed with it, so up.sh restarts it).
  if [[ -s $PKI_DIR/apiserver.crt ]] &&
    ! openssl x509 -in "$PKI_DIR/apiserver.crt" -noout -ext subjectAltName 2>/dev/null | grep -q "IP Address:$APISERVER_POD_IP\b"; then
    progress "reissuing the apiserver certificate with IP $APISERVER_POD_IP (the pods' address)"
    rm -f "$PKI_DIR/apiserver.crt" "$PKI_DIR/apiserver.key"
  fi
  issue_cert apiserver "/CN=kube-apiserver" serverAuth \
    "IP:127.0.0.1,IP:$APISERVER_POD_IP,IP:$SERVICE_FIRST_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  # A CA of its own, as in kubeadm: a cluster client certificate must not pass as the front proxy.
  issue_cert front-proxy-client "/CN=front-proxy-client" clientAuth "" front-proxy-ca
  issue_cert admin "/O=system:masters/CN=kubernetes-admin" clientAuth
  issue_cert kube-scheduler "/CN=system:kube-scheduler" clientAuth
  issue_cert kube-controller-manager "/CN=system:kube-controller-manager" clientAuth
  # What kubeadm gives the apiserver for the kubelet API (exec, logs, port-forward).
  issue_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  # Authenticates fine but has no RBAC binding: resource requests are Forbidden.
  issue_cert limited "/O=dra-test/CN=dra-test-limited" clientAuth
  issue_expired_cert
  chmod 600 "$PKI_DIR"/*.key
}

# A client certificate from the cluster CA whose validity ended yesterday. `openssl x509 -req` in
# OpenSSL 3.0 cannot set dates in the past; `openssl ca` can (-startdate/-enddate). It carries
# system:masters so that expiry is the only reason for the 401.
issue_expired_cert() {
  [[ -s $PKI_DIR/expired.crt && -s $PKI_DIR/expired.key ]] && return 0
  local d; d=$(mktemp -d)
  : >"$d/index.txt"
  cat >"$d/ca.cnf" <<EOF2
[ca]
default_ca = signer
[signer]
database = $d/index.txt
new_certs_dir = $d
serial = $d/serial
default_md = sha256
policy = any
unique_subject = no
x509_extensions = client
[any]
organizationName = optional
commonName = supplied
[client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
EOF2
  openssl rand -hex 8 >"$d/serial"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI_DIR/expired.key" \
    -subj "/O=system:masters/CN=dra-test-expired" -out "$d/expired.csr" 2>/dev/null
  openssl ca -batch -notext -config "$d/ca.cnf" -cert "$PKI_DIR/ca.crt" -keyfile "$PKI_DIR/ca.key" \
    -startdate "$(date -u -d '-2 days' +%Y%m%d%H%M%SZ)" -enddate "$(date -u -d '-1 day' +%Y%m%d%H%M%SZ)" \
    -in "$d/expired.csr" -out "$PKI_DIR/expired.crt" 2>"$d/err" || { cat "$d/err" >&2; rm -rf "$d"; return 1; }
  rm -rf "$d"
}

# Kubeconfigs that need only certificates. Rewritten on every up (milliseconds, atomic rename) so a
# changed port never leaves a stale file behind.
write_cert_kubeconfigs() {
  write_kubeconfig "$KUBECONFIG_PATH" kubernetes-admin admin
  write_kubeconfig "$CLUSTER_DIR/kube-scheduler.kubeconfig" system:kube-scheduler kube-scheduler
  write_kubeconfig "$CLUSTER_DIR/kube-controller-manager.kubeconfig" system:kube-controller-manager \
    kube-controller-manager
  write_kubeconfig "$CLUSTER_DIR/limited.kubeconfig" dra-test-limited limited
  write_kubeconfig "$CLUSTER_DIR/expired.kubeconfig" dra-test-expired expired
  cat >"$CLUSTER_DIR/env.sh" <<EOF2
# Source me: points kubectl at the local DRA test cluster.
export KUBECONFIG=$KUBECONFIG_PATH
export PATH=$K8S_BIN_DIR:$ETCD_BIN_DIR:\$PATH
EOF2
}
