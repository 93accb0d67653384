#!/usr/bin/env bash
# Lays out the root filesystem of the workload image from the host's Debian packages: busybox
# (static; sh and the usual tools), glibc's runtime libraries and ldconfig, libgcc and libstdc++.
# That is enough for what tests mount into containers (the mock libnvidia-ml.so.1 and the fake
# nvidia-smi need glibc only) at a tenth of a debootstrap minbase. The layout is Debian's
# (merged /usr, multiarch library folder), so CDI specs written for real nodes apply unchanged.
#
# Usage: build-rootfs.sh <empty output folder> | --print-inputs
# Inputs: PACKAGES below; images.sh hashes their installed versions to decide on a rebuild.
set -euo pipefail

PACKAGES=(busybox-static libc6 libc-bin libgcc-s1 libstdc++6)
if [[ ${1:-} == --print-inputs ]]; then
  # What the output depends on besides this file: the installed package versions.
  dpkg-query -W "${PACKAGES[@]}"
  exit 0
fi
out=${1:?usage: $0 <empty output folder> | --print-inputs}
arch=x86_64-linux-gnu

die() { printf '[images] error: %s\n' "$*" >&2; exit 1; }
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
    die "workload image: Debian package $p is not installed (hack/install-deps.sh installs it)"
done

mkdir -p "$out"/usr/{bin,sbin,lib/$arch,lib64} "$out"/{etc,proc,sys,dev,root,run,var/tmp}
install -d -m 1777 "$out/tmp"
# Merged /usr, as in Debian 12.
for d in bin sbin lib lib64; do ln -sfn "usr/$d" "$out/$d"; done

# Shared libraries: the top-level .so files of the packages (not gconv, audit or debug helpers).
libs() { dpkg -L "$1" | grep -E "^(/usr)?/lib/$arch/[^/]+\.so[.0-9]*$"; }
for f in $(libs libc6) $(libs libgcc-s1) $(libs libstdc++6); do
  cp -a "$f" "$out/usr/lib/$arch/"
done
ln -sfn "../lib/$arch/ld-linux-x86-64.so.2" "$out/usr/lib64/ld-linux-x86-64.so.2"
cp /sbin/ldconfig "$out/usr/sbin/ldconfig"

cp /bin/busybox "$out/usr/bin/busybox"
for applet in $(/bin/busybox --list); do
  [[ -e $out/usr/bin/$applet || $applet == busybox ]] || ln -s busybox "$out/usr/bin/$applet"
done

printf '/lib/%s\n/usr/lib/%s\n' "$arch" "$arch" >"$out/etc/ld.so.conf"
ldconfig -r "$out"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$out/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$out/etc/group"
printf 'hosts: files dns\n' >"$out/etc/nsswitch.conf"
# ldconfig's aux cache holds file times; only ld.so.cache (content-only) belongs in the image.
rm -rf "$out/var/cache/ldconfig"
