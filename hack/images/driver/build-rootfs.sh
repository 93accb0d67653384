#!/usr/bin/env bash
# Lays out the root filesystem of the driver image: the product binaries from a C++ build folder
# (without debug info), the init step kubelet-plugin-prestart.sh, busybox (static; sh and the few tools the
# init step and the MPS control-daemon pods run), and exactly the shared libraries that `ldd`
# lists for the binaries, copied from this host. Debian's merged-/usr multiarch layout, as the
# workload image.
#
# Usage: build-rootfs.sh <build dir> <empty output folder> | --print-inputs <build dir>
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Product binaries: <path under the build folder> (installed as /usr/bin/<base name>).
BINARIES=(cmd/gpu-kubelet-plugin/gpu-kubelet-plugin cmd/webhook/webhook
  cmd/compute-domain-kubelet-plugin/compute-domain-kubelet-plugin
  cmd/compute-domain-controller/compute-domain-controller
  cmd/compute-domain-daemon/compute-domain-daemon)
PACKAGES=(busybox-static)
arch=x86_64-linux-gnu

die() { printf '[images] error: %s\n' "$*" >&2; exit 1; }

check_binaries() {
  local b
  for b in "${BINARIES[@]}"; do
    [[ -x $1/$b ]] || die "driver image: no $1/$b; build it first: cmake --preset default &&" \
      "cmake --build --preset default --target gpu-kubelet-plugin webhook compute-domain-kubelet-plugin" \
      "compute-domain-controller compute-domain-daemon"
  done
}

# The resolved host paths of the shared libraries the binaries load, the dynamic loader included.
shared_libs() {
  local b
  for b in "${BINARIES[@]}"; do ldd "$1/$b"; done |
    awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u
}

if [[ ${1:-} == --print-inputs ]]; then
  build=${2:?usage: $0 --print-inputs <build dir>}
  check_binaries "$build"
  # What the output depends on besides the files of this folder: the binaries, the libraries
  # they load, the packages.
  for b in "${BINARIES[@]}"; do sha256sum "$build/$b" | cut -d' ' -f1; done
  shared_libs "$build" | xargs -r readlink -f | xargs -r sha256sum
  dpkg-query -W "${PACKAGES[@]}"
  exit 0
fi
build=${1:?usage: $0 <build dir> <empty output folder>}
out=${2:?usage: $0 <build dir> <empty output folder>}
check_binaries "$build"
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed' ||
  die "driver image: Debian package busybox-static is not installed (hack/install-deps.sh installs it)"

mkdir -p "$out"/usr/{bin,sbin,lib/$arch,lib64} "$out"/{etc,proc,sys,dev,root,run,var/tmp,driver-root}
install -d -m 1777 "$out/tmp"
for d in bin sbin lib lib64; do ln -sfn "usr/$d" "$out/$d"; done

for b in "${BINARIES[@]}"; do
  # Debug info goes, the symbol table stays: the plugin's SIGUSR2 stack dump names functions
  # with it (lib/common/stack_dump.h).
  strip --strip-debug -o "$out/usr/bin/${b##*/}" "$build/$b"
done
install -m 0755 "$here/kubelet-plugin-prestart.sh" "$out/usr/bin/kubelet-plugin-prestart.sh"

# Each library under its soname (the name ldd printed), from the file the host's link resolves to.
while read -r lib; do
  case $lib in
    */ld-linux-x86-64.so.2)
      cp "$(readlink -f "$lib")" "$out/usr/lib/$arch/ld-linux-x86-64.so.2"
      ln -sfn "../lib/$arch/ld-linux-x86-64.so.2" "$out/usr/lib64/ld-linux-x86-64.so.2" ;;
    *) cp "$(readlink -f "$lib")" "$out/usr/lib/$arch/${lib##*/}" ;;
  esac
done < <(shared_libs "$build")
[[ -e $out/usr/lib64/ld-linux-x86-64.so.2 ]] || die "driver image: ldd listed no dynamic loader"

cp /bin/busybox "$out/usr/bin/busybox"
for applet in $(/bin/busybox --list); do
  [[ -e $out/usr/bin/$applet || $applet == busybox ]] || ln -s busybox "$out/usr/bin/$applet"
done
# The VFIO steps run host programs as /usr/sbin/chroot <host root> ... (lib/gpuplugin/vfio/vfio_bind.cc),
# busybox's chroot at its usual path (test/e2e/gpu_vfio.bats found it missing).
ln -sfn ../bin/busybox "$out/usr/sbin/chroot"

printf '/lib/%s\n/usr/lib/%s\n' "$arch" "$arch" >"$out/etc/ld.so.conf"
/sbin/ldconfig -r "$out"
rm -rf "$out/var/cache/ldconfig"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$out/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$out/etc/group"
printf 'hosts: files dns\n' >"$out/etc/nsswitch.conf"
