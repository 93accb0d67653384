#!/usr/bin/env bats
# Pod Security (issue 24 item 6, docs/helm.md "Pod Security"): the controller, the webhook and the
# uninstall cleanup Job meet the `restricted` profile, the kubelet plugin does not (it is
# privileged by design). The chart puts all of its pods in the release namespace, and that
# namespace also gets the privileged pods the driver makes at run time (the IMEX daemons, the MPS
# control daemons), so the release namespace cannot enforce `restricted`. This file checks the
# restricted pods against the API server's own Pod Security admission in a namespace of their own
# labelled pod-security.kubernetes.io/enforce=restricted: the chart rendered into that namespace
# with the local cluster's values (hack/cluster/helm-values.yaml) and the webhook on, each pod
# created there (server dry run), and the webhook's Deployment really run there until Ready. It
# also checks that the release run.sh installed runs its controller as the non-root user. Run
# through test/e2e/run.sh.

setup_file() {
  load lib
  load gpu_lib
  make_test_namespace podsec
  kubectl label namespace "$E2E_NS" pod-security.kubernetes.io/enforce=restricted \
    pod-security.kubernetes.io/enforce-version=latest >/dev/null
  PS_DIR=$(mktemp -d /tmp/e2e-podsec-XXXXXX)
  export PS_DIR
  # A CA and a serving certificate for the webhook Service's DNS name in this namespace.
  local svc=$RELEASE-webhook
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj "/CN=e2e-podsec-ca" -keyout "$PS_DIR/ca.key" -out "$PS_DIR/ca.crt" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$svc.$E2E_NS.svc" \
    -keyout "$PS_DIR/tls.key" -out "$PS_DIR/tls.csr" 2>/dev/null
  printf 'subjectAltName=DNS:%s.%s.svc\nextendedKeyUsage=serverAuth\n' "$svc" "$E2E_NS" >"$PS_DIR/ext.cnf"
  openssl x509 -req -in "$PS_DIR/tls.csr" -CA "$PS_DIR/ca.crt" -CAkey "$PS_DIR/ca.key" \
    -CAcreateserial -days 1 -extfile "$PS_DIR/ext.cnf" -out "$PS_DIR/tls.crt" 2>/dev/null
  kubectl -n "$E2E_NS" create secret tls e2e-podsec-tls --cert "$PS_DIR/tls.crt" --key "$PS_DIR/tls.key" >/dev/null
  # The chart as run.sh installs it (same values, same image), rendered into this namespace.
  "$HELM_BIN_DIR/helm" template "$RELEASE" "$REPO_ROOT/deployments/helm/dra-driver-nvidia-gpu" \
    --namespace "$E2E_NS" --api-versions resource.k8s.io/v1/DeviceClass \
    -f "$REPO_ROOT/hack/cluster/helm-values.yaml" \
    --set image.tag="$(image_tag)" --set webhook.enabled=true --set webhook.tls.mode=secret \
    --set webhook.tls.secret.name=e2e-podsec-tls --set webhook.tls.secret.caBundle="$(base64 -w0 <"$PS_DIR/ca.crt")" \
    >"$PS_DIR/chart.yaml"
}

teardown_file() {
  load lib
  load gpu_lib
  kubectl delete namespace "$E2E_NS" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  [[ -n ${PS_DIR:-} ]] && rm -rf "$PS_DIR"
  true
}

setup() {
  load lib
  load gpu_lib
}

# image_tag: the tag of the driver image the release runs (hack/cluster/driver-image.sh name).
image_tag() { local i; i=$("$REPO_ROOT/hack/cluster/driver-image.sh" name); echo "${i##*:}"; }

# objects <kind> <component>: the rendered objects of that kind whose pod template (or, for a
# Service, selector) carries the component label, as JSON (one object per line).
objects() {
  python3 - "$PS_DIR/chart.yaml" "$1" "$2" <<'PY'
import json, sys, yaml
path, kind, component = sys.argv[1:]
for d in yaml.safe_load_all(open(path)):
    if not isinstance(d, dict) or d.get("kind") != kind:
        continue
    spec = d.get("spec") or {}
    labels = spec.get("selector") if kind == "Service" else \
        ((spec.get("template") or {}).get("metadata") or {}).get("labels")
    if (labels or {}).get("dra-driver-nvidia-gpu-component") == component:
        print(json.dumps(d))
PY
}

