#pragma once

// Which placements of a GPU instance profile the plugin announces first (docs/dynamic-mig.md
// "Placement policy").
//
// With DynamicMIG every (profile, placement) of a GPU is a device that consumes the GPU's shared
// counters (memory-slice-<i> among them), so the scheduler never allocates two overlapping
// instances. Which of the free placements a claim gets is the scheduler's choice: it takes the
// first device of the slice, in slice order, that fits. The plugin decides that order. The Go
// driver sorts devices by name, which is ascending placement start for every profile
// ("first-fit"): a first 3g instance lands on slices 0-3, the only place of a 4g or 7g instance,
// while slices 4-7 can never again hold a 4g, and the next 4g claim fails although 4 slices and 4
// compute slices are free (#933 in the Go driver's tracker).
//
// The policy ("orphan slices first"): a memory slice that no single-slice placement covers (slice
// 7 on A100 and H100: NVML's 1g placements are 0..6) can only ever be used by a multi-slice
// instance. Placements that cover such a slice are announced first, then the others in ascending
// start. So a 3g goes to slices 4-7 and a 1g.20gb (H100, 2 slices) to 6-7, using memory that no
// 1g can use and leaving slice 0 onwards whole for a 4g or the other 3g; everything else fills from
// slice 0 as first-fit does. Measured against first-fit on the mock A100 and H100 tables
// (mig_placement_test.cc): never fewer compute slices allocated, over every sequence of up to 6
// claims; the table in docs/dynamic-mig.md.
//
// Thread-safety: pure functions.

#include <vector>

#include "lib/nvml/types.h"

namespace dra::gpu {

// Per memory slice of a GPU (index = slice, `memory_slices` entries): true when no placement of
// size 1 in `placements` (every profile's, as NVML lists them) covers it.
std::vector<bool> OrphanSlices(const std::vector<nvml::Placement>& placements,
                               unsigned int memory_slices);

// For two placements of one profile: true when `a` is announced before `b` (`orphan` as made by
// OrphanSlices; slices beyond it count as not orphaned).
bool PlacementPreferred(const nvml::Placement& a, const nvml::Placement& b,
                        const std::vector<bool>& orphan);

// One profile's placements in announcement order. Duplicates are kept.
std::vector<nvml::Placement> PreferredPlacementOrder(std::vector<nvml::Placement> placements,
                                                     const std::vector<bool>& orphan);

}  // namespace dra::gpu
