#pragma once

// Minor numbers of the nvidia-caps character devices (/dev/nvidia-caps/nvidia-cap<minor>), laid
// out as the NVIDIA kernel module does in /proc/driver/nvidia-caps/mig-minors: 1 is MIG "config",
// 2 is MIG "monitor", then per GPU minor 15 GPU-instance slots of 9 minors each (the GI access
// minor followed by its 8 compute-instance access minors).
//
// Header-only: shared by the mock library (which writes the proc files) and the fake nvidia-smi
// (which decides MIG device visibility by the presence of these nodes).

namespace mock_nvml {

// The IMEX management capability (proc/driver/nvidia/capabilities/fabric-imex-mgmt) of a node
// with NVLink fabric: minor 0, which the MIG layout below never uses.
inline constexpr unsigned int kCapsFabricImexMgmtMinor = 0;
inline constexpr unsigned int kCapsMigConfigMinor = 1;
inline constexpr unsigned int kCapsMigMonitorMinor = 2;
inline constexpr unsigned int kCapsGiSlotsPerGpu = 15;
inline constexpr unsigned int kCapsMinorsPerGi = 9;

inline constexpr unsigned int GiAccessMinor(unsigned int gpu_minor, unsigned int gi_id) {
  return 3 + gpu_minor * kCapsGiSlotsPerGpu * kCapsMinorsPerGi + gi_id * kCapsMinorsPerGi;
}

inline constexpr unsigned int CiAccessMinor(unsigned int gpu_minor, unsigned int gi_id,
                                            unsigned int ci_id) {
  return GiAccessMinor(gpu_minor, gi_id) + 1 + ci_id;
}

// Majors the mock writes into <root>/proc/devices. 195 is fixed by the driver; the others are
// dynamic on real hosts, so any free value will do.
inline constexpr unsigned int kNvidiaMajor = 195;
inline constexpr unsigned int kNvidiaCapsMajor = 508;
inline constexpr unsigned int kNvidiaCapsImexChannelsMajor = 509;
inline constexpr unsigned int kNvidiaUvmMajor = 510;

}  // namespace mock_nvml
