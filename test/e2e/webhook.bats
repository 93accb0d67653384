#!/usr/bin/env bats
# The validating admission webhook of the Helm-installed driver against the real kube-apiserver:
# setup_file upgrades the release run.sh installed with `webhook.enabled=true` and TLS mode
# `secret`, as an operator without cert-manager does: a CA and a serving certificate for the
# webhook Service's DNS name made here, the Secret created in the release namespace, the CA given
# as webhook.tls.secret.caBundle. The API server reaches the webhook Deployment's pod through its
# Service (docs/development.md "Pod network"). teardown_file goes back to run.sh's values (webhook
# off): other scenario files create claims the webhook would refuse on purpose (they test the
# plugin's own checks). Run through test/e2e/run.sh.

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace webhook
  WH_DIR=$(mktemp -d /tmp/e2e-webhook-XXXXXX)
  export WH_DIR
  local svc=$RELEASE-webhook secret=e2e-webhook-tls
  # A CA and a serving certificate for the Service's DNS name, which the API server dials.
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj "/CN=e2e-webhook-ca" -keyout "$WH_DIR/ca.key" -out "$WH_DIR/ca.crt" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$svc.$DRIVER_NS.svc" \
    -keyout "$WH_DIR/tls.key" -out "$WH_DIR/tls.csr" 2>/dev/null
  printf 'subjectAltName=DNS:%s.%s.svc,DNS:%s.%s.svc.cluster.local\nextendedKeyUsage=serverAuth\n' \
    "$svc" "$DRIVER_NS" "$svc" "$DRIVER_NS" >"$WH_DIR/ext.cnf"
  openssl x509 -req -in "$WH_DIR/tls.csr" -CA "$WH_DIR/ca.crt" -CAkey "$WH_DIR/ca.key" \
    -CAcreateserial -days 1 -extfile "$WH_DIR/ext.cnf" -out "$WH_DIR/tls.crt" 2>/dev/null
  kubectl -n "$DRIVER_NS" delete secret "$secret" --ignore-not-found >/dev/null
  kubectl -n "$DRIVER_NS" create secret tls "$secret" --cert "$WH_DIR/tls.crt" --key "$WH_DIR/tls.key" >/dev/null

  change_driver --set webhook.enabled=true --set webhook.tls.mode=secret \
    --set webhook.tls.secret.name="$secret" --set webhook.tls.secret.caBundle="$(base64 -w0 <"$WH_DIR/ca.crt")"
  kubectl -n "$DRIVER_NS" rollout status "deployment/$svc" --timeout=120s >/dev/null || {
    kubectl -n "$DRIVER_NS" describe pods -l dra-driver-nvidia-gpu-component=webhook >&2; return 1
  }
  # The API server picks up new configurations asynchronously: wait until a bad claim is refused.
  local deadline=$((SECONDS + 60))
  until bad_claim probe | kubectl -n "$E2E_NS" apply --dry-run=server -f - 2>&1 | grep -q 'denied the request'; do
    ((SECONDS < deadline)) || {
      echo "the webhook did not take effect:" >&2
      bad_claim probe | kubectl -n "$E2E_NS" apply --dry-run=server -f - >&2 || true
      kubectl -n "$DRIVER_NS" logs -l dra-driver-nvidia-gpu-component=webhook --tail 20 >&2 || true
      return 1
    }
    sleep 0.5
  done
}

teardown_file() {
  load lib
  load gpu_lib
  restore_driver
  kubectl -n "$DRIVER_NS" delete secret e2e-webhook-tls --ignore-not-found >/dev/null 2>&1 || true
  kubectl delete namespace "$E2E_NS" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  [[ -n ${WH_DIR:-} ]] && rm -rf "$WH_DIR"
  true
}

setup() {
  load lib
  load gpu_lib
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

@test "valid claims are accepted (time-slicing gate on), a VfioDeviceConfig too; a compute-domain kind is refused" {
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
EOF
  kubectl -n "$E2E_NS" get resourceclaim good-claim >/dev/null
  # VFIO passthrough exists (docs/vfio.md): its config is admitted.
  kubectl -n "$E2E_NS" apply -f - <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: vfio-template}
spec:
  spec:
    devices:
      requests:
      - name: vfio
        exactly: {deviceClassName: vfio.gpu.nvidia.com}
      config:
      - opaque:
          driver: gpu.nvidia.com
          parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: VfioDeviceConfig}
EOF
  kubectl -n "$E2E_NS" delete resourceclaimtemplate vfio-template
  # A compute-domain kind never configures a GPU (lib/api/gpu_kinds.h).
  run kubectl -n "$E2E_NS" apply -f - <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: channel-template}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
      config:
      - opaque:
          driver: gpu.nvidia.com
          parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: ComputeDomainChannelConfig, domainID: d}
EOF
  [ "$status" -ne 0 ]
  [[ $output == *'spec.spec.devices.config[0].opaque.parameters.kind: ComputeDomainChannelConfig does not configure devices of driver gpu.nvidia.com (allowed kinds for driver gpu.nvidia.com: GpuConfig, MigDeviceConfig, VfioDeviceConfig)'* ]]
  run kubectl -n "$E2E_NS" get resourceclaimtemplate channel-template
  [ "$status" -ne 0 ]
}

@test "the chart's webhook: a Ready Deployment behind its Service, the configuration carries the Secret's CA" {
  local svc=$RELEASE-webhook
  [ "$(kubectl -n "$DRIVER_NS" get deployment "$svc" -o jsonpath='{.status.readyReplicas}')" = 1 ]
  [ -n "$(kubectl -n "$DRIVER_NS" get endpointslices -l "kubernetes.io/service-name=$svc" -o jsonpath='{.items[*].endpoints[*].addresses[*]}')" ]
  [ "$(kubectl get validatingwebhookconfiguration "$svc-config" -o jsonpath='{.webhooks[0].clientConfig.caBundle}')" = "$(base64 -w0 <"$WH_DIR/ca.crt")" ]
  [ "$(kubectl get validatingwebhookconfiguration "$svc-config" -o jsonpath='{.webhooks[0].clientConfig.service.name}')" = "$svc" ]
}
