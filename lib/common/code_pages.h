#pragma once

// Giving back the resident pages of code that ran once.
//
// A daemon's resident set is mostly code: the kernel maps the executable's and the shared
// libraries' text and read-only data on first touch, and with each fault it maps the neighbouring
// page-cache pages too (fault-around, 64 KiB), so start-up, which runs flag parsing, discovery,
// the first API lists and TLS set-up once, leaves nearly the whole binary mapped although the
// steady state runs a small part of it. ReleaseCleanCodePages drops this process's mappings of
// those pages (madvise MADV_DONTNEED); the pages stay in the page cache, and what runs again is
// mapped again by an ordinary minor fault (a few microseconds for 64 KiB). Nothing is lost:
//
//   * only loadable segments that are never written are touched: PT_LOAD segments without PF_W
//     of every loaded object, minus its PT_GNU_RELRO range, and no object with text relocations
//     (DT_TEXTREL), whose code pages hold private, relocated copies; the vDSO is left alone;
//   * the objects are walked with dl_iterate_phdr, which holds the dynamic loader's lock, so no
//     object can be unloaded (and its addresses reused) while its ranges are released;
//   * such pages are clean copies of the file: the kernel itself drops them under memory
//     pressure in the same way.
//
// A debugger's software breakpoints are private copies of code pages and would be dropped with
// them (not re-inserted), so nothing is released while the process is traced (TracerPid in
// /proc/self/status is not 0: gdb run or attach, strace); a debugger attached later sees the
// releases of later calls only.
//
// What it does not change: the page cache (shared, reclaimable, charged to whichever cgroup read
// the file first) and the private memory (heap, stacks). It lowers RSS and PSS, the numbers the
// kubelet's and most tools' memory views show, and the VmHWM from the next peak on.

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dra {

struct ReleasedCode {
  int objects = 0;      // loaded objects whose pages were released (executable, libraries)
  int ranges = 0;       // madvise calls
  int64_t bytes = 0;    // bytes of address space released (resident or not)
  bool traced = false;  // a tracer was attached: nothing was released
};

// Releases the resident pages of this process's never-written file-backed segments (see above).
// Safe to call from any thread at any time; costs about a millisecond for a few hundred ranges.
// An error names the range madvise refused; ranges before it stay released.
absl::StatusOr<ReleasedCode> ReleaseCleanCodePages();

namespace internal {
// The TracerPid of a /proc/<pid>/status text; 0 when the line is absent or unreadable.
int TracerPid(absl::string_view proc_status);
}  // namespace internal

}  // namespace dra
