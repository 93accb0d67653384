#include "lib/cdplugin/driver.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/cdplugin/errors.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::cdplugin {
namespace {

constexpr const char* kDeviceTypes[] = {"channel", "daemon", "unknown"};

// In-flight gauge while alive; total and duration for successes.
class RequestScope {
 public:
  RequestScope(kubeletplugin::DriverMetrics* m, const char* operation, Clock* clock)
      : m_(m), operation_(operation), clock_(clock), start_(clock->Now()) {
    m_->requests_inflight->WithLabels({m_->driver, operation_})->Inc();
  }
  void Succeeded() { ok_ = true; }
  ~RequestScope() {
    m_->requests_inflight->WithLabels({m_->driver, operation_})->Dec();
    if (!ok_) return;
    m_->requests_total->WithLabels({m_->driver, operation_})->Inc();
    m_->request_duration_seconds->WithLabels({m_->driver, operation_})
        ->Observe(absl::ToDoubleSeconds(clock_->Now() - start_));
  }

 private:
  kubeletplugin::DriverMetrics* m_;
  const char* operation_;
  Clock* clock_;
  absl::Time start_;
  bool ok_ = false;
};

// The public driver's wording of a claim's failure, which users' alerts and runbooks match in the
// pod's events: "error preparing devices for claim <namespace>/<name>:<uid>: <reason>".
absl::Status PrepareError(const k8s::ResourceClaim& claim, const absl::Status& s) {
  return Annotate(
      s, absl::StrCat("error preparing devices for claim ", claim.metadata.namespace_name, "/",
                      claim.metadata.name, ":", claim.metadata.uid));
}
// "error unpreparing devices for claim '<namespace>/<name>:<uid>': <reason>": the public
// compute-domain plugin quotes the claim here (and only here).
absl::Status UnprepareError(const kubeletplugin::ClaimRef& claim, const absl::Status& s) {
  return Annotate(s, absl::StrCat("error unpreparing devices for claim '", claim.String(), ":",
                                  claim.uid, "'"));
}

}  // namespace

CdDriver::CdDriver(DeviceState* state, kubeletplugin::DriverMetrics* metrics,
                   CdDriverOptions options)
    : state_(state),
      metrics_(metrics),
      options_(options),
      clock_(options.clock != nullptr ? options.clock : RealClock::Get()) {
  for (const char* t : kDeviceTypes) {
    metrics_->prepared_devices->WithLabels({metrics_->node, metrics_->driver, t});
  }
  // The error types a failure is counted under (PrepareResourceClaims, UnprepareResourceClaims),
  // created at zero.
  metrics_->prepare_errors_total->WithLabels({metrics_->driver, "prepare_devices"});
  metrics_->unprepare_errors_total->WithLabels({metrics_->driver, "unprepare_devices"});
}

void CdDriver::RefreshPreparedDevicesGauge() {
  absl::StatusOr<std::map<std::string, int>> counts = state_->PreparedDeviceCounts();
  if (!counts.ok()) return;
  for (const char* t : kDeviceTypes) {
    metrics_->prepared_devices->WithLabels({metrics_->node, metrics_->driver, t})
        ->Set((*counts)[t]);
  }
}

absl::Time CdDriver::EndOf(const kubeletplugin::CallInfo& call) const {
  const absl::Time now = clock_->Now();
  if (call.deadline == absl::InfiniteFuture()) return now + options_.window_without_deadline;
  return call.deadline - options_.deadline_margin;
}

