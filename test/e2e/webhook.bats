#!/usr/bin/env bats
# The validating admission webhook against the real kube-apiserver: the built `webhook` binary
# runs on the host (127.0.0.1, a port it picks, a certificate for 127.0.0.1 signed by a CA made
# here), and a ValidatingWebhookConfiguration scoped to this file's namespace sends it the
# ResourceClaims and ResourceClaimTemplates created there. Run through test/e2e/run.sh.
#
# The binary: $DRA_WEBHOOK_BIN, else $DRA_BINARY_DIR/cmd/webhook/webhook, else
# build/default/cmd/webhook/webhook.

setup_file() {
  load lib
  make_test_namespace webhook
  WH_DIR=$(mktemp -d /tmp/e2e-webhook-XXXXXX)
  WH_CONFIG=e2e-gpu-webhook-$E2E_NS
  export WH_DIR WH_CONFIG
  local bin=${DRA_WEBHOOK_BIN:-${DRA_BINARY_DIR:-$REPO_ROOT/build/default}/cmd/webhook/webhook}
  [[ -x $bin ]] || { echo "webhook binary not found at $bin (build the 'webhook' target)" >&2; return 1; }

  # A CA and a serving certificate for IP 127.0.0.1, which the API server dials.
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj "/CN=e2e-webhook-ca" -keyout "$WH_DIR/ca.key" -out "$WH_DIR/ca.crt" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$WH_DIR/tls.key" -out "$WH_DIR/tls.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$WH_DIR/ext.cnf"
  openssl x509 -req -in "$WH_DIR/tls.csr" -CA "$WH_DIR/ca.crt" -CAkey "$WH_DIR/ca.key" \
    -CAcreateserial -days 1 -extfile "$WH_DIR/ext.cnf" -out "$WH_DIR/tls.crt" 2>/dev/null

  # Port 0: the webhook picks a free port and logs it.
  "$bin" --tls-cert-file "$WH_DIR/tls.crt" --tls-private-key-file "$WH_DIR/tls.key" \
    --bind-address 127.0.0.1 --port 0 --feature-gates TimeSlicingSettings=true -v 2 \
    >"$WH_DIR/webhook.log" 2>&1 &
  echo $! >"$WH_DIR/webhook.pid"
  local deadline=$((SECONDS + 20)) port=
  until port=$(grep -m1 -oE '"webhook serving".* port=[0-9]+' "$WH_DIR/webhook.log" | grep -oE '[0-9]+$'); do
    if ((SECONDS >= deadline)) || ! kill -0 "$(cat "$WH_DIR/webhook.pid")" 2>/dev/null; then
      echo "webhook did not start; its log:" >&2
      cat "$WH_DIR/webhook.log" >&2
      return 1
    fi
    sleep 0.2
  done
  echo "$port" >"$WH_DIR/port"
  [[ $(curl -sS --cacert "$WH_DIR/ca.crt" "https://127.0.0.1:$port/readyz") == ok ]]

  kubectl apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: $WH_CONFIG}
webhooks:
- name: gpu.nvidia.com
  clientConfig:
    url: https://127.0.0.1:$port/validate-resource-claim-parameters
    caBundle: $(base64 -w0 <"$WH_DIR/ca.crt")
  rules:
  - apiGroups: [resource.k8s.io]
    apiVersions: [v1, v1beta1, v1beta2]
    operations: [CREATE, UPDATE]
    resources: [resourceclaims, resourceclaimtemplates]
    scope: Namespaced
  # Only this file's namespace: other scenarios share the cluster.
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: $E2E_NS}
  sideEffects: None
  admissionReviewVersions: [v1]
  failurePolicy: Fail
  timeoutSeconds: 10
EOF
  # The API server picks up new configurations asynchronously: wait until a bad claim is refused.
  deadline=$((SECONDS + 30))
  until bad_claim probe | kubectl -n "$E2E_NS" apply --dry-run=server -f - 2>&1 | grep -q 'denied the request'; do
    ((SECONDS < deadline)) || { echo "the webhook configuration did not take effect" >&2; return 1; }
    sleep 0.5
  done
}

teardown_file() {
  load lib
  [[ -n ${WH_CONFIG:-} ]] && kubectl delete validatingwebhookconfiguration "$WH_CONFIG" --ignore-not-found >/dev/null 2>&1
  if [[ -s ${WH_DIR:-}/webhook.pid ]]; then
    local pid
    pid=$(cat "$WH_DIR/webhook.pid")
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  kubectl delete namespace "$E2E_NS" "${E2E_NS}-other" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  [[ -n ${WH_DIR:-} ]] && rm -rf "$WH_DIR"
  true
}

