#!/usr/bin/env bash
# Creates (or refreshes) a mock NVIDIA driver root for a node profile:
#
#   <dir>/usr/lib/<arch>-linux-gnu/libnvidia-ml.so.<driver version>   the mock NVML library, with
#                                                                      the profile appended
#   <dir>/usr/lib/<arch>-linux-gnu/libnvidia-ml.so.1 -> libnvidia-ml.so.<driver version>
#   <dir>/usr/bin/nvidia-smi                                           the fake nvidia-smi
#   <dir>/usr/bin/nvidia-cuda-mps-control                              the fake MPS control
#   <dir>/usr/bin/nvidia-imex, nvidia-imex-ctl                         the fake IMEX daemon and
#                                                                      its control tool
#   <dir>/var/lib/mock-nvml/profile.json                               the node profile
#   <dir>/var/lib/mock-nvml/state.json, state.lock                     mutable state (by the mock)
#   <dir>/dev/nvidiactl, nvidia-modeset, nvidia-uvm, nvidia-uvm-tools, nvidia<minor>...
#   <dir>/dev/nvidia-caps/nvidia-cap<N>                                MIG capabilities (by the mock)
#   <dir>/sys/bus/pci/devices/<bus id> -> ../../../devices/pci<root>/.../<bus id>, with numa_node
#                                                                      the GPUs' PCI topology
#   <dir>/proc/devices, <dir>/proc/driver/nvidia/...,
#   <dir>/proc/driver/nvidia-caps/mig-minors                           (by the mock, see
#                                                                       mock-nvml/materialize.h)
#   <dir>/usr/lib/<arch>-linux-gnu/libnvfm.so.1, <dir>/var/lib/mock-nvfm/partitions.json,
#   <dir>/proc/driver/nvidia-nvswitch/devices/0000:05:00.0    the fake Fabric Manager library
#                                                                      and its partitions (with
#                                                                      --fm-partitions only)
#   <dir>/proc/driver/nvidia/capabilities/fabric-imex-mgmt,
#   <dir>/dev/nvidia-caps/nvidia-cap0                                  IMEX management capability
#                                                                      (by the mock, fabric
#                                                                      profiles only)
#
# Only libnvidia-ml.so.1 is created, no libnvidia-ml.so: the product looks for the .so.1 name
# only (docs/compatibility.md "Driver root"), and the versioned file behind the link is what a
# real driver installs.
# Device nodes are character devices with the driver's numbers when run as root (195 for
# nvidia*, the mock's /proc/devices majors for nvidia-uvm and nvidia-caps), else empty files.
#
# Usage: make-driver-root.sh [--lib PATH] [--smi PATH] [--mps-control PATH] [--imex PATH]
#                            [--imex-ctl PATH] [--clique-id N] [--cluster-uuid UUID]
#                            [--fm-partitions FILE [--nvfm PATH]] [--reset-state] <profile> <dir>
#   <profile>      a profile file, or a name under test/doubles/profiles/ (e.g. h100-8x)
#   --lib PATH     the built mock library (default: $MOCK_NVML_LIBRARY, else
#                  build/default/test/doubles/mock-nvml/libnvidia-ml.so.1 in this checkout)
#   --smi PATH     the built fake nvidia-smi (default: $MOCK_NVIDIA_SMI, else
#                  build/default/test/doubles/nvidia-smi/nvidia-smi)
#   --mps-control PATH  the built fake nvidia-cuda-mps-control (default: $MOCK_MPS_CONTROL, else
#                  build/default/test/doubles/mps-control/nvidia-cuda-mps-control; a missing
#                  default is skipped with a warning, a missing explicit path is an error)
#   --imex PATH    the built fake nvidia-imex (default: $MOCK_NVIDIA_IMEX, else
#                  build/default/test/doubles/imex/nvidia-imex; missing default: skipped with a
#                  warning, missing explicit path: an error)
#   --imex-ctl PATH  the built fake nvidia-imex-ctl (default: $MOCK_NVIDIA_IMEX_CTL, else
#                  build/default/test/doubles/imex/nvidia-imex-ctl; same rules as --imex)
#   --clique-id N  installs the profile with the NVLink clique ID of every GPU's fabric info set
#                  to N (a decimal uint32), so that several roots (nodes) can be in the same or in
#                  different cliques; default: the profile's value. The profile must have fabric
#                  info ("fabric" objects).
#   --cluster-uuid UUID  likewise for the fabric cluster UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)
#   --reset-state  forget MIG instances and settings changed since the profile was installed
#                  (and, with --fm-partitions, the active Fabric Manager partitions)
#   --fm-partitions FILE  Fabric Manager (docs/fabric-manager.md): installs the fake libnvfm.so.1
#                  (--nvfm PATH, else $MOCK_NVFM_LIBRARY, else
#                  build/default/test/doubles/fake-nvfm/libnvfm.so.1)
#                  beside the mock NVML, FILE ({"partitions": [{"id": N, "gpus": [module IDs]}]})
#                  as var/lib/mock-nvfm/partitions.json (the active partitions are forgotten when
#                  it changes), and an NVSwitch entry proc/driver/nvidia-nvswitch/devices/
#                  0000:05:00.0, so that a plugin whose --host-root is this directory finds a fabric
#
# Idempotent: running it again leaves the same tree. state.json is kept unless --reset-state is
# given or the profile differs from the installed one (a changed --clique-id or --cluster-uuid
# counts as a different profile). var/lib/mock-nvml/profile.json is the profile as installed,
# with the fabric patches applied.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
lib=${MOCK_NVML_LIBRARY:-$repo/build/default/test/doubles/mock-nvml/libnvidia-ml.so.1}
smi=${MOCK_NVIDIA_SMI:-$repo/build/default/test/doubles/nvidia-smi/nvidia-smi}
mps_control=${MOCK_MPS_CONTROL:-}
mps_control_default=$repo/build/default/test/doubles/mps-control/nvidia-cuda-mps-control
imex=${MOCK_NVIDIA_IMEX:-}
imex_default=$repo/build/default/test/doubles/imex/nvidia-imex
imex_ctl=${MOCK_NVIDIA_IMEX_CTL:-}
imex_ctl_default=$repo/build/default/test/doubles/imex/nvidia-imex-ctl
clique_id=
cluster_uuid=
reset_state=0
fm_partitions=
nvfm=${MOCK_NVFM_LIBRARY:-$repo/build/default/test/doubles/fake-nvfm/libnvfm.so.1}

