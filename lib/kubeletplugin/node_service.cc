#include "lib/kubeletplugin/node_service.h"

#include <exception>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/common/trace.h"

namespace dra::kubeletplugin {
namespace {

// Verbosity of the per-call request/response lines (the Go helper logs gRPC calls at 6; these
// are fewer and more useful, so they come earlier).
constexpr int kCallVerbosity = 4;

std::string ClaimList(const std::vector<ClaimRef>& claims) {
  return absl::StrJoin(claims, ",", [](std::string* out, const ClaimRef& c) {
    absl::StrAppend(out, c.String(), ":", c.uid);
  });
}

// Runs `fn` (driver or claim-getter code), turning an escaping exception into an Internal error:
// the gRPC thread must not unwind, and the kubelet will retry the call.
template <typename Fn>
auto NoThrow(uint64_t request_id, const char* what, Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    DRA_ERROR("exception escaped", "request_id", request_id, "call", what, "exception", e.what());
    return absl::InternalError(absl::StrCat(what, ": unexpected exception: ", e.what()));
  } catch (...) {
    DRA_ERROR("exception escaped", "request_id", request_id, "call", what);
    return absl::InternalError(absl::StrCat(what, ": unexpected non-standard exception"));
  }
}

}  // namespace

absl::StatusOr<Serializer::Guard> NodeService::Lock(const CallInfo& call) {
  const absl::Time deadline = std::min(call.deadline, absl::Now() + lock_timeout_);
  return serializer_->Acquire(deadline);
}

absl::StatusOr<std::map<std::string, PrepareResult>> NodeService::Prepare(
    const std::vector<ClaimRef>& claims, absl::Time deadline) {
  const CallInfo call{next_request_id_.fetch_add(1), deadline};
  DRA_VLOG(kCallVerbosity, "NodePrepareResources", "request_id", call.request_id, "claims",
           ClaimList(claims));
  std::map<std::string, PrepareResult> response;
  if (claims.empty()) return response;
  CallTrace trace("prepare trace", trace_ || log::VEnabled(kTraceVerbosity));
  trace.Note("request_id", static_cast<int64_t>(call.request_id));
  trace.Note("claims", static_cast<int64_t>(claims.size()));

  // Reading the claims needs no lock: it is the slow part and touches no local state.
  absl::StatusOr<std::vector<k8s::ResourceClaim>> objects =
      NoThrow(call.request_id, "retrieve claims", [&] {
        TraceStage stage("claimFetch");
        return FetchClaimsForPrepare(claim_getter_, claims, claim_lookup_);
      });
  if (!objects.ok()) {
    DRA_ERROR("NodePrepareResources failed", "request_id", call.request_id, "err",
              objects.status());
    return objects.status();
  }

  std::optional<Serializer::Guard> guard;
  if (serializer_ != nullptr) {
    TraceStage stage("serializeWait");
    absl::StatusOr<Serializer::Guard> locked = Lock(call);
    if (!locked.ok()) {
      DRA_ERROR("NodePrepareResources failed", "request_id", call.request_id, "err",
                locked.status());
      return Annotate(locked.status(), "prepare resource claims");
    }
    guard.emplace(*std::move(locked));
  }
  absl::StatusOr<std::map<std::string, PrepareResult>> results =
      NoThrow(call.request_id, "prepare resource claims",
              [&] { return driver_->PrepareResourceClaims(call, *objects); });
  guard.reset();
  if (!results.ok()) {
    DRA_ERROR("NodePrepareResources failed", "request_id", call.request_id, "err",
              results.status());
    return Annotate(results.status(), "prepare resource claims");
  }

  TraceStage stage("response");
  for (const ClaimRef& ref : claims) {
    auto it = results->find(ref.uid);
    PrepareResult& out = response[ref.uid];
    if (it == results->end()) {
      out.status = absl::InternalError("driver returned no result for this claim");
    } else {
      out = std::move(it->second);
      for (PreparedDevice& device : out.devices) {
        for (std::string& name : device.request_names) name = BaseRequestName(name);
      }
    }
    if (out.status.ok()) {
      DRA_VLOG(kCallVerbosity, "prepared claim", "request_id", call.request_id, "claim",
               ref.String(), "uid", ref.uid, "devices", out.devices.size());
    } else {
      DRA_ERROR("prepare claim failed", "request_id", call.request_id, "claim", ref.String(), "uid",
                ref.uid, "err", out.status);
      out.devices.clear();  // the kubelet ignores them anyway
    }
  }
  return response;
}

absl::StatusOr<std::map<std::string, absl::Status>> NodeService::Unprepare(
    const std::vector<ClaimRef>& claims, absl::Time deadline) {
  const CallInfo call{next_request_id_.fetch_add(1), deadline};
  DRA_VLOG(kCallVerbosity, "NodeUnprepareResources", "request_id", call.request_id, "claims",
           ClaimList(claims));
  std::map<std::string, absl::Status> response;
  if (claims.empty()) return response;
  CallTrace trace("unprepare trace", trace_ || log::VEnabled(kTraceVerbosity));
  trace.Note("request_id", static_cast<int64_t>(call.request_id));
  trace.Note("claims", static_cast<int64_t>(claims.size()));

  // No API read: the claim may already be gone, and the driver has what it needs recorded.
  std::optional<Serializer::Guard> guard;
  if (serializer_ != nullptr) {
    absl::StatusOr<Serializer::Guard> locked = Lock(call);
    if (!locked.ok()) {
      DRA_ERROR("NodeUnprepareResources failed", "request_id", call.request_id, "err",
                locked.status());
      return Annotate(locked.status(), "unprepare resource claims");
    }
    guard.emplace(*std::move(locked));
  }
  absl::StatusOr<std::map<std::string, absl::Status>> results =
      NoThrow(call.request_id, "unprepare resource claims",
              [&] { return driver_->UnprepareResourceClaims(call, claims); });
  guard.reset();
  if (!results.ok()) {
    DRA_ERROR("NodeUnprepareResources failed", "request_id", call.request_id, "err",
              results.status());
    return Annotate(results.status(), "unprepare resource claims");
  }

  for (const ClaimRef& ref : claims) {
    auto it = results->find(ref.uid);
    absl::Status& out = response[ref.uid];
    out = it == results->end() ? absl::InternalError("driver returned no result for this claim")
                               : std::move(it->second);
    if (out.ok()) {
      if (claim_lookup_ != nullptr) claim_lookup_->Unprepared(ref);
      DRA_VLOG(kCallVerbosity, "unprepared claim", "request_id", call.request_id, "claim",
               ref.String(), "uid", ref.uid);
    } else {
      DRA_ERROR("unprepare claim failed", "request_id", call.request_id, "claim", ref.String(),
                "uid", ref.uid, "err", out);
    }
  }
  return response;
}

}  // namespace dra::kubeletplugin