# pod_of <kind> <component>: a Pod with the pod template of that workload (its service account
# left out: accounts are no Pod Security matter, and the chart's are not in this namespace).
pod_of() {
  objects "$1" "$2" | jq -c --arg ns "$E2E_NS" --arg name "e2e-podsec-$2" \
    '{apiVersion: "v1", kind: "Pod", metadata: {name: $name, namespace: $ns},
      spec: (.spec.template.spec | del(.serviceAccountName))}'
}

@test "Pod Security restricted: the controller's, the webhook's and the uninstall cleanup Job's pods are admitted, the kubelet plugin's is refused" {
  local kind component kind_component pod out
  for kind_component in Deployment/controller Deployment/webhook Job/uninstall-cleanup; do
    kind=${kind_component%/*} component=${kind_component#*/}
    pod=$(pod_of "$kind" "$component")
    [ -n "$pod" ] || { echo "the chart rendered no $kind for $component"; false; }
    if ! out=$(kubectl create --dry-run=server -f - <<<"$pod" 2>&1); then
      echo "$component: refused in a namespace that enforces restricted: $out"
      false
    fi
    echo "# $component: admitted ($out)" >&3
  done
  pod=$(pod_of DaemonSet kubelet-plugin)
  [ -n "$pod" ]
  run kubectl create --dry-run=server -f - <<<"$pod"
  [ "$status" -ne 0 ]
  [[ $output == *'violates PodSecurity "restricted:latest"'* ]]
  echo "# kubelet-plugin: refused (${output:0:160}...)" >&3
}

@test "the chart's webhook runs Ready in a namespace that enforces restricted, as a non-root user, behind Service port 443" {
  local deploy=$RELEASE-webhook
  # The chart's webhook Deployment and Service as they are (the Deployment without its service
  # account, which is not in this namespace; the pod mounts no token anyway).
  objects Deployment webhook | jq 'del(.spec.template.spec.serviceAccountName)' | kubectl apply -f - >/dev/null
  objects Service webhook | kubectl apply -f - >/dev/null
  kubectl -n "$E2E_NS" rollout status "deployment/$deploy" --timeout=120s >/dev/null || {
    kubectl -n "$E2E_NS" describe deployment "$deploy"
    kubectl -n "$E2E_NS" get events --sort-by=.lastTimestamp | tail -20
    kubectl -n "$E2E_NS" logs -l dra-driver-nvidia-gpu-component=webhook --tail 20 || true
    false
  }
  local pod
  pod=$(kubectl -n "$E2E_NS" get pods -l dra-driver-nvidia-gpu-component=webhook -o json)
  [ "$(jq '.items | length' <<<"$pod")" = 1 ]
  [ "$(jq -r '.items[0].spec.securityContext.runAsUser' <<<"$pod")" = 65532 ]
  [ "$(jq -r '.items[0].spec.containers[0].securityContext.readOnlyRootFilesystem' <<<"$pod")" = true ]
  [ "$(jq -r '.items[0].spec.containers[0].ports[0].containerPort' <<<"$pod")" = 8443 ]
  # No service-account token in the pod.
  [ "$(jq '[.items[0].spec.volumes[] | select(.projected)] | length' <<<"$pod")" = 0 ]
  [ "$(kubectl -n "$E2E_NS" get service "$deploy" -o jsonpath='{.spec.ports[0].port}')" = 443 ]
  [ -n "$(kubectl -n "$E2E_NS" get endpointslices -l "kubernetes.io/service-name=$deploy" -o jsonpath='{.items[*].endpoints[*].addresses[*]}')" ]
  echo "# $(jq -r '.items[0].metadata.name + " on " + .items[0].spec.nodeName + ": Ready, uid 65532, port 8443"' <<<"$pod")" >&3
}

@test "the installed release runs its controller as the non-root user with a read-only root filesystem, Ready" {
  local pod
  pod=$(kubectl -n "$DRIVER_NS" get pods -l dra-driver-nvidia-gpu-component=controller -o json)
  [ "$(jq '.items | length' <<<"$pod")" -ge 1 ]
  [ "$(jq -r '.items[0].spec.securityContext.runAsUser' <<<"$pod")" = 65532 ]
  [ "$(jq -r '.items[0].spec.securityContext.runAsNonRoot' <<<"$pod")" = true ]
  [ "$(jq -r '.items[0].spec.containers[0].securityContext.readOnlyRootFilesystem' <<<"$pod")" = true ]
  [ "$(jq -r '.items[0].spec.containers[0].securityContext.capabilities.drop[0]' <<<"$pod")" = ALL ]
  [ "$(jq -r '.items[0].status.containerStatuses[0].ready' <<<"$pod")" = true ]
}
