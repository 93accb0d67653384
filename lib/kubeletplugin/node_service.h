#pragma once

// The protocol-independent part of the kubelet's DRA node calls: read and check the claims, take
// the serialization, call the driver, and make sure every requested claim gets an answer. The
// gRPC services for each API version (dra_services.h) are thin translations on top.

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/kubeletplugin/claim_source.h"
#include "lib/kubeletplugin/driver.h"
#include "lib/kubeletplugin/serializer.h"

namespace dra::kubeletplugin {

// Thread-safety: Prepare and Unprepare may be called concurrently from any thread.
class NodeService {
 public:
  // `serializer` null: calls reach the driver concurrently. `driver` and `serializer` must
  // outlive this object. `lock_timeout` caps the wait for the serialization (the call's own
  // deadline caps it too).
  // `trace`: log a per-stage trace line of every call (lib/common/trace.h), as at -v=5
  // (kTraceVerbosity) and above. `claim_lookup` (may be null; must outlive this object) is asked
  // before `claim_getter` and told of every successful unprepare.
  NodeService(DraDriver* driver, ClaimGetter claim_getter, Serializer* serializer,
              absl::Duration lock_timeout, bool trace = false, ClaimLookup* claim_lookup = nullptr)
      : driver_(driver),
        claim_getter_(std::move(claim_getter)),
        serializer_(serializer),
        lock_timeout_(lock_timeout),
        trace_(trace),
        claim_lookup_(claim_lookup) {}

  // From this -v level on every call logs its trace line even without `trace`.
  static constexpr int kTraceVerbosity = 5;

  // Returns a result for exactly the UIDs in `claims`, or an error that fails the whole call
  // (claim read/check failures, lock timeout, driver-wide error). Device request names are
  // already reduced to base request names.
  absl::StatusOr<std::map<std::string, PrepareResult>> Prepare(const std::vector<ClaimRef>& claims,
                                                               absl::Time deadline);

  // Returns a status for exactly the UIDs in `claims`, or an error that fails the whole call.
  absl::StatusOr<std::map<std::string, absl::Status>> Unprepare(const std::vector<ClaimRef>& claims,
                                                                absl::Time deadline);

 private:
  absl::StatusOr<Serializer::Guard> Lock(const CallInfo& call);

  DraDriver* const driver_;
  const ClaimGetter claim_getter_;
  Serializer* const serializer_;
  const absl::Duration lock_timeout_;
  const bool trace_;
  ClaimLookup* const claim_lookup_;
  std::atomic<uint64_t> next_request_id_{1};
};

}  // namespace dra::kubeletplugin
