#include "lib/k8s/leader_election.h"

#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/common/log.h"
#include "lib/k8s/errors.h"

namespace dra::k8s {
namespace {

constexpr double kJitterFactor = 1.2;  // client-go's JitterFactor for the acquire loop

// metav1.MicroTime: "2006-01-02T15:04:05.000000Z".
std::string MicroTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

bool SameRecord(const LeaseSpec& a, const LeaseSpec& b) {
  return a.holder_identity == b.holder_identity &&
         a.lease_duration_seconds == b.lease_duration_seconds && a.acquire_time == b.acquire_time &&
         a.renew_time == b.renew_time && a.lease_transitions == b.lease_transitions;
}

int32_t Seconds(absl::Duration d) {
  return static_cast<int32_t>(std::ceil(absl::ToDoubleSeconds(d)));
}

class ApiLeaseLock final : public LeaseLock {
 public:
  ApiLeaseLock(Client* client, std::string ns, std::string name)
      : client_(client), ns_(std::move(ns)), name_(std::move(name)) {}

  absl::StatusOr<Lease> Get() override {
    absl::StatusOr<nlohmann::json> j = client_->Get(Lease::kResource, ns_, name_);
    if (!j.ok()) return j.status();
    return Lease::FromJson(*j);
  }
  absl::StatusOr<Lease> Create(const Lease& lease) override {
    Lease l = lease;
    l.metadata.name = name_;
    l.metadata.namespace_name = ns_;
    absl::StatusOr<nlohmann::json> j = client_->Create(Lease::kResource, ns_, l.ToJson());
    if (!j.ok()) return j.status();
    return Lease::FromJson(*j);
  }
  absl::StatusOr<Lease> Update(const Lease& lease) override {
    absl::StatusOr<nlohmann::json> j = client_->Update(Lease::kResource, ns_, lease.ToJson());
    if (!j.ok()) return j.status();
    return Lease::FromJson(*j);
  }
  std::string Describe() const override { return absl::StrCat(ns_, "/", name_); }

 private:
  Client* const client_;
  const std::string ns_;
  const std::string name_;
};

}  // namespace

absl::Status ValidateLeaderElectionConfig(const LeaderElectionConfig& c) {
  if (c.lease_name.empty()) return absl::InvalidArgumentError("leader election: empty lease name");
  if (c.lease_namespace.empty()) {
    return absl::InvalidArgumentError("leader election: empty lease namespace");
  }
  if (c.identity.empty()) return absl::InvalidArgumentError("leader election: empty identity");
  if (c.retry_period <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "leader election: retry period ", absl::FormatDuration(c.retry_period), " must be > 0"));
  }
  if (c.renew_deadline <= c.retry_period * kJitterFactor) {
    return absl::InvalidArgumentError(absl::StrCat(
        "leader election: renew deadline ", absl::FormatDuration(c.renew_deadline),
        " must be greater than 1.2 x retry period ", absl::FormatDuration(c.retry_period)));
  }
  if (c.lease_duration <= c.renew_deadline) {
    return absl::InvalidArgumentError(absl::StrCat(
        "leader election: lease duration ", absl::FormatDuration(c.lease_duration),
        " must be greater than renew deadline ", absl::FormatDuration(c.renew_deadline)));
  }
  return absl::OkStatus();
}

std::string NewLeaderIdentity(absl::string_view pod_name) {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  uint64_t hi = gen(), lo = gen();
  hi = (hi & ~uint64_t{0xf000}) | 0x4000;                      // version 4
  lo = (lo & ~(uint64_t{0xc} << 60)) | (uint64_t{0x8} << 60);  // RFC 4122 variant
  return absl::StrFormat("%s-%08x-%04x-%04x-%04x-%012x", pod_name, hi >> 32, (hi >> 16) & 0xffff,
                         hi & 0xffff, lo >> 48, lo & 0xffffffffffffULL);
}

std::unique_ptr<LeaseLock> NewApiLeaseLock(Client* client, std::string ns, std::string name) {
  return std::make_unique<ApiLeaseLock>(client, std::move(ns), std::move(name));
}

absl::StatusOr<std::unique_ptr<LeaderElector>> LeaderElector::Create(LeaderElectionConfig config,
                                                                     LeaseLock* lock,
                                                                     Callbacks callbacks,
                                                                     Clock* clock) {
  if (absl::Status s = ValidateLeaderElectionConfig(config); !s.ok()) return s;
  return std::unique_ptr<LeaderElector>(
      new LeaderElector(std::move(config), lock, std::move(callbacks), clock));
}

LeaderElector::LeaderElector(LeaderElectionConfig config, LeaseLock* lock, Callbacks callbacks,
                             Clock* clock)
    : config_(std::move(config)), lock_(lock), callbacks_(std::move(callbacks)), clock_(clock) {}

void LeaderElector::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

bool LeaderElector::IsLeader() const {
  absl::MutexLock lock(&mu_);
  return leader_;
}

std::string LeaderElector::ObservedHolder() const {
  absl::MutexLock lock(&mu_);
  return observed_ ? observed_->holder_identity.value_or("") : "";
}

bool LeaderElector::WaitOrStopped(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  return clock_->AwaitWithTimeout(&mu_, absl::Condition(&stopped_), d);
}

