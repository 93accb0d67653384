// DeviceStatusQueue (device_status_queue.h) with a fake target writer: calls return at once and
// the target sees them later, in order per claim; the latest state of a waiting claim wins; a
// removal queued while the write runs follows it; failures are retried with backoff unless a
// newer state arrived or the error is permanent; a full queue drops writes and refuses removals;
// Shutdown drains within its deadline; the record of the step holds the entries.

#include "lib/gpuplugin/status/device_status_queue.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::gpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

StatusClaimRef Claim(const std::string& uid) {
  return {.namespace_name = "ns", .name = "claim-" + uid, .uid = uid};
}

std::vector<DeviceStatusEntry> Entries(const std::string& device) {
  return {{.pool = "node1", .device = device, .data = {{"uuid", "GPU-" + device}}}};
}

// Records "write <uid> <device>" / "remove <uid>"; answers from a script of errors (front first,
// then OK); while `hold` is set, each call waits for `release`.
class FakeWriter final : public DeviceStatusWriter {
 public:
  absl::Status Write(const StatusClaimRef& claim,
                     const std::vector<DeviceStatusEntry>& entries) const override {
    return Call("write " + claim.uid + " " + (entries.empty() ? "-" : entries[0].device));
  }
  absl::Status Remove(const StatusClaimRef& claim) const override {
    return Call("remove " + claim.uid);
  }

  std::vector<std::string> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  void Fail(absl::Status s) {
    absl::MutexLock lock(&mu_);
    errors_.push_back(std::move(s));
  }
  void Hold() {
    absl::MutexLock lock(&mu_);
    hold_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    hold_ = false;
  }
  // Waits until `n` calls have started.
  bool WaitCalls(size_t n) const {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return started_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
  }

 private:
  absl::Status Call(std::string what) const {
    absl::MutexLock lock(&mu_);
    ++started_;
    auto released = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !hold_; };
    mu_.Await(absl::Condition(&released));
    calls_.push_back(std::move(what));
    if (errors_.empty()) return absl::OkStatus();
    absl::Status s = errors_.front();
    errors_.pop_front();
    return s;
  }

  mutable absl::Mutex mu_;
  mutable std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  mutable std::deque<absl::Status> errors_ ABSL_GUARDED_BY(mu_);
  mutable size_t started_ ABSL_GUARDED_BY(mu_) = 0;
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
};

// No quiet period: the tests of ordering, coalescing and retries start each state at once.
DeviceStatusQueueOptions FastRetries() {
  return {.quiet = absl::ZeroDuration(),
          .max_delay = absl::ZeroDuration(),
          .retry = {.initial = absl::Milliseconds(1), .max = absl::Milliseconds(5), .jitter = 0},
          .max_attempts = 3};
}

TEST(DeviceStatusQueueTest, CallsReturnAtOnceAndTheTargetFollowsInOrder) {
  FakeWriter target;
  target.Hold();
  DeviceStatusQueue queue(&target, FastRetries());
  queue.Start();
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());  // returns while the target waits
  ASSERT_TRUE(target.WaitCalls(1));
  ASSERT_TRUE(queue.Write(Claim("b"), Entries("gpu-1")).ok());
  EXPECT_EQ(queue.depth(), 2u);
  target.Release();
  ASSERT_TRUE(queue.WaitIdle(absl::Seconds(10)));
  EXPECT_THAT(target.calls(), ElementsAre("write a gpu-0", "write b gpu-1"));
  EXPECT_EQ(queue.depth(), 0u);
}

TEST(DeviceStatusQueueTest, LatestWaitingStateWins) {
  FakeWriter target;
  target.Hold();
  DeviceStatusQueue queue(&target, FastRetries());
  queue.Start();
  ASSERT_TRUE(queue.Write(Claim("busy"), Entries("gpu-7")).ok());
  ASSERT_TRUE(target.WaitCalls(1));  // the worker is held in this call
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-1")).ok());  // replaces gpu-0
  ASSERT_TRUE(queue.Write(Claim("b"), Entries("gpu-2")).ok());
  ASSERT_TRUE(queue.Remove(Claim("b")).ok());  // replaces the write: it never runs
  EXPECT_EQ(queue.depth(), 3u);
  target.Release();
  ASSERT_TRUE(queue.WaitIdle(absl::Seconds(10)));
  EXPECT_THAT(target.calls(), ElementsAre("write busy gpu-7", "write a gpu-1", "remove b"));
}

