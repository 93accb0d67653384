#include "lib/gpuplugin/migprofiles/mig_placement.h"

#include <algorithm>

namespace dra::gpu {
namespace {

bool CoversOrphan(const nvml::Placement& p, const std::vector<bool>& orphan) {
  for (unsigned int s = p.start; s < p.start + p.size && s < orphan.size(); ++s) {
    if (orphan[s]) return true;
  }
  return false;
}

}  // namespace

std::vector<bool> OrphanSlices(const std::vector<nvml::Placement>& placements,
                               unsigned int memory_slices) {
  std::vector<bool> orphan(memory_slices, true);
  for (const nvml::Placement& p : placements) {
    if (p.size == 1 && p.start < memory_slices) orphan[p.start] = false;
  }
  return orphan;
}

bool PlacementPreferred(const nvml::Placement& a, const nvml::Placement& b,
                        const std::vector<bool>& orphan) {
  const bool a_orphan = CoversOrphan(a, orphan);
  const bool b_orphan = CoversOrphan(b, orphan);
  if (a_orphan != b_orphan) return a_orphan;
  return a.start < b.start;
}

std::vector<nvml::Placement> PreferredPlacementOrder(std::vector<nvml::Placement> placements,
                                                     const std::vector<bool>& orphan) {
  std::stable_sort(placements.begin(), placements.end(),
                   [&orphan](const nvml::Placement& a, const nvml::Placement& b) {
                     return PlacementPreferred(a, b, orphan);
                   });
  return placements;
}

}  // namespace dra::gpu
