#include "lib/cdplugin/errors.h"

#include "lib/api/errors.h"

namespace dra::cdplugin {

absl::Status PermanentError(absl::string_view message) {
  return api::MarkPermanentConfigError(absl::FailedPreconditionError(message));
}

absl::Status MakePermanent(absl::Status status) {
  return api::MarkPermanentConfigError(std::move(status));
}

bool IsPermanent(const absl::Status& status) { return api::IsPermanentConfigError(status); }

absl::Status RetryableError(absl::string_view message) { return absl::UnavailableError(message); }

}  // namespace dra::cdplugin