TEST(DeviceStatusQueueTest, RemovalQueuedDuringTheWriteFollowsIt) {
  FakeWriter target;
  target.Hold();
  DeviceStatusQueue queue(&target, FastRetries());
  queue.Start();
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  ASSERT_TRUE(target.WaitCalls(1));  // the write is in flight
  ASSERT_TRUE(queue.Remove(Claim("a")).ok());
  target.Release();
  ASSERT_TRUE(queue.WaitIdle(absl::Seconds(10)));
  EXPECT_THAT(target.calls(), ElementsAre("write a gpu-0", "remove a"));
}

TEST(DeviceStatusQueueTest, FailedRemovalIsNotOvertakenByTheRetryOfAnOlderWrite) {
  FakeWriter target;
  target.Hold();
  target.Fail(absl::UnavailableError("API server down"));  // the write fails
  DeviceStatusQueue queue(&target, FastRetries());
  queue.Start();
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  ASSERT_TRUE(target.WaitCalls(1));
  ASSERT_TRUE(queue.Remove(Claim("a")).ok());  // newer than the failing write
  target.Release();
  ASSERT_TRUE(queue.WaitIdle(absl::Seconds(10)));
  // The failed write is not retried: the removal is the claim's latest state.
  EXPECT_THAT(target.calls(), ElementsAre("write a gpu-0", "remove a"));
}

TEST(DeviceStatusQueueTest, TransientFailuresAreRetriedWithBackoff) {
  FakeWriter target;
  target.Fail(absl::UnavailableError("API server down"));
  target.Fail(absl::DeadlineExceededError("timeout"));
  DeviceStatusQueue queue(&target, FastRetries());
  queue.Start();
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  ASSERT_TRUE(queue.WaitIdle(absl::Seconds(10)));
  EXPECT_THAT(target.calls(), ElementsAre("write a gpu-0", "write a gpu-0", "write a gpu-0"));
}