die() {
  echo "make-driver-root: $*" >&2
  exit 1
}

args=()
while (($#)); do
  case $1 in
    --lib) lib=${2:?--lib needs a path}; shift 2 ;;
    --smi) smi=${2:?--smi needs a path}; shift 2 ;;
    --mps-control) mps_control=${2:?--mps-control needs a path}; shift 2 ;;
    --imex) imex=${2:?--imex needs a path}; shift 2 ;;
    --imex-ctl) imex_ctl=${2:?--imex-ctl needs a path}; shift 2 ;;
    --clique-id) clique_id=${2:?--clique-id needs a number}; shift 2 ;;
    --cluster-uuid) cluster_uuid=${2:?--cluster-uuid needs a UUID}; shift 2 ;;
    --reset-state) reset_state=1; shift ;;
    --fm-partitions) fm_partitions=${2:?--fm-partitions needs a file}; shift 2 ;;
    --nvfm) nvfm=${2:?--nvfm needs a path}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) args+=("$1"); shift ;;
  esac
done
((${#args[@]} == 2)) || die "usage: make-driver-root.sh [--lib PATH] [--smi PATH] [--mps-control PATH] [--imex PATH] [--imex-ctl PATH] [--clique-id N] [--cluster-uuid UUID] [--fm-partitions FILE] [--nvfm PATH] [--reset-state] <profile> <dir>"
if [[ -n $clique_id ]]; then
  { [[ $clique_id =~ ^[0-9]+$ ]] && ((${#clique_id} <= 10 && 10#$clique_id <= 4294967295)); } ||
    die "--clique-id $clique_id: want a decimal number from 0 to 4294967295"
  clique_id=$((10#$clique_id))
fi
if [[ -n $cluster_uuid ]]; then
  [[ $cluster_uuid =~ ^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$ ]] ||
    die "--cluster-uuid $cluster_uuid: want a UUID like dd6ffbfa-8abc-4492-a855-efc01b31186c"
fi

profile=${args[0]}
if [[ ! -f $profile ]]; then
  profile=$here/profiles/${profile%.json}.json
fi
[[ -f $profile ]] || die "no profile ${args[0]} (looked in $here/profiles/)"
[[ -f $lib ]] || die "no mock library at $lib (build the mock_nvml target, or pass --lib)"
[[ -f $smi ]] || die "no fake nvidia-smi at $smi (build the nvidia_smi target, or pass --smi)"
if [[ -n $fm_partitions ]]; then
  [[ -f $fm_partitions ]] || die "--fm-partitions: no file $fm_partitions"
  [[ -f $nvfm ]] || die "no fake libnvfm.so.1 at $nvfm (build the fake_nvfm target, or pass --nvfm)"
fi
if [[ -n $mps_control ]]; then
  [[ -f $mps_control ]] || die "no fake nvidia-cuda-mps-control at $mps_control (build the nvidia_cuda_mps_control target)"
elif [[ -f $mps_control_default ]]; then
  mps_control=$mps_control_default
else
  echo "make-driver-root: warning: no fake nvidia-cuda-mps-control at $mps_control_default (build the nvidia_cuda_mps_control target); MPS sharing will not work in this root" >&2
fi
# pick_double VAR DEFAULT NAME TARGET: an explicit path must exist; a missing default is skipped.
pick_double() {
  local -n path=$1
  if [[ -n $path ]]; then
    [[ -f $path ]] || die "no fake $3 at $path (build the $4 target)"
  elif [[ -f $2 ]]; then
    path=$2
  else
    echo "make-driver-root: warning: no fake $3 at $2 (build the $4 target); IMEX daemons will not work in this root" >&2
  fi
}
pick_double imex "$imex_default" nvidia-imex fake_nvidia_imex
pick_double imex_ctl "$imex_ctl_default" nvidia-imex-ctl fake_nvidia_imex_ctl

# The fabric patches: a copy of the profile with every "cluster_uuid" / "clique_id" replaced
# (the profiles are pretty-printed, one member per line).
if [[ -n $clique_id || -n $cluster_uuid ]]; then
  grep -q '"fabric"[[:space:]]*:' "$profile" ||
    die "--clique-id/--cluster-uuid: profile $profile has no fabric info to patch"
  patched=$(mktemp "${TMPDIR:-/tmp}/make-driver-root-profile.XXXXXX")
  trap 'rm -f "$patched"' EXIT
  sed_args=()
  [[ -z $clique_id ]] || sed_args+=(-e "s/(\"clique_id\"[[:space:]]*:[[:space:]]*)[0-9]+/\1$clique_id/")
  [[ -z $cluster_uuid ]] || sed_args+=(-e "s/(\"cluster_uuid\"[[:space:]]*:[[:space:]]*)\"[^\"]*\"/\1\"${cluster_uuid,,}\"/")
  sed -E "${sed_args[@]}" "$profile" >"$patched"
  profile=$patched
fi

mkdir -p "${args[1]}"
root=$(cd "${args[1]}" && pwd)

case $(uname -m) in
  aarch64) libdir=$root/usr/lib/aarch64-linux-gnu ;;
  *) libdir=$root/usr/lib/x86_64-linux-gnu ;;
esac

version=$(sed -n 's/^[[:space:]]*"driver_version":[[:space:]]*"\([^"]*\)".*/\1/p' "$profile" | head -n1)
[[ -n $version ]] || die "profile $profile has no driver_version"

# install_file SRC DEST MODE [PROFILE]: copies without debug info (when strip exists), replacing
# DEST atomically so that a process using the old file keeps a consistent view. With PROFILE, the
# profile is appended behind the ELF data with a 32-byte footer (mock-nvml/spec.h,
# LoadEmbeddedNodeSpec): a container gets only the driver's files through CDI, and this is how the
# mock library inside it knows the node's GPUs.
install_file() {
  local tmp="$2.tmp.$$"
  if command -v strip >/dev/null 2>&1 && strip --strip-debug -o "$tmp" "$1" 2>/dev/null; then
    :
  else
    cp "$1" "$tmp"
  fi
  if [[ -n ${4:-} ]]; then
    cat "$4" >>"$tmp"
    printf '\nmock-nvml-profile %012d\n' "$(stat -c %s "$4")" >>"$tmp"
  fi
  chmod "$3" "$tmp"
  mv -f "$tmp" "$2"
}

mkdir -p "$libdir" "$root/usr/bin" "$root/var/lib/mock-nvml" "$root/dev" "$root/proc/driver/nvidia"

install_file "$lib" "$libdir/libnvidia-ml.so.$version" 0755 "$profile"
for old in "$libdir"/libnvidia-ml.so.*.*; do  # a library of another driver version
  if [[ -e $old && $old != "$libdir/libnvidia-ml.so.$version" ]]; then
    rm -f "$old"
  fi
done
ln -sfn "libnvidia-ml.so.$version" "$libdir/libnvidia-ml.so.1"
install_file "$smi" "$root/usr/bin/nvidia-smi" 0755
if [[ -n $mps_control ]]; then
  install_file "$mps_control" "$root/usr/bin/nvidia-cuda-mps-control" 0755
fi
if [[ -n $imex ]]; then
  install_file "$imex" "$root/usr/bin/nvidia-imex" 0755
fi
if [[ -n $imex_ctl ]]; then
  install_file "$imex_ctl" "$root/usr/bin/nvidia-imex-ctl" 0755
fi

if ! cmp -s "$profile" "$root/var/lib/mock-nvml/profile.json"; then
  cp "$profile" "$root/var/lib/mock-nvml/profile.json.tmp.$$"
  mv -f "$root/var/lib/mock-nvml/profile.json.tmp.$$" "$root/var/lib/mock-nvml/profile.json"
  reset_state=1  # state of another profile means nothing for this one
fi
if ((reset_state)); then
  rm -f "$root/var/lib/mock-nvml/state.json"
fi

# char_device PATH MAJOR MINOR
char_device() {
  if ((EUID == 0)); then
    if [[ -c $1 && "$(stat -c '%t:%T' "$1")" == "$(printf '%x:%x' "$2" "$3")" ]]; then
      return
    fi
    rm -f "$1"
    mknod -m 0666 "$1" c "$2" "$3"
  elif [[ ! -e $1 ]]; then
    : >"$1"
    chmod 0666 "$1"
  fi
}

char_device "$root/dev/nvidiactl" 195 255
char_device "$root/dev/nvidia-modeset" 195 254
while read -r minor; do
  char_device "$root/dev/nvidia$minor" 195 "$minor"
done < <(grep -o '"minor":[[:space:]]*[0-9]*' "$profile" | grep -o '[0-9]*$')

# <dir>/sys: the PCI topology of the profile's GPUs, as the kernel lays it out, for the plugin's
# --sys-root (resource.kubernetes.io/pcieRoot and numaNode; lib/gpuplugin/inventory/sysfs.h). Derived from each
# bus id DDDD:BB:dd.f: a GPU on bus BB > 0 sits behind the root port DDDD:(BB-1):00.0 of root
# complex pciDDDD:(BB-1); on bus 00 (a VM's flat bus) directly under pciDDDD:00. NUMA node: -1
# (no affinity, as in a VM) on bus 00, 1 for domains >= 0x10 or buses >= 0x80 (the second
# socket), else 0. Rebuilt from scratch on every run.
write_sysfs() {
  local bdf dom bus path numa
  rm -rf "$root/sys.tmp.$$"
  mkdir -p "$root/sys.tmp.$$/bus/pci/devices" "$root/sys.tmp.$$/devices"
  while read -r bdf; do
    bdf=${bdf,,}
    dom=${bdf%%:*} bus=${bdf#*:} bus=${bus%%:*}
    if ((16#$bus > 0)); then
      path=pci$dom:$(printf '%02x' $((16#$bus - 1)))/$dom:$(printf '%02x' $((16#$bus - 1))):00.0/$bdf
      if ((16#$dom >= 16 || 16#$bus >= 128)); then numa=1; else numa=0; fi
    else
      path=pci$dom:00/$bdf numa=-1
    fi
    mkdir -p "$root/sys.tmp.$$/devices/$path"
    echo "$numa" >"$root/sys.tmp.$$/devices/$path/numa_node"
    ln -s "../../../devices/$path" "$root/sys.tmp.$$/bus/pci/devices/$bdf"
  done < <(grep -o '"pci_bus_id":[[:space:]]*"[^"]*"' "$profile" | grep -o '[0-9a-fA-F]*:[0-9a-fA-F]*:[0-9a-fA-F.]*')
  rm -rf "$root/sys"
  mv "$root/sys.tmp.$$" "$root/sys"
}
write_sysfs

# The first NVML session in the root writes state.json, /proc and the nvidia-caps nodes.
if ! out=$(env -u MOCK_NVML_ROOT -u LD_PRELOAD -u MOCK_NVML_FORCED_ERRORS \
    "$root/usr/bin/nvidia-smi" --version 2>&1); then
  die "the mock driver root does not work: $out"
fi

uvm_major=$(awk '$2 == "nvidia-uvm" {print $1}' "$root/proc/devices")
[[ -n $uvm_major ]] || die "the mock wrote no nvidia-uvm entry to $root/proc/devices"
char_device "$root/dev/nvidia-uvm" "$uvm_major" 0
char_device "$root/dev/nvidia-uvm-tools" "$uvm_major" 1

# Fabric Manager: the fake library, its partitions (a changed list forgets the active ones), and
# the NVSwitch entry fabric detection looks for.
if [[ -n $fm_partitions ]]; then
  install_file "$nvfm" "$libdir/libnvfm.so.1" 0755
  mkdir -p "$root/var/lib/mock-nvfm" "$root/proc/driver/nvidia-nvswitch/devices"
  if ((reset_state)) || ! cmp -s "$fm_partitions" "$root/var/lib/mock-nvfm/partitions.json"; then
    rm -f "$root/var/lib/mock-nvfm/state.json" "$root/var/lib/mock-nvfm/inject.json"
    cp "$fm_partitions" "$root/var/lib/mock-nvfm/partitions.json.tmp.$$"
    mv -f "$root/var/lib/mock-nvfm/partitions.json.tmp.$$" "$root/var/lib/mock-nvfm/partitions.json"
  fi
  : >"$root/proc/driver/nvidia-nvswitch/devices/0000:05:00.0"
fi
