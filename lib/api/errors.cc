#include "lib/api/errors.h"

#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace dra::api {

absl::Status ConfigError(absl::string_view path, absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(
      path.empty() ? std::string(message) : absl::StrCat(path, ": ", message));
  return MarkPermanentConfigError(std::move(status));
}

absl::Status MarkPermanentConfigError(absl::Status status) {
  if (!status.ok()) status.SetPayload(kPermanentConfigErrorPayload, absl::Cord());
  return status;
}

bool IsPermanentConfigError(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kPermanentConfigErrorPayload).has_value();
}

}  // namespace dra::api