void LeaderElector::Observe(const Lease& lease) {
  std::string new_leader;
  {
    absl::MutexLock lock(&mu_);
    if (!observed_ || !SameRecord(*observed_, lease.spec)) {
      observed_ = lease.spec;
      observed_time_ = clock_->Now();
    }
    const std::string holder = lease.spec.holder_identity.value_or("");
    if (holder != reported_leader_) {
      reported_leader_ = holder;
      if (!holder.empty() && holder != config_.identity) new_leader = holder;
    }
  }
  if (!new_leader.empty()) {
    DRA_INFO("new leader elected", "lease", lock_->Describe(), "leader", new_leader);
    if (callbacks_.on_new_leader) callbacks_.on_new_leader(new_leader);
  }
}

bool LeaderElector::TryAcquireOrRenew() {
  const absl::Time now = clock_->Now();
  LeaseSpec desired;
  desired.holder_identity = config_.identity;
  desired.lease_duration_seconds = Seconds(config_.lease_duration);
  desired.acquire_time = MicroTime(now);
  desired.renew_time = MicroTime(now);
  desired.lease_transitions = 0;

  absl::StatusOr<Lease> current = lock_->Get();
  if (absl::IsNotFound(current.status())) {
    Lease fresh;
    fresh.spec = desired;
    absl::StatusOr<Lease> created = lock_->Create(fresh);
    if (!created.ok()) {
      DRA_VLOG(2, "lease create failed", "lease", lock_->Describe(), "err", created.status());
      return false;
    }
    Observe(*created);
    return true;
  }
  if (!current.ok()) {
    DRA_WARNING("lease read failed", "lease", lock_->Describe(), "err", current.status());
    return false;
  }
  Observe(*current);
  const std::string holder = current->spec.holder_identity.value_or("");
  const bool mine = holder == config_.identity;
  {
    absl::MutexLock lock(&mu_);
    if (!holder.empty() && !mine && observed_time_ + config_.lease_duration > now) {
      return false;  // held by another and not expired on our clock
    }
  }
  Lease next = *current;
  if (mine) {
    desired.acquire_time = current->spec.acquire_time;
    desired.lease_transitions = current->spec.lease_transitions.value_or(0);
  } else {
    desired.lease_transitions = current->spec.lease_transitions.value_or(0) + 1;
  }
  desired.unknown_fields = current->spec.unknown_fields;
  next.spec = desired;
  absl::StatusOr<Lease> updated = lock_->Update(next);
  if (!updated.ok()) {
    DRA_VLOG(2, "lease update failed", "lease", lock_->Describe(), "err", updated.status());
    return false;
  }
  Observe(*updated);
  return true;
}

bool LeaderElector::Release() {
  absl::StatusOr<Lease> current = lock_->Get();
  if (absl::IsNotFound(current.status())) return true;
  if (!current.ok()) {
    DRA_WARNING("lease release: read failed", "lease", lock_->Describe(), "err", current.status());
    return false;
  }
  if (current->spec.holder_identity.value_or("") != config_.identity) return true;
  const std::string now = MicroTime(clock_->Now());
  Lease next = *current;
  next.spec.holder_identity = "";
  next.spec.lease_duration_seconds = 1;
  next.spec.acquire_time = now;
  next.spec.renew_time = now;
  absl::StatusOr<Lease> updated = lock_->Update(next);
  if (!updated.ok()) {
    DRA_WARNING("lease release failed", "lease", lock_->Describe(), "err", updated.status());
    return false;
  }
  Observe(*updated);
  DRA_INFO("released leader lease", "lease", lock_->Describe(), "identity", config_.identity);
  return true;
}

absl::Status LeaderElector::Run() {
  DRA_INFO("attempting to acquire leader lease", "lease", lock_->Describe(), "identity",
           config_.identity);
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> jitter(1.0, kJitterFactor);
  while (!TryAcquireOrRenew()) {
    if (WaitOrStopped(config_.retry_period * jitter(rng))) return absl::OkStatus();
  }
  {
    absl::MutexLock lock(&mu_);
    leader_ = true;
  }
  DRA_INFO("successfully acquired lease", "lease", lock_->Describe(), "identity", config_.identity);
  if (callbacks_.on_started_leading) callbacks_.on_started_leading();

  absl::Time last_renew = clock_->Now();
  bool lost = false;
  while (!WaitOrStopped(config_.retry_period)) {
    if (TryAcquireOrRenew()) {
      last_renew = clock_->Now();
      continue;
    }
    const std::string holder = ObservedHolder();
    if (!holder.empty() && holder != config_.identity) {
      DRA_ERROR("leader lease taken by another candidate", "lease", lock_->Describe(), "holder",
                holder);
      lost = true;
      break;
    }
    if (clock_->Now() - last_renew >= config_.renew_deadline) {
      DRA_ERROR("failed to renew leader lease within the renew deadline", "lease",
                lock_->Describe(), "renewDeadline", config_.renew_deadline);
      lost = true;
      break;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    leader_ = false;
  }
  // The work stops before the lease is given up, so that two leaders never work at once.
  if (callbacks_.on_stopped_leading) callbacks_.on_stopped_leading();
  if (!lost && config_.release_on_cancel) Release();
  if (lost) {
    return absl::AbortedError(absl::StrCat("leader election lost on lease ", lock_->Describe()));
  }
  return absl::OkStatus();
}

}  // namespace dra::k8s