setup() {
  load lib
}

# bad_claim <name> [apiVersion]: a claim whose GpuConfig names a strategy that does not exist.
bad_claim() {
  cat <<EOF
apiVersion: ${2:-resource.k8s.io/v1}
kind: ResourceClaim
metadata: {name: $1}
spec:
  devices:
    requests:
    - name: gpu
$(if [[ ${2:-resource.k8s.io/v1} == resource.k8s.io/v1beta1 ]]; then
    echo "      deviceClassName: gpu.nvidia.com"
  else
    echo "      exactly: {deviceClassName: gpu.nvidia.com}"
  fi)
    config:
    - requests: [gpu]
      opaque:
        driver: gpu.nvidia.com
        parameters:
          apiVersion: resource.nvidia.com/v1beta1
          kind: GpuConfig
          sharing: {strategy: Fabric}
EOF
}

@test "a ResourceClaim with an invalid GpuConfig is rejected with the field path" {
  run kubectl -n "$E2E_NS" apply -f - <<<"$(bad_claim bad-claim)"
  [ "$status" -ne 0 ]
  [[ $output == *'denied the request'* ]]
  [[ $output == *'spec.devices.config[0].opaque.parameters.sharing.strategy: unknown GPU sharing strategy: Fabric'* ]]
  run kubectl -n "$E2E_NS" get resourceclaim bad-claim
  [ "$status" -ne 0 ]
}

@test "v1beta1 and v1beta2 claims are validated too" {
  for v in v1beta1 v1beta2; do
    run kubectl -n "$E2E_NS" apply -f - <<<"$(bad_claim "bad-$v" "resource.k8s.io/$v")"
    [ "$status" -ne 0 ]
    [[ $output == *'spec.devices.config[0].opaque.parameters.sharing.strategy'* ]]
  done
}

@test "a ResourceClaimTemplate with an invalid config is rejected with the field path" {
  run kubectl -n "$E2E_NS" apply -f - <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: bad-template}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
      config:
      - opaque:
          driver: gpu.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: GpuConfig
            sharing: {strategy: MPS}
EOF
  [ "$status" -ne 0 ]
  [[ $output == *'spec.spec.devices.config[0].opaque.parameters.sharing.strategy: "MPS" is selected as the GPU sharing strategy, but the "MPSSupport" feature gate is not enabled'* ]]
}

@test "all invalid configs are reported together" {
  run kubectl -n "$E2E_NS" apply -f - <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: two-bad}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
    config:
    - opaque:
        driver: gpu.nvidia.com
        parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: X}}
    - opaque:
        driver: other.example.com
        parameters: {anything: goes}
    - opaque:
        driver: gpu.nvidia.com
        parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: MigDeviceConfig, extra: 1}
EOF
  [ "$status" -ne 0 ]
  [[ $output == *'2 configs failed to validate: spec.devices.config[0].opaque.parameters.sharing.strategy'* ]]
  [[ $output == *'; spec.devices.config[2].opaque.parameters.extra: unknown field'* ]]
}

@test "valid claims and templates are accepted (time-slicing gate on, VFIO config)" {
  kubectl -n "$E2E_NS" apply -f - <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: good-claim}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
    config:
    - requests: [gpu]
      opaque:
        driver: gpu.nvidia.com
        parameters:
          apiVersion: resource.nvidia.com/v1beta1
          kind: GpuConfig
          sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: Long}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: good-template}
spec:
  spec:
    devices:
      requests:
      - name: vfio
        exactly: {deviceClassName: gpu.nvidia.com}
      config:
      - opaque:
          driver: gpu.nvidia.com
          parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: VfioDeviceConfig}
EOF
  kubectl -n "$E2E_NS" get resourceclaim good-claim >/dev/null
  kubectl -n "$E2E_NS" get resourceclaimtemplate good-template >/dev/null
}

@test "the webhook configuration applies to its own namespace only" {
  kubectl create namespace "${E2E_NS}-other" >/dev/null
  bad_claim elsewhere | kubectl -n "${E2E_NS}-other" apply -f - >/dev/null
  kubectl -n "${E2E_NS}-other" get resourceclaim elsewhere >/dev/null
}