std::vector<absl::Status> CdDriver::RetryAll(size_t n, absl::Time end,
                                             const std::function<absl::Status(size_t)>& attempt) {
  std::vector<absl::Status> last(n, absl::UnavailableError("not attempted"));
  std::vector<Backoff> backoffs(n, Backoff(options_.backoff));
  std::vector<absl::Time> next(n, absl::InfinitePast());
  std::vector<bool> done(n, false);
  for (;;) {
    absl::Time earliest = absl::InfiniteFuture();
    for (size_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      if (clock_->Now() >= next[i]) {
        last[i] = attempt(i);
        if (last[i].ok() || IsPermanent(last[i])) {
          done[i] = true;
          continue;
        }
        next[i] = clock_->Now() + backoffs[i].Next();
      }
      earliest = std::min(earliest, next[i]);
    }
    if (earliest == absl::InfiniteFuture()) return last;  // all done
    if (earliest >= end || shutting_down_) break;
    clock_->SleepFor(std::min(earliest - clock_->Now(), absl::Milliseconds(100)));
  }
  for (size_t i = 0; i < n; ++i) {
    if (done[i]) continue;
    // The reason first: it is what the pod's events show.
    last[i] =
        absl::Status(last[i].code(), absl::StrCat(last[i].message(), " (still so after ",
                                                  backoffs[i].attempts() + 1,
                                                  " attempts in this call; the kubelet retries)"));
  }
  return last;
}

absl::StatusOr<std::map<std::string, kubeletplugin::PrepareResult>> CdDriver::PrepareResourceClaims(
    const kubeletplugin::CallInfo& call, const std::vector<k8s::ResourceClaim>& claims) {
  std::vector<kubeletplugin::PrepareResult> results(claims.size());
  std::vector<std::unique_ptr<RequestScope>> scopes;
  for (size_t i = 0; i < claims.size(); ++i) {
    scopes.push_back(std::make_unique<RequestScope>(metrics_, "prepare", clock_));
  }
  std::vector<absl::Status> statuses = RetryAll(claims.size(), EndOf(call), [&](size_t i) {
    absl::StatusOr<std::vector<kubeletplugin::PreparedDevice>> devices = state_->Prepare(claims[i]);
    if (!devices.ok()) {
      DRA_VLOG(1, "prepare attempt failed", "request_id", call.request_id, "claim",
               claims[i].metadata.uid, "err", devices.status());
      return devices.status();
    }
    results[i].devices = *std::move(devices);
    return absl::OkStatus();
  });
  std::map<std::string, kubeletplugin::PrepareResult> out;
  for (size_t i = 0; i < claims.size(); ++i) {
    absl::Status s = statuses[i];
    if (!s.ok()) {
      metrics_->prepare_errors_total->WithLabels({metrics_->driver, "prepare_devices"})->Inc();
      if (IsPermanent(s)) s = Annotate(s, "permanent error (fix the claim or its ComputeDomain)");
      s = PrepareError(claims[i], s);
      DRA_ERROR("prepare failed", "request_id", call.request_id, "claim", claims[i].metadata.uid,
                "err", s);
      results[i] = {s, {}};
    } else {
      scopes[i]->Succeeded();
    }
    out[claims[i].metadata.uid] = std::move(results[i]);
  }
  scopes.clear();
  RefreshPreparedDevicesGauge();
  return out;
}

absl::StatusOr<std::map<std::string, absl::Status>> CdDriver::UnprepareResourceClaims(
    const kubeletplugin::CallInfo& call, const std::vector<kubeletplugin::ClaimRef>& claims) {
  std::vector<std::unique_ptr<RequestScope>> scopes;
  for (size_t i = 0; i < claims.size(); ++i) {
    scopes.push_back(std::make_unique<RequestScope>(metrics_, "unprepare", clock_));
  }
  std::vector<absl::Status> statuses = RetryAll(
      claims.size(), EndOf(call), [&](size_t i) { return state_->Unprepare(claims[i].uid); });
  std::map<std::string, absl::Status> out;
  for (size_t i = 0; i < claims.size(); ++i) {
    if (statuses[i].ok()) {
      scopes[i]->Succeeded();
    } else {
      metrics_->unprepare_errors_total->WithLabels({metrics_->driver, "unprepare_devices"})->Inc();
      statuses[i] = UnprepareError(claims[i], statuses[i]);
      DRA_ERROR("unprepare failed", "request_id", call.request_id, "claim", claims[i].uid, "err",
                statuses[i]);
    }
    out[claims[i].uid] = statuses[i];
  }
  scopes.clear();
  RefreshPreparedDevicesGauge();
  return out;
}

}  // namespace dra::cdplugin
