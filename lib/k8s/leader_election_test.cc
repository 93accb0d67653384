#include "lib/k8s/leader_election.h"

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/k8s/errors.h"

namespace dra::k8s {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// A lease record with the API server's optimistic concurrency: every write bumps the
// resourceVersion and an Update with a stale one is a Conflict.
class MemoryLeaseLock final : public LeaseLock {
 public:
  absl::StatusOr<Lease> Get() override {
    absl::MutexLock l(&mu_);
    ++gets_;
    if (fail_) return absl::UnavailableError("api server down");
    if (!lease_) return absl::NotFoundError("leases \"lock\" not found");
    return *lease_;
  }
  absl::StatusOr<Lease> Create(const Lease& lease) override {
    absl::MutexLock l(&mu_);
    if (fail_) return absl::UnavailableError("api server down");
    if (lease_) return absl::AlreadyExistsError("exists");
    lease_ = lease;
    lease_->metadata.resource_version = absl::StrCat(++rv_);
    return *lease_;
  }
  absl::StatusOr<Lease> Update(const Lease& lease) override {
    absl::MutexLock l(&mu_);
    if (fail_) return absl::UnavailableError("api server down");
    if (!lease_) return absl::NotFoundError("gone");
    if (lease.metadata.resource_version != lease_->metadata.resource_version) {
      return StatusFromHttp(409, R"({"kind":"Status","reason":"Conflict","message":"stale"})", "",
                            "update lease");
    }
    lease_ = lease;
    lease_->metadata.resource_version = absl::StrCat(++rv_);
    return *lease_;
  }
  std::string Describe() const override { return "ns/lock"; }

  void SetFailing(bool f) {
    absl::MutexLock l(&mu_);
    fail_ = f;
  }
  int gets() {
    absl::MutexLock l(&mu_);
    return gets_;
  }
  std::optional<Lease> Peek() {
    absl::MutexLock l(&mu_);
    return lease_;
  }
  void Steal(const std::string& holder) {
    absl::MutexLock l(&mu_);
    lease_->spec.holder_identity = holder;
    lease_->spec.renew_time = "2030-01-01T00:00:00.000000Z";
    lease_->metadata.resource_version = absl::StrCat(++rv_);
  }

