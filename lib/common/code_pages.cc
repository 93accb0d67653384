#include "lib/common/code_pages.h"

#include <elf.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace dra {
namespace {

struct WalkState {
  uintptr_t page = 0;
  uintptr_t vdso = 0;
  ReleasedCode released;
  absl::Status error;
};

// True when the object's dynamic section asks for text relocations: its code pages are private,
// written copies and must not be dropped.
bool HasTextRelocations(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_DYNAMIC) continue;
    // The loader gives load addresses as integers (dl_phdr_info::dlpi_addr): the casts to
    // pointers here and at madvise are the ABI's, not a choice.
    // NOLINTNEXTLINE(performance-no-int-to-ptr)
    const auto* dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + ph.p_vaddr);
    for (; dyn->d_tag != DT_NULL; ++dyn) {
      if (dyn->d_tag == DT_TEXTREL) return true;
      if (dyn->d_tag == DT_FLAGS && (dyn->d_un.d_val & DF_TEXTREL) != 0) return true;
    }
  }
  return false;
}

int ReleaseObject(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto* st = static_cast<WalkState*>(data);
  if (!st->error.ok()) return 1;
  // The vDSO is the kernel's, not a file mapping.
  if (st->vdso != 0 && info->dlpi_phnum > 0 &&
      reinterpret_cast<uintptr_t>(info->dlpi_phdr) >= st->vdso &&
      reinterpret_cast<uintptr_t>(info->dlpi_phdr) < st->vdso + st->page) {
    return 0;
  }
  if (HasTextRelocations(info)) return 0;
  // Pages of the RELRO range are written by the loader before it is made read-only.
  uintptr_t relro_begin = 0, relro_end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_GNU_RELRO) {
      relro_begin = (info->dlpi_addr + ph.p_vaddr) & ~(st->page - 1);
      relro_end = (info->dlpi_addr + ph.p_vaddr + ph.p_memsz + st->page - 1) & ~(st->page - 1);
    }
  }
  bool any = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W) != 0 || ph.p_memsz == 0) continue;
    // Whole pages inside the segment only: a page shared with a neighbouring segment (which
    // may be writable) is kept.
    uintptr_t begin = (info->dlpi_addr + ph.p_vaddr + st->page - 1) & ~(st->page - 1);
    uintptr_t end = (info->dlpi_addr + ph.p_vaddr + ph.p_filesz) & ~(st->page - 1);
    if (relro_end > relro_begin) {
      if (relro_begin <= begin && relro_end >= end) continue;  // inside RELRO
      if (relro_begin < end && relro_end > begin) {            // overlaps one end
        if (relro_begin <= begin)
          begin = relro_end;
        else
          end = relro_begin;
      }
    }
    if (end <= begin) continue;
    // NOLINTNEXTLINE(performance-no-int-to-ptr): an address from dl_phdr_info (see above)
    if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) != 0) {
      const int err = errno;
      st->error = absl::InternalError(
          absl::StrFormat("madvise(MADV_DONTNEED) of %s's segment %#x-%#x: %s",
                          info->dlpi_name[0] != '\0' ? info->dlpi_name : "the executable", begin,
                          end, std::strerror(err)));
      return 1;
    }
    any = true;
    st->released.ranges++;
    st->released.bytes += static_cast<int64_t>(end - begin);
  }
  if (any) st->released.objects++;
  return 0;
}

}  // namespace

namespace internal {

int TracerPid(absl::string_view proc_status) {
  constexpr absl::string_view kKey = "\nTracerPid:";
  const size_t at = proc_status.find(kKey);
  if (at == absl::string_view::npos) return 0;
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(proc_status.substr(at + kKey.size()));
  rest = rest.substr(0, rest.find('\n'));
  int pid = 0;
  return absl::SimpleAtoi(rest, &pid) ? pid : 0;
}

}  // namespace internal

absl::StatusOr<ReleasedCode> ReleaseCleanCodePages() {
  std::ifstream in("/proc/self/status");
  const std::string status((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (internal::TracerPid(status) != 0) return ReleasedCode{.traced = true};
  WalkState st;
  st.page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  st.vdso = static_cast<uintptr_t>(getauxval(AT_SYSINFO_EHDR));
  dl_iterate_phdr(&ReleaseObject, &st);
  if (!st.error.ok()) return st.error;
  return st.released;
}

}  // namespace dra
