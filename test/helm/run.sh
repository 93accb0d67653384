#!/usr/bin/env bash
# Offline tests of the Helm chart deployments/helm/dra-driver-nvidia-gpu (no cluster needed):
#
#   run.sh lint      helm lint with the values of every case
#   run.sh golden    helm template of every cases/<case>.yaml, compared with golden/<case>.yaml
#   run.sh bad       every bad/<case>.yaml is refused, with the text of its "# expect:" line in
#                    the error (the key and what is allowed)
#   run.sh hostpaths every hostPath volume that any case renders states its type (docs/helm.md
#                    "Host paths"); without one the kubelet makes an empty folder where the node
#                    lacks the path
#   run.sh restricted  the pods of the controller, the webhook and the uninstall cleanup Job of
#                    every case meet the Pod Security "restricted" profile, plus a read-only root
#                    filesystem, a webhook port >= 1024 and no token in the webhook's pod
#                    (restricted.py, docs/helm.md "Pod Security"); needs python3 with PyYAML
#   run.sh update    rewrites golden/ from the current chart (review the diff before committing)
#   run.sh all       lint, golden, bad, hostpaths and restricted
#
# helm: $DRA_HELM, else the one hack/cluster/build.sh builds ($HELM_BIN_DIR/helm, lib.sh). A
# missing helm is a failure, not a skip: build it with hack/cluster/build.sh helm.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$root/hack/cluster/lib.sh"
chart=$root/deployments/helm/dra-driver-nvidia-gpu
HELM=${DRA_HELM:-$HELM_BIN_DIR/helm}
# Fixed render context: release, namespace, and the resource API a 1.36 cluster serves (the server
# version is 1.36 unless a case says otherwise, kube_version).
RELEASE=dra
NAMESPACE=nvidia-dra-driver-gpu
RENDER_ARGS=(--namespace "$NAMESPACE" --api-versions resource.k8s.io/v1/DeviceClass)

say() { printf '[helm-test] %s\n' "$*"; }
fail() { printf '[helm-test] FAIL: %s\n' "$*" >&2; failed=$((failed + 1)); }

[[ -x $HELM ]] || {
  printf '[helm-test] FAIL: no helm at %s; build it with hack/cluster/build.sh helm (or set DRA_HELM)\n' "$HELM" >&2
  exit 1
}
failed=0

# A case may name the server version it is rendered for: a line "# kube-version: v1.35.0".
kube_version() { sed -n 's/^# kube-version: //p' "$1" | grep . || echo v1.36.0; }

render() { # <values file>
  "$HELM" template "$RELEASE" "$chart" "${RENDER_ARGS[@]}" --kube-version "$(kube_version "$1")" -f "$1" 2>&1
}

do_lint() {
  local c out
  for c in "$here"/cases/*.yaml; do
    # helm lint has no --api-versions: the resource API is given as a value. It reports a
    # template's `fail` as an INFO line and passes, so such a line fails here.
    if out=$("$HELM" lint --strict "$chart" --namespace "$NAMESPACE" --kube-version "$(kube_version "$c")" \
      --set resourceApiVersion=resource.k8s.io/v1 -f "$c" 2>&1) && [[ $out != *'funcMap fail'* ]]; then
      say "lint ok: ${c##*/}"
    else
      fail "helm lint with ${c##*/}:"; echo "$out" >&2
    fi
  done
}

do_golden() {
  local c name out golden
  for c in "$here"/cases/*.yaml; do
    name=${c##*/}; golden=$here/golden/$name
    if ! out=$(render "$c"); then fail "helm template with cases/$name failed:"; echo "$out" >&2; continue; fi
    if [[ ! -f $golden ]]; then fail "no golden/$name; create it with test/helm/run.sh update"; continue; fi
    if diff -u "$golden" <(echo "$out") >/tmp/helm-golden-diff.$$; then
      say "golden ok: $name"
    else
      fail "cases/$name renders differently from golden/$name (test/helm/run.sh update rewrites it):"
      head -n 80 /tmp/helm-golden-diff.$$ >&2
    fi
    rm -f /tmp/helm-golden-diff.$$
  done
}

do_update() {
  local c name
  for c in "$here"/cases/*.yaml; do
    name=${c##*/}
    render "$c" >"$here/golden/$name" || { cat "$here/golden/$name" >&2; fail "cases/$name does not render"; }
    say "wrote golden/$name"
  done
}

do_bad() {
  local c name want out
  for c in "$here"/bad/*.yaml; do
    name=${c##*/}
    want=$(sed -n 's/^# expect: //p' "$c")
    [[ -n $want ]] || { fail "bad/$name has no '# expect: <text>' line"; continue; }
    if out=$(render "$c"); then
      fail "bad/$name was accepted; want an error containing: $want"
    elif [[ $out != *"$want"* ]]; then
      fail "bad/$name was refused, but the error lacks '$want':"; echo "$out" >&2
    else
      say "refused as expected: $name: $(grep -m1 -F -- "$want" <<<"$out" | sed 's/^ *//')"
    fi
  done
}