TEST(DeviceStatusQueueTest, GivesUpAfterMaxAttemptsAndCountsTheDrop) {
  metrics::Registry registry;
  auto* writes = AddDeviceStatusWritesMetric(&registry);
  FakeWriter target;
  for (int i = 0; i < 3; ++i) target.Fail(absl::UnavailableError("API server down"));
  DeviceStatusQueue queue(&target, FastRetries(), nullptr, writes);
  queue.Start();
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  ASSERT_TRUE(queue.WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(target.calls().size(), 3u);  // max_attempts
  EXPECT_THAT(registry.Render(),
              HasSubstr("nvidia_dra_device_status_writes_total{operation=\"write\",result="
                        "\"dropped\"} 1"));
}

TEST(DeviceStatusQueueTest, PermanentErrorsAreNotRetried) {
  FakeWriter target;
  target.Fail(absl::NotFoundError("claim gone"));
  target.Fail(absl::AbortedError("uid precondition failed"));
  DeviceStatusQueue queue(&target, FastRetries());
  queue.Start();
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  ASSERT_TRUE(queue.WaitIdle(absl::Seconds(10)));
  ASSERT_TRUE(queue.Write(Claim("b"), Entries("gpu-1")).ok());
  ASSERT_TRUE(queue.WaitIdle(absl::Seconds(10)));
  EXPECT_THAT(target.calls(), ElementsAre("write a gpu-0", "write b gpu-1"));
}

TEST(DeviceStatusQueueTest, AClaimWaitingForItsRetryDoesNotHoldUpOthers) {
  FakeWriter target;
  target.Fail(absl::UnavailableError("down"));
  DeviceStatusQueueOptions options = FastRetries();
  options.retry.initial = options.retry.max = absl::Milliseconds(300);
  DeviceStatusQueue queue(&target, options);
  queue.Start();
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  ASSERT_TRUE(target.WaitCalls(1));
  ASSERT_TRUE(queue.Write(Claim("b"), Entries("gpu-1")).ok());
  ASSERT_TRUE(queue.WaitIdle(absl::Seconds(10)));
  EXPECT_THAT(target.calls(), ElementsAre("write a gpu-0", "write b gpu-1", "write a gpu-0"));
}

TEST(DeviceStatusQueueTest, FullQueueDropsWritesAndRefusesRemovals) {
  metrics::Registry registry;
  auto* depth = registry.AddGauge("nvidia_dra_device_status_queue_depth", "depth", {});
  FakeWriter target;
  DeviceStatusQueueOptions options = FastRetries();
  options.max_claims = 2;
  DeviceStatusQueue queue(&target, options, depth);  // not started: everything waits
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  ASSERT_TRUE(queue.Write(Claim("b"), Entries("gpu-1")).ok());
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-2")).ok());  // a waiting claim: coalesced
  absl::Status w = queue.Write(Claim("c"), Entries("gpu-3"));
  EXPECT_TRUE(absl::IsResourceExhausted(w)) << w;
  EXPECT_THAT(w.message(), HasSubstr("dropped"));
  absl::Status r = queue.Remove(Claim("c"));
  EXPECT_TRUE(absl::IsResourceExhausted(r)) << r;
  EXPECT_THAT(r.message(), HasSubstr("refused"));
  EXPECT_THAT(registry.Render(), HasSubstr("nvidia_dra_device_status_queue_depth 2"));
  queue.Start();
  ASSERT_TRUE(queue.WaitIdle(absl::Seconds(10)));
  EXPECT_THAT(target.calls(), ElementsAre("write a gpu-2", "write b gpu-1"));
  EXPECT_THAT(registry.Render(), HasSubstr("nvidia_dra_device_status_queue_depth 0"));
}

TEST(DeviceStatusQueueTest, ShutdownDrainsWhatWaits) {
  FakeWriter target;
  target.Hold();
  DeviceStatusQueue queue(&target, FastRetries());
  queue.Start();
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  ASSERT_TRUE(target.WaitCalls(1));
  ASSERT_TRUE(queue.Remove(Claim("b")).ok());
  ASSERT_TRUE(queue.Write(Claim("c"), Entries("gpu-2")).ok());
  target.Release();
  EXPECT_EQ(queue.Shutdown(absl::Seconds(10)), 0u);
  EXPECT_THAT(target.calls(), ElementsAre("write a gpu-0", "remove b", "write c gpu-2"));
  absl::Status late = queue.Write(Claim("d"), Entries("gpu-3"));
  EXPECT_TRUE(absl::IsFailedPrecondition(late)) << late;
}

TEST(DeviceStatusQueueTest, ShutdownDropsWhatIsLeftAtTheDeadline) {
  FakeWriter target;
  for (int i = 0; i < 100; ++i) target.Fail(absl::UnavailableError("down"));
  DeviceStatusQueueOptions options = FastRetries();
  options.max_attempts = 1000;
  DeviceStatusQueue queue(&target, options);
  queue.Start();
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  ASSERT_TRUE(target.WaitCalls(1));
  const absl::Time start = absl::Now();
  EXPECT_EQ(queue.Shutdown(absl::Milliseconds(50)), 1u);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // returns, not a timing claim on the drain
  EXPECT_EQ(queue.depth(), 0u);
}

TEST(DeviceStatusQueueTest, AFirstTryWaitsUntilTheCallsGoQuiet) {
  FakeWriter target;
  DeviceStatusQueueOptions options = FastRetries();
  options.quiet = absl::Milliseconds(300);
  options.max_delay = absl::Seconds(30);
  DeviceStatusQueue queue(&target, options);
  queue.Start();
  const absl::Time start = absl::Now();
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  // Nothing starts within the quiet period (awaited with a timeout: the absence of a call).
  EXPECT_FALSE(queue.WaitIdle(absl::Milliseconds(150)));
  EXPECT_TRUE(target.calls().empty());
  ASSERT_TRUE(queue.WaitIdle(absl::Seconds(10)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_THAT(target.calls(), ElementsAre("write a gpu-0"));
}

TEST(DeviceStatusQueueTest, AClaimPreparedAndUnpreparedWhileBusyIsWrittenOnceAsTheRemoval) {
  FakeWriter target;
  DeviceStatusQueueOptions options = FastRetries();
  options.quiet = absl::Milliseconds(200);
  options.max_delay = absl::Seconds(30);
  DeviceStatusQueue queue(&target, options);
  queue.Start();
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  ASSERT_TRUE(queue.Write(Claim("b"), Entries("gpu-1")).ok());
  ASSERT_TRUE(queue.Remove(Claim("a")).ok());
  ASSERT_TRUE(queue.WaitIdle(absl::Seconds(10)));
  // "a" keeps its place in line ahead of "b".
  EXPECT_THAT(target.calls(), ElementsAre("remove a", "write b gpu-1"));
}

TEST(DeviceStatusQueueTest, ASteadyStreamOfCallsDelaysAWriteAtMostMaxDelay) {
  FakeWriter target;
  DeviceStatusQueueOptions options = FastRetries();
  options.quiet = absl::Seconds(30);  // never quiet: only max_delay lets the writes start
  options.max_delay = absl::Milliseconds(200);
  DeviceStatusQueue queue(&target, options);
  queue.Start();
  const absl::Time start = absl::Now();
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-1")).ok());  // keeps a's arrival
  ASSERT_TRUE(target.WaitCalls(1));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  ASSERT_TRUE(queue.WaitIdle(absl::Seconds(10)));
  EXPECT_THAT(target.calls(), ElementsAre("write a gpu-1"));
}

TEST(DeviceStatusQueueTest, ShutdownWritesWhatWaitsWithoutTheQuietPeriod) {
  FakeWriter target;
  DeviceStatusQueueOptions options = FastRetries();
  options.quiet = absl::Seconds(60);
  options.max_delay = absl::Seconds(60);
  DeviceStatusQueue queue(&target, options);
  queue.Start();
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  ASSERT_TRUE(queue.Write(Claim("b"), Entries("gpu-1")).ok());
  const absl::Time start = absl::Now();
  EXPECT_EQ(queue.Shutdown(absl::Seconds(30)), 0u);
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_THAT(target.calls(), ElementsAre("write a gpu-0", "write b gpu-1"));
}

TEST(DeviceStatusQueueTest, ARemovalStartsAtOnceWhileWritesWaitForQuiet) {
  FakeWriter target;
  DeviceStatusQueueOptions options = FastRetries();
  options.quiet = absl::Seconds(60);
  options.max_delay = absl::Seconds(60);
  DeviceStatusQueue queue(&target, options);
  queue.Start();
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  ASSERT_TRUE(queue.Remove(Claim("b")).ok());
  ASSERT_TRUE(target.WaitCalls(1));
  EXPECT_THAT(target.calls(), ElementsAre("remove b"));
  EXPECT_FALSE(queue.WaitIdle(absl::Milliseconds(100)));  // the write of "a" still waits
  EXPECT_THAT(target.calls(), ElementsAre("remove b"));
}

// Records the nice value of the thread that calls it.
class NiceRecorder final : public DeviceStatusWriter {
 public:
  absl::Status Write(const StatusClaimRef&, const std::vector<DeviceStatusEntry>&) const override {
    absl::MutexLock lock(&mu_);
    nice_ = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
    return absl::OkStatus();
  }
  absl::Status Remove(const StatusClaimRef&) const override { return absl::OkStatus(); }
  int nice() const {
    absl::MutexLock lock(&mu_);
    return nice_;
  }

 private:
  mutable absl::Mutex mu_;
  mutable int nice_ ABSL_GUARDED_BY(mu_) = -100;
};

TEST(DeviceStatusQueueTest, TheWorkerRunsAtALowerPriorityThanTheCalls) {
  NiceRecorder target;
  DeviceStatusQueueOptions options = FastRetries();
  options.worker_nice = 7;
  DeviceStatusQueue queue(&target, options);
  queue.Start();
  const int caller = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  ASSERT_TRUE(queue.Write(Claim("a"), Entries("gpu-0")).ok());
  ASSERT_TRUE(queue.WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(target.nice(), std::min(caller + 7, 19));
  EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))), caller);
}

