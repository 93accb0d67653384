#include "lib/common/status.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace dra {

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  absl::Status out(status.code(), absl::StrCat(context, ": ", status.message()));
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

absl::Status ErrnoToStatus(int errno_value, absl::string_view context) {
  // strerror_r (GNU flavour) is thread-safe; strerror text is capitalized ("No such file or
  // directory"), our messages are lower-case like Go's syscall errors.
  char buf[256];
  std::string text = ::strerror_r(errno_value, buf, sizeof(buf));
  if (!text.empty()) text[0] = absl::ascii_tolower(static_cast<unsigned char>(text[0]));
  return absl::Status(absl::ErrnoToStatusCode(errno_value),
                      context.empty() ? text : absl::StrCat(context, ": ", text));
}

}  // namespace dra