 private:
  absl::Mutex mu_;
  std::optional<Lease> lease_;
  int rv_ = 0;
  int gets_ = 0;
  bool fail_ = false;
};

// Moves the clock by `d` and waits until the elector's loop made its next attempt and sleeps again.
void Step(FakeClock& clock, MemoryLeaseLock& lock, absl::Duration d) {
  const int before = lock.gets();
  clock.Advance(d);
  while (lock.gets() == before) absl::SleepFor(absl::Milliseconds(1));
  clock.BlockUntilWaiters(1);
}

LeaderElectionConfig Config(const std::string& id) {
  return {.lease_namespace = "ns",
          .lease_name = "lock",
          .identity = id,
          .lease_duration = absl::Seconds(15),
          .renew_deadline = absl::Seconds(10),
          .retry_period = absl::Seconds(2)};
}

std::unique_ptr<LeaderElector> Make(const std::string& id, LeaseLock* lock, Clock* clock,
                                    LeaderElector::Callbacks cb = {}) {
  auto e = LeaderElector::Create(Config(id), lock, std::move(cb), clock);
  EXPECT_TRUE(e.ok()) << e.status();
  return *std::move(e);
}

TEST(LeaderElectionConfigTest, RejectsInconsistentTimings) {
  LeaderElectionConfig c = Config("a");
  EXPECT_TRUE(ValidateLeaderElectionConfig(c).ok());
  c.renew_deadline = absl::Seconds(15);
  EXPECT_THAT(ValidateLeaderElectionConfig(c).message(),
              HasSubstr("lease duration 15s must be greater than renew deadline 15s"));
  c = Config("a");
  c.renew_deadline = absl::Milliseconds(2400);
  EXPECT_THAT(ValidateLeaderElectionConfig(c).message(),
              HasSubstr("must be greater than 1.2 x retry period 2s"));
  c = Config("");
  EXPECT_THAT(ValidateLeaderElectionConfig(c).message(), HasSubstr("empty identity"));
}

TEST(LeaderElectionTest, IdentityIsPodNameAndAUuid) {
  const std::string a = NewLeaderIdentity("ctrl-0");
  EXPECT_THAT(a, MatchesRegex("ctrl-0-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                              "[0-9a-f]{12}"));
  EXPECT_NE(a, NewLeaderIdentity("ctrl-0"));
}

TEST(LeaderElectionTest, FirstCandidateCreatesTheLeaseAndRenewsKeepingAcquireTime) {
  FakeClock clock;
  MemoryLeaseLock lock;
  auto a = Make("a", &lock, &clock);
  ASSERT_TRUE(a->TryAcquireOrRenew());
  Lease l = *lock.Peek();
  EXPECT_EQ(l.spec.holder_identity, "a");
  EXPECT_EQ(l.spec.lease_duration_seconds, 15);
  EXPECT_EQ(l.spec.lease_transitions, 0);
  EXPECT_EQ(l.spec.acquire_time, "2023-11-14T22:13:20.000000Z");
  clock.Advance(absl::Seconds(2));
  ASSERT_TRUE(a->TryAcquireOrRenew());
  l = *lock.Peek();
  EXPECT_EQ(l.spec.acquire_time, "2023-11-14T22:13:20.000000Z");
  EXPECT_EQ(l.spec.renew_time, "2023-11-14T22:13:22.000000Z");
  EXPECT_EQ(l.spec.lease_transitions, 0);
}

TEST(LeaderElectionTest, StandbyWaitsOutTheLeaseOnItsOwnClockThenTakesOver) {
  FakeClock clock;
  MemoryLeaseLock lock;
  auto a = Make("a", &lock, &clock);
  auto b = Make("b", &lock, &clock);
  ASSERT_TRUE(a->TryAcquireOrRenew());
  EXPECT_FALSE(b->TryAcquireOrRenew());  // b first sees the record now
  EXPECT_EQ(b->ObservedHolder(), "a");
  clock.Advance(absl::Seconds(14));
  EXPECT_FALSE(b->TryAcquireOrRenew());
  clock.Advance(absl::Seconds(1));  // 15 s without a change of the record
  ASSERT_TRUE(b->TryAcquireOrRenew());
  Lease l = *lock.Peek();
  EXPECT_EQ(l.spec.holder_identity, "b");
  EXPECT_EQ(l.spec.lease_transitions, 1);
  EXPECT_EQ(l.spec.acquire_time, l.spec.renew_time);
  // The old leader's renewal now fails: the record names b and is fresh to a.
  EXPECT_FALSE(a->TryAcquireOrRenew());
}

TEST(LeaderElectionTest, RenewalsOfTheLeaderKeepTheStandbyOut) {
  FakeClock clock;
  MemoryLeaseLock lock;
  auto a = Make("a", &lock, &clock);
  auto b = Make("b", &lock, &clock);
  ASSERT_TRUE(a->TryAcquireOrRenew());
  for (int i = 0; i < 20; ++i) {
    EXPECT_FALSE(b->TryAcquireOrRenew());
    clock.Advance(absl::Seconds(2));
    ASSERT_TRUE(a->TryAcquireOrRenew());
  }
}

TEST(LeaderElectionTest, ConcurrentCandidatesNeverBothWin) {
  FakeClock clock;
  MemoryLeaseLock lock;
  auto a = Make("a", &lock, &clock);
  auto b = Make("b", &lock, &clock);
  ASSERT_TRUE(a->TryAcquireOrRenew());
  ASSERT_TRUE(a->Release());
  std::atomic<int> wins{0};
  std::thread ta([&] { wins += a->TryAcquireOrRenew() ? 1 : 0; });
  std::thread tb([&] { wins += b->TryAcquireOrRenew() ? 1 : 0; });
  ta.join();
  tb.join();
  EXPECT_GE(wins, 1);
  // Whoever lost the race (if both read the same version) got a Conflict; the record has one holder
  // and the loser does not believe it leads.
  const std::string holder = lock.Peek()->spec.holder_identity.value_or("");
  ASSERT_TRUE(holder == "a" || holder == "b");
  EXPECT_EQ(wins, 1);
}

TEST(LeaderElectionTest, ReleaseEmptiesTheHolderSoTheStandbyTakesOverAtOnce) {
  FakeClock clock;
  MemoryLeaseLock lock;
  auto a = Make("a", &lock, &clock);
  auto b = Make("b", &lock, &clock);
  ASSERT_TRUE(a->TryAcquireOrRenew());
  EXPECT_FALSE(b->TryAcquireOrRenew());
  ASSERT_TRUE(a->Release());
  EXPECT_EQ(lock.Peek()->spec.holder_identity, "");
  EXPECT_EQ(lock.Peek()->spec.lease_duration_seconds, 1);
  EXPECT_TRUE(b->TryAcquireOrRenew());  // no waiting for the 15 s
  EXPECT_TRUE(b->Release());
  EXPECT_TRUE(a->Release());  // holds nothing: nothing to do
}

TEST(LeaderElectionTest, RunLeadsUntilStopAndReleases) {
  FakeClock clock;
  MemoryLeaseLock lock;
  std::atomic<int> started{0}, stopped{0};
  auto a =
      Make("a", &lock, &clock,
           {.on_started_leading = [&] { ++started; }, .on_stopped_leading = [&] { ++stopped; }});
  absl::Status result = absl::UnknownError("not run");
  std::thread t([&] { result = a->Run(); });
  clock.BlockUntilWaiters(1);  // leading, waiting for the first renewal
  EXPECT_EQ(started, 1);
  EXPECT_TRUE(a->IsLeader());
  Step(clock, lock, absl::Seconds(2));
  EXPECT_EQ(lock.Peek()->spec.renew_time, "2023-11-14T22:13:22.000000Z");
  a->Stop();
  clock.Advance(absl::Seconds(2));
  t.join();
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(stopped, 1);
  EXPECT_FALSE(a->IsLeader());
  EXPECT_EQ(lock.Peek()->spec.holder_identity, "");
}

TEST(LeaderElectionTest, RunReturnsAbortedWhenAnotherCandidateTakesTheLease) {
  FakeClock clock;
  MemoryLeaseLock lock;
  std::atomic<int> stopped{0};
  std::string new_leader;
  auto a = Make("a", &lock, &clock,
                {.on_stopped_leading = [&] { ++stopped; },
                 .on_new_leader = [&](const std::string& id) { new_leader = id; }});
  absl::Status result;
  std::thread t([&] { result = a->Run(); });
  clock.BlockUntilWaiters(1);
  lock.Steal("intruder");
  clock.Advance(absl::Seconds(2));
  t.join();
  EXPECT_TRUE(absl::IsAborted(result)) << result;
  EXPECT_EQ(stopped, 1);
  EXPECT_EQ(new_leader, "intruder");
  EXPECT_EQ(lock.Peek()->spec.holder_identity, "intruder");  // not released: not ours
}

TEST(LeaderElectionTest, RunGivesUpAfterTheRenewDeadlineWithoutSuccessfulRenewal) {
  FakeClock clock;
  MemoryLeaseLock lock;
  auto a = Make("a", &lock, &clock);
  absl::Status result;
  std::atomic<bool> done{false};
  std::thread t([&] {
    result = a->Run();
    done = true;
  });
  clock.BlockUntilWaiters(1);
  lock.SetFailing(true);
  for (int i = 0; i < 4; ++i) {  // 8 s of failed renewals: still leading
    Step(clock, lock, absl::Seconds(2));
    EXPECT_TRUE(a->IsLeader()) << i;
  }
  clock.Advance(absl::Seconds(2));  // 10 s: the renew deadline
  t.join();
  EXPECT_TRUE(absl::IsAborted(result)) << result;
  EXPECT_THAT(result.message(), HasSubstr("ns/lock"));
}

TEST(LeaderElectionTest, StopBeforeAcquiringReturnsOkWithoutLeading) {
  FakeClock clock;
  MemoryLeaseLock lock;
  auto a = Make("a", &lock, &clock);
  ASSERT_TRUE(a->TryAcquireOrRenew());
  std::atomic<int> started{0};
  auto b = Make("b", &lock, &clock, {.on_started_leading = [&] { ++started; }});
  absl::Status result = absl::UnknownError("not run");
  std::thread t([&] { result = b->Run(); });
  clock.BlockUntilWaiters(1);
  b->Stop();
  clock.Advance(absl::Seconds(3));
  t.join();
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(started, 0);
  EXPECT_EQ(lock.Peek()->spec.holder_identity, "a");
}

}  // namespace
}  // namespace dra::k8s