TEST(DeviceStatusRecordTest, UndoDataRoundTripsTheEntries) {
  StatusClaimRef claim{.namespace_name = "ns", .name = "c", .uid = "u-1", .generation = 4};
  std::vector<DeviceStatusEntry> entries = {
      {.pool = "node1", .device = "gpu-0", .data = {{"uuid", "GPU-0"}}},
      {.pool = "node1", .device = "gpu-1", .share_id = "s-1", .data = {{"uuid", "GPU-1"}}}};
  absl::StatusOr<DeviceStatusRecord> back =
      DeviceStatusRecordFromJson(DeviceStatusRecordToJson(claim, entries));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->claim, claim);
  ASSERT_TRUE(back->entries.has_value());
  EXPECT_EQ(*back->entries, entries);
  // An older record (the claim ref only) has no entries to write again.
  absl::StatusOr<DeviceStatusRecord> old = DeviceStatusRecordFromJson(StatusClaimRefToJson(claim));
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_FALSE(old->entries.has_value());
  nlohmann::json bad = DeviceStatusRecordToJson(claim, entries);
  bad["devices"][1]["pool"] = 7;
  absl::StatusOr<DeviceStatusRecord> refused = DeviceStatusRecordFromJson(bad);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status()));
  EXPECT_THAT(refused.status().message(), HasSubstr("devices[1]"));
}

}  // namespace
}  // namespace dra::gpu
