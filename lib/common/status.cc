#include "lib/common/status.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace dra {

absl::Status Annotate(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  absl::Status out(status.code(), absl::StrCat(context, ": ", status.message()));
  status.ForEachPayload(
      [&out](std::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

absl::Status ErrnoToStatus(int errno_value, std::string_view context) {
  return absl::ErrnoToStatus(errno_value, context);
}

}  // namespace dra
