#!/usr/bin/env bash
# Builds the Kubernetes components (kube-apiserver, kube-scheduler, kube-controller-manager,
# kubelet, kubectl), etcd, containerd (daemon, runc shim, ctr) and helm from the Go module proxy
# into the cache folder (lib.sh). A component whose binary exists and whose build inputs are
# unchanged is not rebuilt. Usage: build.sh [all|etcd|k8s|containerd|helm]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# -dwarf=false: the binaries are linked with -s -w (no symbols, no DWARF), so the compiler need not
# produce DWARF for every package either; that saves CPU on a cold build.
export GOFLAGS="${GOFLAGS:-} -trimpath -gcflags=all=-dwarf=false"
export CGO_ENABLED=${CGO_ENABLED:-0}
# Go's build cache already makes unchanged packages free; the stamp makes an unchanged binary free
# without even asking go. It covers the module's go.mod/go.sum and how it is built.
stamp_of() {
  { cat "$HACK_CLUSTER_DIR/$1/go.mod" "$HACK_CLUSTER_DIR/$1/go.sum"; echo "$GOFLAGS $CGO_ENABLED"; } |
    sha256sum | cut -c1-16
}

build_module() { # <module dir> <out dir> <ldflags> <package>...
  local dir=$1 out=$2 ldflags=$3; shift 3
  local stamp; stamp=$(stamp_of "$dir")
  mkdir -p "$out"
  local todo=()
  for pkg in "$@"; do
    local name=${pkg##*/}
    [[ $name == v3 ]] && name=etcd
    if [[ -x $out/$name && -f $out/.$name.stamp && $(cat "$out/.$name.stamp") == "$stamp" ]]; then
      continue
    fi
    todo+=("$pkg")
  done
  ((${#todo[@]})) || { progress "$dir: up to date in $out"; return 0; }
  for pkg in "${todo[@]}"; do
    local name=${pkg##*/}
    [[ $name == v3 ]] && name=etcd
    progress "building $name ($pkg), this takes minutes when cold"
    local start=$SECONDS
    (cd "$HACK_CLUSTER_DIR/$dir" && go build -ldflags "$ldflags" -o "$out/$name.tmp" "$pkg")
    mv -f "$out/$name.tmp" "$out/$name"
    echo "$stamp" > "$out/.$name.stamp"
    progress "built $name in $((SECONDS - start))s"
  done
}

k8s_ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  k8s_ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  k8s_ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

what=${1:-all}
if [[ $what == all || $what == etcd ]]; then
  build_module etcd "$ETCD_BIN_DIR" "-s -w" go.etcd.io/etcd/server/v3
fi
if [[ $what == all || $what == containerd ]]; then
  # CGO stays off (as for the shim upstream): that only drops the btrfs snapshotter, unused here.
  pkg=github.com/containerd/containerd/v2
  grep -q "^require $pkg $CONTAINERD_VERSION\$" "$HACK_CLUSTER_DIR/containerd/go.mod" ||
    die "hack/cluster/containerd/go.mod does not require $pkg $CONTAINERD_VERSION (lib.sh)"
  build_module containerd "$CONTAINERD_BIN_DIR" \
    "-s -w -X $pkg/version.Version=$CONTAINERD_VERSION -X $pkg/version.Package=$pkg" \
    $pkg/cmd/containerd $pkg/cmd/containerd-shim-runc-v2 $pkg/cmd/ctr
fi
if [[ $what == all || $what == helm ]]; then
  pkg=helm.sh/helm/v4
  grep -q "^require $pkg $HELM_VERSION\$" "$HACK_CLUSTER_DIR/helm/go.mod" ||
    die "hack/cluster/helm/go.mod does not require $pkg $HELM_VERSION (lib.sh)"
  build_module helm "$HELM_BIN_DIR" "-s -w -X $pkg/internal/version.version=$HELM_VERSION" $pkg/cmd/helm
fi
if [[ $what == all || $what == k8s ]]; then
  build_module k8s "$K8S_BIN_DIR" "$k8s_ldflags" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kubelet
fi
