#!/usr/bin/env bash
# Builds the driver image (every product binary of a C++ build, the kubelet plugin's init step,
# busybox and the C runtime the binaries load; hack/images/driver/) as a reproducible OCI archive
# in $IMAGES_DIR, and imports it into the local nodes' containerd. It needs the C++ build: run
# `cmake --build --preset default` first. A build happens only when an input changes (the
# archive's name carries their hash: binaries, libraries, scripts, package versions, name).
#
# Usage: driver-image.sh build      build if needed; prints the image name and the archive
#        driver-image.sh import     build if needed, then import into every running node
#        driver-image.sh name       the image name (repository:tag) the chart is installed with
# Environment: DRA_BUILD_DIR (default build/default), DRA_DRIVER_IMAGE_REPOSITORY (default
# localhost/dra-driver-nvidia-gpu). The tag is v<project version of CMakeLists.txt>, the chart's
# default tag (appVersion).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$HACK_CLUSTER_DIR/node-lib.sh"
source "$HACK_CLUSTER_DIR/gpu-nodes-lib.sh"

REPO_ROOT=$(cd "$HACK_CLUSTER_DIR/../.." && pwd)
SRC=$REPO_ROOT/hack/images
BUILD_DIR=${DRA_BUILD_DIR:-$REPO_ROOT/build/default}
REPOSITORY=${DRA_DRIVER_IMAGE_REPOSITORY:-localhost/dra-driver-nvidia-gpu}
CHART_YAML=$REPO_ROOT/deployments/helm/dra-driver-nvidia-gpu/Chart.yaml
# Five binaries; the two kubelet plugins carry gRPC and protobuf statically (about 8 MiB each).
BUDGET_MIB=48
CTR=$CONTAINERD_BIN_DIR/ctr

version() {
  local v
  v=$(sed -nE 's/^project\([^)]* VERSION ([0-9][0-9.]*).*/\1/p' "$REPO_ROOT/CMakeLists.txt")
  [[ -n $v ]] || die "driver image: no 'project(... VERSION x.y.z' in $REPO_ROOT/CMakeLists.txt"
  echo "$v"
}

image_name() { echo "$REPOSITORY:v$(version)"; }

# The chart's default tag is v<appVersion>; the image is only useful with it when both agree.
check_chart_version() {
  [[ -f $CHART_YAML ]] || return 0
  local app; app=$(sed -nE 's/^appVersion: *"?([^"]*)"?$/\1/p' "$CHART_YAML")
  [[ $app == "$(version)" ]] ||
    die "driver image: Chart.yaml appVersion is '$app' but CMakeLists.txt's project VERSION is" \
      "'$(version)'; they must be equal (the chart's default image tag is v<appVersion>)"
}

input_hash() {
  {
    image_name
    cat "$SRC/oci-archive.sh"
    find "$SRC/driver" -type f -print0 | sort -z | xargs -0 cat
    "$SRC/driver/build-rootfs.sh" --print-inputs "$BUILD_DIR"
  } | sha256sum | cut -c1-16
}

# Image config: no entrypoint (the chart names the command of every container). The NVIDIA
# variables are what the public image sets; the chart overrides NVIDIA_VISIBLE_DEVICES with void.
image_config() {
  jq -cn '{Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                 "NVIDIA_DISABLE_REQUIRE=true", "NVIDIA_VISIBLE_DEVICES=all",
                 "NVIDIA_DRIVER_CAPABILITIES=utility"],
           WorkingDir: "/"}'
}

# Uncompressed size of the archive's one layer, in bytes.
layer_bytes() {
  local m; m=$(tar -xOf "$1" index.json | jq -r '.manifests[0].digest | sub("sha256:"; "")')
  tar -xOf "$1" "blobs/sha256/$m" | jq '.layers[0].size'
}

ARCHIVE=
ensure_archive() {
  check_chart_version
  local hash out t rootfs digest bytes
  hash=$(input_hash)
  out=$IMAGES_DIR/driver-$hash.tar
  ARCHIVE=$out
  [[ -s $out && -s $out.digest ]] && return 0
  t=$EPOCHREALTIME
  progress "building image $(image_name) from $BUILD_DIR and hack/images/driver"
  mkdir -p "$IMAGES_DIR"
  rootfs=$(mktemp -d)
  "$SRC/driver/build-rootfs.sh" "$BUILD_DIR" "$rootfs" ||
    { rm -rf "$rootfs"; die "driver image: building the root filesystem failed"; }
  digest=$("$SRC/oci-archive.sh" "$rootfs" "$(image_name)" "$out.new" "$(image_config)") ||
    { rm -rf "$rootfs"; die "driver image: oci-archive.sh failed"; }
  rm -rf "$rootfs"
  bytes=$(layer_bytes "$out.new")
  if ((bytes > BUDGET_MIB * 1024 * 1024)); then
    rm -f "$out.new"
    die "driver image: $((bytes / 1024 / 1024)) MiB uncompressed, over the budget of $BUDGET_MIB MiB"
  fi
  mv -f "$out.new" "$out"
  echo "$digest" >"$out.digest"
  find "$IMAGES_DIR" -maxdepth 1 -name 'driver-*.tar*' ! -name "${out##*/}*" -delete
  progress "built $(image_name) ($digest): $(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }') MiB" \
    "uncompressed (budget $BUDGET_MIB MiB) in $(elapsed "$t")"
}

import_node() { # <node>
  local n=$1 sock name want have t=$EPOCHREALTIME
  sock=$(node_socket "$n") name=$(image_name) want=$(<"$ARCHIVE.digest")
  have=$("$CTR" -a "$sock" -n k8s.io images ls "name==$name" 2>/dev/null | awk 'NR == 2 { print $3 }')
  if [[ $have == "$want" ]]; then
    progress "$n: $name already imported ($want)"
    return 0
  fi
  "$CTR" -a "$sock" -n k8s.io images import --snapshotter "$NODE_SNAPSHOTTER" --platform linux/amd64 \
    --label io.cri-containerd.pinned=pinned "$ARCHIVE" >/dev/null ||
    die "driver image: ctr images import into $n ($sock) failed"
  progress "$n: imported $name ($want) in $(elapsed "$t")"
}

case ${1:-} in
  build)
    ensure_archive
    echo "$(image_name) $ARCHIVE" ;;
  import)
    ensure_archive
    nodes=$(running_nodes containerd)
    [[ -n $nodes ]] || die "driver image: no local node is running; start them with hack/cluster/up.sh --nodes N"
    for n in $nodes; do import_node "$n"; done ;;
  name) image_name ;;
  *) die "usage: $0 build | import | name" ;;
esac
