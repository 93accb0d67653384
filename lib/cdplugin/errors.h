#pragma once

// Retry classification of prepare errors (docs/compute-domains.md "Retries"):
//   permanent  the same claim can never succeed (bad opaque config, ComputeDomain in another
//              namespace or unknown, a stale prepare of an aborted claim): returned to the
//              kubelet at once;
//   retryable  everything else (daemon not ready yet, the node label held by another domain,
//              channel 0 held by another claim, API errors): retried inside the kubelet call
//              with backoff until its deadline nears, then returned; the kubelet retries later.
// Permanent errors carry the payload of lib/api/errors.h, which Annotate keeps.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dra::cdplugin {

// FailedPrecondition `message`, marked permanent.
absl::Status PermanentError(absl::string_view message);
// `status` marked permanent (OK stays OK).
absl::Status MakePermanent(absl::Status status);
bool IsPermanent(const absl::Status& status);
// Unavailable `message`: a condition that is expected to clear by itself.
absl::Status RetryableError(absl::string_view message);

}  // namespace dra::cdplugin
