#!/bin/sh
# The kubelet plugin pod's init step (busybox sh, in the driver image): waits until the NVIDIA
# driver under the host driver root can answer, so that the plugin starts against a usable NVML.
# A driver installed by a driver container (for example at /run/nvidia/driver) may appear long
# after the pod: the chart mounts the root's parent folder with HostToContainer propagation, and
# this script looks below it, at the root's base name, on every attempt.
#
# Environment: NVIDIA_DRIVER_ROOT (host path of the driver root, default /),
#              PRESTART_INTERVAL (seconds between attempts, default 10).
set -u

root=${NVIDIA_DRIVER_ROOT:-/}
interval=${PRESTART_INTERVAL:-10}
case $root in
  /) base= ;;
  *) base=${root%/}; base=${base##*/} ;;
esac
# What the host path looks like in here.
dir=/driver-root-parent${base:+/$base}

log() { echo "kubelet-plugin-prestart: $*"; }

find_first() { # <name> <folder>...: prints the first <folder>/<name> that exists
  name=$1
  shift
  for d in "$@"; do
    if [ -e "$dir$d/$name" ]; then
      echo "$dir$d/$name"
      return 0
    fi
  done
  return 1
}

attempt=0
while :; do
  attempt=$((attempt + 1))
  smi=$(find_first nvidia-smi /opt/bin /usr/bin /usr/sbin /bin /sbin) || smi=
  lib=$(find_first libnvidia-ml.so.1 /usr/lib64 /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu \
    /lib64 /lib/x86_64-linux-gnu /lib/aarch64-linux-gnu /usr/lib /lib) || lib=
  if [ -n "$smi" ] && [ -n "$lib" ]; then
    if out=$(env -i LD_PRELOAD="$lib" "$smi" --version 2>&1); then
      log "driver root $root is ready: $smi and $lib answer"
      echo "$out" | head -n 3
      exit 0
    fi
    why="$smi --version failed: $(echo "$out" | tail -n 1)"
  elif [ -z "$smi" ]; then
    why="no nvidia-smi in $dir/{opt/bin,usr/bin,usr/sbin,bin,sbin}"
  else
    why="no libnvidia-ml.so.1 in the library folders of $dir"
  fi
  log "attempt $attempt: driver root $root (seen at $dir) not ready: $why; next try in ${interval}s"
  if [ $((attempt % 6)) -eq 1 ]; then
    log "hint: nvidiaDriverRoot must be the host folder that holds the driver (/ for a host install," \
      "/run/nvidia/driver for the GPU Operator's driver container); is the driver installed?"
  fi
  sleep "$interval"
done