# untyped_hostpaths: the names of the hostPath volumes without a type in the manifests on stdin,
# comma-separated (block style "hostPath:" with its fields below it, or flow style "hostPath: {...}").
untyped_hostpaths() {
  awk '
    function close_block() { if (open && !typed) printf "%s%s", (n++ ? ", " : ""), vol; open = 0 }
    /^[ \t]*$/ { next }
    {
      match($0, /^ */); ind = RLENGTH
      if (open && ind <= hind) close_block()
      if ($0 ~ /^ *- name: /) { v = $0; sub(/^ *- name: */, "", v) }
      if ($0 ~ /^ *hostPath: *\{/) { open = 1; hind = ind; vol = v; typed = ($0 ~ /[{,] *type: *[A-Za-z]/); close_block() }
      else if ($0 ~ /^ *hostPath: *$/) { open = 1; typed = 0; hind = ind; vol = v }
      else if (open && $0 ~ /^ *type: *[A-Za-z]/) typed = 1
    }
    END { close_block() }'
}

do_hostpaths() {
  local c name out missing probe
  # The check itself must find what it is for.
  probe=$(printf '%s\n' '      - name: typed' '        hostPath:' '          path: /a' '          type: Directory' \
    '      - name: untyped' '        hostPath:' '          path: /b' '      - name: flow' '        hostPath: {path: /c}' \
    | untyped_hostpaths)
  [[ $probe == 'untyped, flow' ]] || fail "untyped_hostpaths found '$probe' in its probe, want 'untyped, flow'"
  for c in "$here"/cases/*.yaml; do
    name=${c##*/}
    if ! out=$(render "$c"); then fail "helm template with cases/$name failed:"; echo "$out" >&2; continue; fi
    missing=$(untyped_hostpaths <<<"$out")
    if [[ -n $missing ]]; then
      fail "cases/$name renders hostPath volumes without a type (Directory where the node must have the path, DirectoryOrCreate only for the driver's own state): $missing"
    else
      say "hostPath types ok: $name ($(grep -c '^ *hostPath:' <<<"$out") volumes)"
    fi
  done
}

# The pods that must run in a namespace labelled pod-security.kubernetes.io/enforce=restricted.
# The kubelet plugin is not among them: it is privileged by design (docs/helm.md "Pod Security").
RESTRICTED_COMPONENTS=controller,webhook,uninstall-cleanup

do_restricted() {
  local c name out report seen='' probe
  python3 -c 'import yaml' 2>/dev/null || {
    fail "restricted: needs python3 with PyYAML (Debian: python3-yaml, which clang-tidy pulls in)"
    return
  }
  # The check itself must find what it is for: a privileged pod fails each rule, a restricted one
  # none.
  probe=$(python3 "$here/restricted.py" --components webhook <<'YAML' | grep -vc '^checked '
kind: Deployment
metadata: {name: bad}
spec:
  template:
    metadata: {labels: {dra-driver-nvidia-gpu-component: webhook}}
    spec:
      hostNetwork: true
      containers:
      - name: c
        ports: [{containerPort: 443}]
        securityContext: {privileged: true, capabilities: {add: [SYS_ADMIN]}}
      volumes: [{name: h, hostPath: {path: /}}]
YAML
  ) || true
  # hostNetwork, token, hostPath, privileged, port, escalation, non-root, seccomp, drop, add, ro
  [[ $probe == 11 ]] || fail "restricted.py found $probe violations in its privileged probe, want 11"
  probe=$(python3 "$here/restricted.py" --components webhook <<'YAML' 2>&1
kind: Deployment
metadata: {name: good}
spec:
  template:
    metadata: {labels: {dra-driver-nvidia-gpu-component: webhook}}
    spec:
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: c
        ports: [{containerPort: 8443}]
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
YAML
  ) || fail "restricted.py refused its restricted probe: $probe"
  for c in "$here"/cases/*.yaml; do
    name=${c##*/}
    if ! out=$(render "$c"); then fail "helm template with cases/$name failed:"; echo "$out" >&2; continue; fi
    if report=$(python3 "$here/restricted.py" --components "$RESTRICTED_COMPONENTS" <<<"$out"); then
      say "restricted ok: $name: $(grep -c '^checked ' <<<"$report") workloads ($(sed -n 's/^checked \([^ ]*\) .*/\1/p' <<<"$report" | paste -sd' '))"
    else
      fail "cases/$name: pods that are not Pod Security restricted (docs/helm.md \"Pod Security\"):"
      grep -v '^checked ' <<<"$report" | sed 's/^/  /' >&2
    fi
    seen+=" $(sed -n 's/^checked .*(\([^,]*\),.*/\1/p' <<<"$report" | paste -sd' ')"
  done
  # Each component was rendered by some case (a check of nothing passes).
  for c in ${RESTRICTED_COMPONENTS//,/ }; do
    [[ " $seen " == *" $c "* ]] || fail "restricted: no case renders the $c pod"
  done
}

case ${1:-all} in
  lint) do_lint ;;
  golden) do_golden ;;
  bad) do_bad ;;
  hostpaths) do_hostpaths ;;
  restricted) do_restricted ;;
  update) do_update ;;
  all) do_lint; do_golden; do_bad; do_hostpaths; do_restricted ;;
  *) echo "usage: $0 lint|golden|bad|hostpaths|restricted|update|all" >&2; exit 2 ;;
esac
if ((failed)); then say "$failed failed"; exit 1; fi
say "all passed ($("$HELM" version --short 2>/dev/null))"
