#!/usr/bin/env bash
# Installs everything this repository needs on a fresh Debian 12 (bookworm) machine.
# Idempotent: packages already present are left alone, and apt-get update runs only when a
# package is missing. Run as root (CI and the dev machines are root).
set -euo pipefail

log() { printf '[install-deps] %s\n' "$*"; }

# Debian's non-free component carries libnvidia-ml-dev (the official nvml.h) that a test compares
# our own NVML declarations against.
enable_non_free() {
  local f=/etc/apt/sources.list.d/debian.sources
  if [[ -f $f ]] && ! grep -q 'non-free' "$f"; then
    log "enabling the non-free component in $f"
    sed -i 's/^Components: main$/Components: main contrib non-free non-free-firmware/' "$f"
    NEED_UPDATE=1
  fi
}

PACKAGES=(
  # build toolchain
  build-essential cmake ninja-build pkg-config ccache clang clang-format clang-tidy lld
  # clang-tidy 22 (bookworm-security) for the static checks: unlike 14 it does not run the checks
  # over system headers (whose findings were never shown), which makes a full run about 5x faster;
  # its sanitizer headers, which the check build's compile commands include
  clang-tidy-22 libclang-rt-22-dev
  # clang's runtimes (libFuzzer, its ASan/UBSan) for the fuzz preset (hack/fuzz.sh); bookworm's
  # clang is 14, and libclang-common-14-dev no longer pulls them in
  libclang-rt-14-dev
  # C++ libraries
  libabsl-dev libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libssl-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # NVIDIA's official nvml.h (non-free), read only by the NVML ABI conformance test
  libnvidia-ml-dev
  # the local cluster and tests; shellcheck for the scripts and python3 for hack/include-graph.py
  # (hack/static-checks.sh)
  openssl curl jq bats iproute2 psmisc procps util-linux shellcheck python3
  # the local nodes (hack/cluster/node.sh: containerd's runtime and pod network) and the busybox of
  # their workload image (hack/images)
  runc containernetworking-plugins busybox-static
  # pods reach the API server through the `kubernetes` Service (node-host.sh: one DNAT rule)
  iptables
)

NEED_UPDATE=0
enable_non_free
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  NEED_UPDATE=1
fi
if ((NEED_UPDATE)); then
  log "apt-get update"
  apt-get update -qq
fi
if ((${#missing[@]})); then
  log "installing: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v go >/dev/null 2>&1; then
  echo "[install-deps] error: go (>= 1.26) is required to build Kubernetes from the module proxy and is not on PATH" >&2
  exit 1
fi
log "ok: $(go version), $(cmake --version | head -1)"
