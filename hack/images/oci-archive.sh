#!/usr/bin/env bash
# Packs a root filesystem folder into a single-layer OCI image archive (an OCI image layout in a
# tar) that `ctr images import` reads, without a registry or a container engine. The output is
# reproducible: same input tree, same bytes, same digests (fixed mtimes and owners, sorted names,
# uncompressed layer, no timestamps in the config).
#
# Usage: oci-archive.sh <rootfs dir> <image name:tag> <out.tar> <config json>
#   <config json>  the image config's "config" object, e.g. '{"Entrypoint":["/pause"]}'
set -euo pipefail

die() { printf '[images] error: %s\n' "$*" >&2; exit 1; }
(($# == 4)) || die "usage: $0 <rootfs dir> <image name:tag> <out.tar> <config json>"
rootfs=$1 name=$2 out=$3 config=$4
[[ -d $rootfs ]] || die "rootfs $rootfs is not a folder"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
blobs=$work/blobs/sha256
mkdir -p "$blobs"

# Deterministic tar: the digest must depend on the file contents only.
det_tar() {
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime "$@"
}

# Stores stdin (or file $1) as a blob; prints "<hex digest> <size>".
put_blob() {
  local tmp=$work/blob.tmp digest
  if (($#)); then mv "$1" "$tmp"; else cat >"$tmp"; fi
  digest=$(sha256sum "$tmp" | cut -d' ' -f1)
  mv "$tmp" "$blobs/$digest"
  echo "$digest $(stat -c %s "$blobs/$digest")"
}

# The layer is stored uncompressed: the images are a few MiB, and the diff_id equals the digest.
det_tar -C "$rootfs" -cf "$work/layer.tar" .
read -r layer_digest layer_size < <(put_blob "$work/layer.tar")

read -r config_digest config_size < <(jq -cn --argjson cfg "$config" --arg diff "sha256:$layer_digest" \
  '{architecture: "amd64", os: "linux", config: $cfg,
    rootfs: {type: "layers", diff_ids: [$diff]},
    history: [{created_by: "hack/images/oci-archive.sh"}]}' | put_blob)

read -r manifest_digest manifest_size < <(jq -cn \
  --arg cd "sha256:$config_digest" --argjson cs "$config_size" \
  --arg ld "sha256:$layer_digest" --argjson ls "$layer_size" \
  '{schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $cd, size: $cs},
    layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $ld, size: $ls}]}' | put_blob)

# io.containerd.image.name gives the full name on import; ref.name is the OCI-standard tag.
jq -cn --arg md "sha256:$manifest_digest" --argjson ms "$manifest_size" --arg name "$name" \
  '{schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
    manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $md, size: $ms,
      platform: {architecture: "amd64", os: "linux"},
      annotations: {"io.containerd.image.name": $name,
        "org.opencontainers.image.ref.name": ($name | split(":") | last)}}]}' >"$work/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$work/oci-layout"

det_tar -C "$work" -cf "$out.tmp" oci-layout index.json blobs
mv -f "$out.tmp" "$out"
echo "sha256:$manifest_digest"
