#!/usr/bin/env bash
# Builds the node images from hack/images as OCI archives in $IMAGES_DIR (lib.sh) and imports them
# into a node's containerd. A build runs only when its inputs change: the archive's name carries a
# hash of the input files and of the host package versions they are made from.
#
# Usage: images.sh build                      build what is missing; prints one archive per line
#        images.sh import <containerd socket> [snapshotter]   build if needed, then import
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SRC=$(cd "$HACK_CLUSTER_DIR/../images" && pwd)
IMAGES=(pause workload)
CTR=$CONTAINERD_BIN_DIR/ctr

image_name() { case $1 in pause) echo "$PAUSE_IMAGE" ;; workload) echo "$WORKLOAD_IMAGE" ;; esac; }

# Hash of everything an image is made from: the packer, the image's folder, its name, the tools.
input_hash() {
  {
    image_name "$1"
    cat "$SRC/oci-archive.sh"
    find "$SRC/$1" -type f -print0 | sort -z | xargs -0 cat
    case $1 in
      pause) gcc --version | head -1; dpkg-query -W libc6-dev ;;
      workload) "$SRC/workload/build-rootfs.sh" --print-inputs ;;
    esac
  } | sha256sum | cut -c1-16
}

archive_path() { echo "$IMAGES_DIR/$1-$(input_hash "$1").tar"; }

build_rootfs() { # <image> <empty folder>
  case $1 in
    pause) gcc -static -Os -s -o "$2/pause" "$SRC/pause/pause.c" ;;
    workload) "$SRC/workload/build-rootfs.sh" "$2" ;;
  esac
}

image_config() {
  case $1 in
    pause) echo '{"Entrypoint":["/pause"]}' ;;
    workload) echo '{"Cmd":["/bin/sh"],"WorkingDir":"/","Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}' ;;
  esac
}

# Builds the archive unless the current one exists; the manifest digest goes beside it (.digest).
ensure_archive() {
  local img=$1 out t rootfs digest
  out=$(archive_path "$img")
  [[ -s $out && -s $out.digest ]] && return 0
  t=$EPOCHREALTIME
  progress "building image $(image_name "$img") from hack/images/$img"
  mkdir -p "$IMAGES_DIR"
  rootfs=$(mktemp -d)
  build_rootfs "$img" "$rootfs" || { rm -rf "$rootfs"; die "image $img: building the root filesystem failed"; }
  digest=$("$SRC/oci-archive.sh" "$rootfs" "$(image_name "$img")" "$out" "$(image_config "$img")") ||
    { rm -rf "$rootfs"; die "image $img: oci-archive.sh failed"; }
  rm -rf "$rootfs"
  echo "$digest" >"$out.digest"
  # Older builds of the same image are dead weight.
  find "$IMAGES_DIR" -maxdepth 1 -name "$img-*.tar*" ! -name "${out##*/}*" -delete
  progress "built $(image_name "$img") ($digest, $(du -h "$out" | cut -f1)) in $(elapsed "$t")"
}

# Imports an archive unless the node already has that name at that digest. The pinned label keeps
# the kubelet's image garbage collector off them: nothing could pull them back.
import_archive() { # <image> <socket> <snapshotter>
  local img=$1 sock=$2 snap=$3 name out want have
  name=$(image_name "$img"); out=$(archive_path "$img"); want=$(<"$out.digest")
  have=$("$CTR" -a "$sock" -n k8s.io images ls "name==$name" 2>/dev/null | awk 'NR == 2 { print $3 }')
  [[ $have == "$want" ]] && return 0
  "$CTR" -a "$sock" -n k8s.io images import --snapshotter "$snap" --platform linux/amd64 \
    --label io.cri-containerd.pinned=pinned "$out" >/dev/null ||
    die "image $img: ctr images import into $sock failed"
}

main() {
  local img
  case ${1:-} in
    build)
      for img in "${IMAGES[@]}"; do ensure_archive "$img"; archive_path "$img"; done ;;
    import)
      [[ -S ${2:-} ]] || die "usage: $0 import <containerd socket> [snapshotter]"
      for img in "${IMAGES[@]}"; do ensure_archive "$img"; import_archive "$img" "$2" "${3:-overlayfs}"; done ;;
    *) die "usage: $0 build | import <containerd socket> [snapshotter]" ;;
  esac
}

main "$@"
