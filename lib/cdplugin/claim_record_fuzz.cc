#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/cdplugin/fuzz_targets.h"
#include "lib/cdplugin/prepared_claim.h"
#include "lib/checkpoint/format.h"
#include "lib/common/json_access.h"

namespace dra::cdplugin::fuzz {
namespace {

[[noreturn]] void Violation(const char* what, const nlohmann::json& j) {
  std::fprintf(stderr, "fuzz invariant violated: %s: %s\n", what, j.dump().c_str());
  std::abort();
}

}  // namespace

void ClaimRecords(const uint8_t* data, size_t size) {
  absl::StatusOr<nlohmann::json> j =
      json_access::Parse(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!j.ok()) return;
  for (checkpoint::ClaimState state :
       {checkpoint::ClaimState::kPrepareStarted, checkpoint::ClaimState::kPrepareCompleted}) {
    checkpoint::PreparedClaim claim{
        .uid = "uid-1", .namespace_name = "ns", .name = "c", .state = state};
    claim.prepared_devices = *j;
    absl::StatusOr<ClaimRecord> first = DecodeRecord(claim);
    if (!first.ok()) {
      if (first.status().message().find("uid-1") == absl::string_view::npos) {
        Violation("record error does not name the claim", *j);
      }
      continue;
    }
    const nlohmann::json encoded = EncodeRecord(*first);
    absl::StatusOr<ClaimRecord> second =
        DecodeRecord(ToCheckpoint(*first, "uid-1", "ns", "c", nlohmann::json()));
    if (!second.ok()) Violation("record does not decode from its own checkpoint entry", encoded);
    if (EncodeRecord(*second) != encoded) Violation("record changes in a round trip", encoded);
  }
}

}  // namespace dra::cdplugin::fuzz
