#include "lib/checkpoint/checkpoint.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/checkpoint/checkpoint_test_fixture.h"
#include "lib/common/atomic_file.h"
#include "lib/common/clock.h"
#include "lib/common/file_lock.h"
#include "lib/common/log.h"
#include "lib/common/trace.h"

namespace dra::checkpoint {
namespace {

namespace fs = std::filesystem;
using ::testing::ContainsRegex;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using Json = nlohmann::json;

using testing::CheckpointTest;

TEST_F(CheckpointTest, OpenCreatesAnEmptyCheckpointWithTheBootId) {
  auto cp = MustOpen();
  ASSERT_NE(cp, nullptr);
  EXPECT_EQ(cp->boot_id(), "11111111-aaaa");
  EXPECT_EQ(cp->path(), CheckpointPath());
  EXPECT_THAT(DirEntries(), ElementsAre("checkpoint.json", "cp.lock"));
  absl::StatusOr<Contents> on_disk = DecodeCheckpoint(*ReadFile(CheckpointPath()));
  ASSERT_TRUE(on_disk.ok()) << on_disk.status();
  EXPECT_EQ(on_disk->node_boot_id, "11111111-aaaa");
  EXPECT_THAT(on_disk->claims, IsEmpty());
  struct stat st;
  ASSERT_EQ(::stat(CheckpointPath().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_FALSE(cp->open_corruption().has_value());
  EXPECT_THAT(reports_, IsEmpty());
}

TEST_F(CheckpointTest, RoundTripAcrossReopen) {
  {
    auto cp = MustOpen();
    ASSERT_TRUE(Put(*cp, Claim("u1", ClaimState::kPrepareStarted)).ok());
    ASSERT_TRUE(Put(*cp, Claim("u2", ClaimState::kPrepareCompleted)).ok());
    ASSERT_TRUE(cp->Update([](ClaimMap& claims) {
                    claims.at("u1").state = ClaimState::kPrepareCompleted;
                    return absl::OkStatus();
                  }).ok());
  }
  auto cp = MustOpen();
  absl::StatusOr<std::optional<PreparedClaim>> u1 = cp->Get("u1");
  ASSERT_TRUE(u1.ok()) << u1.status();
  ASSERT_TRUE(u1->has_value());
  PreparedClaim want = Claim("u1", ClaimState::kPrepareCompleted);
  EXPECT_EQ(**u1, want);
  absl::StatusOr<ClaimMap> all = cp->List();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
  EXPECT_EQ(all->at("u2"), Claim("u2", ClaimState::kPrepareCompleted));
  absl::StatusOr<std::optional<PreparedClaim>> missing = cp->Get("nope");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  EXPECT_EQ(cp->claims_invalidated_by_reboot(), 0u);
}

TEST_F(CheckpointTest, UpdateSetsUidFromKeyAndErasesEntries) {
  auto cp = MustOpen();
  ASSERT_TRUE(cp->Update([](ClaimMap& claims) {
                  claims["k"].state = ClaimState::kPrepareStarted;
                  return absl::OkStatus();
                }).ok());
  EXPECT_EQ((*cp->Get("k"))->uid, "k");
  ASSERT_TRUE(cp->Update([](ClaimMap& claims) {
                  claims.erase("k");
                  return absl::OkStatus();
                }).ok());
  EXPECT_THAT(*cp->List(), IsEmpty());
  absl::Status mismatch = cp->Update([](ClaimMap& claims) {
    claims["a"].uid = "b";
    return absl::OkStatus();
  });
  EXPECT_TRUE(absl::IsInvalidArgument(mismatch)) << mismatch;
}

TEST_F(CheckpointTest, FailedMutationWritesNothing) {
  auto cp = MustOpen();
  ASSERT_TRUE(Put(*cp, Claim("u1", ClaimState::kPrepareCompleted)).ok());
  const std::string before = *ReadFile(CheckpointPath());
  absl::Status status = cp->Update([](ClaimMap& claims) {
    claims.clear();
    return absl::AbortedError("device setup failed");
  });
  EXPECT_EQ(status, absl::AbortedError("device setup failed"));
  EXPECT_EQ(*ReadFile(CheckpointPath()), before);
}

// on_commit runs once the new file is in place, with the claims as written; a failed mutation
// and a failed write (an entry whose uid differs from its key cannot be encoded) commit nothing
// and call nothing.
TEST_F(CheckpointTest, OnCommitFollowsOnlyACommittedWrite) {
  auto cp = MustOpen();
  std::vector<std::string> commits;  // per call: the uids given, and whether the file had them
  auto on_commit = [&](const ClaimMap& committed) {
    std::string c;
    const std::string file = ReadFile(CheckpointPath()).value_or("");
    for (const auto& [uid, claim] : committed) {
      absl::StrAppend(&c, uid,
                      file.find(uid) != std::string::npos ? " on disk; " : " not on disk; ");
    }
    commits.push_back(c);
  };
  ASSERT_TRUE(cp->Update(
                    [](ClaimMap& claims) {
                      claims["u1"].state = ClaimState::kPrepareStarted;
                      return absl::OkStatus();
                    },
                    on_commit)
                  .ok());
  EXPECT_THAT(commits, ElementsAre("u1 on disk; "));
  absl::Status aborted =
      cp->Update([](ClaimMap&) { return absl::AbortedError("device setup failed"); }, on_commit);
  EXPECT_TRUE(absl::IsAborted(aborted)) << aborted;
  absl::Status unencodable = cp->Update(
      [](ClaimMap& claims) {
        claims["u2"].uid = "other";
        return absl::OkStatus();
      },
      on_commit);
  EXPECT_TRUE(absl::IsInvalidArgument(unencodable)) << unencodable;
  EXPECT_THAT(commits, ElementsAre("u1 on disk; "));
  ASSERT_TRUE(cp->Update(
                    [](ClaimMap& claims) {
                      claims.erase("u1");
                      claims["u3"].state = ClaimState::kPrepareCompleted;
                      return absl::OkStatus();
                    },
                    on_commit)
                  .ok());
  EXPECT_THAT(commits, ElementsAre("u1 on disk; ", "u3 on disk; "));
  EXPECT_THAT(*ReadFile(CheckpointPath()), Not(HasSubstr("u1")));
}

// Under a prepare's trace (lib/common/trace.h), an update reports where its time went: the load,
// the encoding, the file replace and the commit callback, in that order, each inside
// checkpointWrite; without a callback there is no checkpointOnCommit stage.
TEST_F(CheckpointTest, UpdateReportsItsPartsToTheCallTrace) {
  auto cp = MustOpen();
  std::vector<std::string> lines;
  log::SetSink([&lines](std::string_view line) { lines.emplace_back(line); });
  auto add = [](ClaimMap& claims) {
    claims["u1"].state = ClaimState::kPrepareCompleted;
    return absl::OkStatus();
  };
  {
    CallTrace trace("prepare trace", true);
    ASSERT_TRUE(cp->Update(add, [](const ClaimMap&) {}).ok());
  }
  {
    CallTrace trace("unprepare trace", true);
    ASSERT_TRUE(cp->Update(add).ok());
  }
  log::SetSink(nullptr);
  ASSERT_EQ(lines.size(), 2u);
  // A stage is added when it ends, so the enclosing checkpointWrite comes last.
  EXPECT_THAT(lines[0], ContainsRegex("checkpointLoadUs=[0-9]+ checkpointEncodeUs=[0-9]+ "
                                      "checkpointReplaceUs=[0-9]+ checkpointOnCommitUs=[0-9]+ "
                                      "checkpointWriteUs=[0-9]+"));
  EXPECT_THAT(lines[1], ContainsRegex("checkpointReplaceUs=[0-9]+"));
  EXPECT_THAT(lines[1], Not(HasSubstr("checkpointOnCommit")));
}

TEST_F(CheckpointTest, ChecksumMismatchIsMovedAsideAndReported) {
  const std::string good = TwoClaims();
  const std::string bad = absl::StrReplaceAll(good, {{"claim-u1", "claim-zz"}});
  ASSERT_NE(bad, good);
  ASSERT_TRUE(WriteFileAtomically(CheckpointPath(), bad).ok());

  auto cp = MustOpen();
  ASSERT_NE(cp, nullptr);
  ASSERT_TRUE(cp->open_corruption().has_value());
  const CorruptionReport& r = *cp->open_corruption();
  EXPECT_EQ(r.path, CheckpointPath());
  EXPECT_EQ(r.moved_to, CheckpointPath() + ".corrupt-1700000000");
  EXPECT_THAT(r.reason, HasSubstr("checksum mismatch: stored " + r.stored_checksum + ", computed " +
                                  r.computed_checksum));
  EXPECT_NE(r.stored_checksum, r.computed_checksum);
  EXPECT_FALSE(r.parse_error_offset.has_value());
  EXPECT_EQ(r.size_bytes, bad.size());
  EXPECT_EQ(r.detected_at, absl::FromUnixSeconds(1'700'000'000));
  EXPECT_EQ(*ReadFile(r.moved_to), bad);  // evidence kept byte for byte
  EXPECT_THAT(*cp->List(), IsEmpty());
  ASSERT_EQ(reports_.size(), 1u);
  EXPECT_EQ(reports_[0].moved_to, r.moved_to);
}

TEST_F(CheckpointTest, TruncatedFileReportsTheParseOffset) {
  const std::string good = TwoClaims();
  ASSERT_TRUE(WriteFileAtomically(CheckpointPath(), good.substr(0, 40)).ok());
  auto cp = MustOpen();
  ASSERT_TRUE(cp->open_corruption().has_value());
  EXPECT_THAT(cp->open_corruption()->reason, HasSubstr("malformed JSON at byte 40"));
  EXPECT_EQ(cp->open_corruption()->parse_error_offset, 40u);
  EXPECT_EQ(cp->open_corruption()->stored_checksum, "");
  EXPECT_THAT(*cp->List(), IsEmpty());
}

TEST_F(CheckpointTest, GarbageAndGoFormatAreCorrupt) {
  MustOpen();
  for (const std::string& text :
       {std::string("\0\0\0\0", 4), std::string(R"({"checksum":1,"v2":{"preparedClaims":{}}})")}) {
    reports_.clear();
    ASSERT_TRUE(WriteFileAtomically(CheckpointPath(), text).ok());
    clock_.Advance(absl::Seconds(1));
    auto cp = MustOpen();
    ASSERT_NE(cp, nullptr);
    ASSERT_TRUE(cp->open_corruption().has_value());
    EXPECT_EQ(*ReadFile(cp->open_corruption()->moved_to), text);
    EXPECT_EQ(reports_.size(), 1u);
    EXPECT_THAT(*cp->List(), IsEmpty());
  }
}

// A node switched from the Go driver: its claims are in use and must survive the switch.
TEST_F(CheckpointTest, KeepsOnlyTheNewestThreeCorruptFiles) {
  MustOpen();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(WriteFileAtomically(CheckpointPath(), absl::StrCat("garbage ", i)).ok());
    clock_.Advance(absl::Seconds(10));
    ASSERT_NE(MustOpen(), nullptr);
  }
  EXPECT_THAT(DirEntries(), ElementsAre("checkpoint.json", "checkpoint.json.corrupt-1700000030",
                                        "checkpoint.json.corrupt-1700000040",
                                        "checkpoint.json.corrupt-1700000050", "cp.lock"));
  EXPECT_EQ(*ReadFile(CheckpointPath() + ".corrupt-1700000050"), "garbage 4");
}

TEST_F(CheckpointTest, CorruptionsInTheSameSecondDoNotOverwriteEachOther) {
  MustOpen();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(WriteFileAtomically(CheckpointPath(), absl::StrCat("garbage ", i)).ok());
    ASSERT_NE(MustOpen(), nullptr);
  }
  EXPECT_EQ(*ReadFile(CheckpointPath() + ".corrupt-1700000000"), "garbage 0");
  EXPECT_EQ(*ReadFile(CheckpointPath() + ".corrupt-1700000000.1"), "garbage 1");
}

TEST_F(CheckpointTest, CorruptionFoundByUpdateIsRecoveredAndReported) {
  auto cp = MustOpen();
  ASSERT_TRUE(Put(*cp, Claim("u1", ClaimState::kPrepareCompleted)).ok());
  ASSERT_TRUE(WriteFileAtomically(CheckpointPath(), "{").ok());
  ASSERT_TRUE(Put(*cp, Claim("u2", ClaimState::kPrepareStarted)).ok());
  ASSERT_EQ(reports_.size(), 1u);
  EXPECT_THAT(reports_[0].reason, HasSubstr("malformed JSON at byte 1"));
  absl::StatusOr<ClaimMap> claims = cp->List();
  ASSERT_TRUE(claims.ok());
  EXPECT_EQ(claims->size(), 1u);
  EXPECT_TRUE(claims->contains("u2"));
}

TEST_F(CheckpointTest, NewerVersionIsRefusedAndLeftUntouched) {
  MustOpen();
  const std::string newer = R"({"version": 2, "data": {"something": "new"}})";
  ASSERT_TRUE(WriteFileAtomically(CheckpointPath(), newer).ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> cp = Checkpoint::Open(dir_, boot_id_path_, options_);
  ASSERT_FALSE(cp.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(cp.status()));
  EXPECT_THAT(std::string(cp.status().message()),
              HasSubstr("checkpoint format version 2 is newer than the newest this plugin reads "
                        "(1); refusing to use or modify it"));
  EXPECT_EQ(*ReadFile(CheckpointPath()), newer);
  EXPECT_THAT(reports_, IsEmpty());
  EXPECT_THAT(DirEntries(), ElementsAre("checkpoint.json", "cp.lock"));
}

TEST_F(CheckpointTest, NewerVersionWrittenWhileRunningIsRefusedByUpdate) {
  auto cp = MustOpen();
  const std::string newer = R"({"version": 7})";
  ASSERT_TRUE(WriteFileAtomically(CheckpointPath(), newer).ok());
  absl::Status status = Put(*cp, Claim("u1", ClaimState::kPrepareStarted));
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_FALSE(cp->List().ok());
  EXPECT_EQ(*ReadFile(CheckpointPath()), newer);
}

TEST_F(CheckpointTest, BootIdChangeInvalidatesPreparedClaims) {
  TwoClaims();
  SetBootId("22222222-bbbb");
  auto cp = MustOpen();
  ASSERT_NE(cp, nullptr);
  EXPECT_EQ(cp->claims_invalidated_by_reboot(), 2u);
  EXPECT_THAT(*cp->List(), IsEmpty());
  absl::StatusOr<Contents> on_disk = DecodeCheckpoint(*ReadFile(CheckpointPath()));
  ASSERT_TRUE(on_disk.ok());
  EXPECT_EQ(on_disk->node_boot_id, "22222222-bbbb");
  EXPECT_FALSE(cp->open_corruption().has_value());
}

// on_reboot sees the dropped claims while the file still holds them (a crash in it leaves the
// reboot to the next Open); its error fails Open and changes nothing. Not called without a reboot.
TEST_F(CheckpointTest, OnRebootRunsBeforeTheNewBootIdIsWrittenAndItsErrorFailsOpen) {
  TwoClaims();
  const std::string before = *ReadFile(CheckpointPath());
  std::vector<std::vector<std::string>> calls;
  absl::Status answer = absl::PermissionDeniedError("remove /cdi/x.json: permission denied");
  options_.on_reboot = [&](const ClaimMap& dropped) {
    std::vector<std::string> uids;
    for (const auto& [uid, claim] : dropped) uids.push_back(uid);
    calls.push_back(uids);
    EXPECT_EQ(*ReadFile(CheckpointPath()), before);
    return answer;
  };
  EXPECT_NE(MustOpen(), nullptr);
  EXPECT_THAT(calls, IsEmpty());  // same boot

  SetBootId("22222222-bbbb");
  absl::StatusOr<std::unique_ptr<Checkpoint>> failed =
      Checkpoint::Open(dir_, boot_id_path_, options_);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(failed.status())) << failed.status();
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr("node rebooted since it was written: remove /cdi/x.json"));
  EXPECT_EQ(*ReadFile(CheckpointPath()), before);

  answer = absl::OkStatus();
  auto cp = MustOpen();
  ASSERT_NE(cp, nullptr);
  EXPECT_EQ(calls, (std::vector<std::vector<std::string>>{{"u1", "u2"}, {"u1", "u2"}}));
  EXPECT_EQ(cp->claims_invalidated_by_reboot(), 2u);
  EXPECT_THAT(*cp->List(), IsEmpty());
  EXPECT_NE(*ReadFile(CheckpointPath()), before);
  EXPECT_NE(MustOpen(), nullptr);
  EXPECT_EQ(calls.size(), 2u);  // the new boot ID is recorded: no reboot any more
}

TEST_F(CheckpointTest, SameBootIdKeepsClaimsAndEmptyStoredBootIdIsAdopted) {
  TwoClaims();
  EXPECT_EQ(MustOpen()->List()->size(), 2u);

  Contents legacy{.node_boot_id = ""};
  legacy.claims["u9"] = Claim("u9", ClaimState::kPrepareCompleted);
  ASSERT_TRUE(WriteFileAtomically(CheckpointPath(), *EncodeCheckpoint(legacy)).ok());
  auto cp = MustOpen();
  EXPECT_EQ(cp->claims_invalidated_by_reboot(), 0u);
  EXPECT_EQ(cp->List()->size(), 1u);
  EXPECT_EQ(DecodeCheckpoint(*ReadFile(CheckpointPath()))->node_boot_id, "11111111-aaaa");
}

TEST_F(CheckpointTest, MissingOrEmptyBootIdFailsOpen) {
  absl::StatusOr<std::unique_ptr<Checkpoint>> cp =
      Checkpoint::Open(dir_, root_ + "/no_such_boot_id", options_);
  ASSERT_FALSE(cp.ok());
  EXPECT_THAT(std::string(cp.status().message()), HasSubstr("read node boot ID"));
  SetBootId(" \n");
  cp = Checkpoint::Open(dir_, boot_id_path_, options_);
  ASSERT_FALSE(cp.ok());
  EXPECT_THAT(std::string(cp.status().message()), HasSubstr("is empty"));
}

TEST_F(CheckpointTest, ReadErrorsAreNotCorruption) {
  fs::create_directories(CheckpointPath());  // reading a directory fails with EISDIR
  absl::StatusOr<std::unique_ptr<Checkpoint>> cp = Checkpoint::Open(dir_, boot_id_path_, options_);
  ASSERT_FALSE(cp.ok());
  EXPECT_THAT(std::string(cp.status().message()), HasSubstr("read " + CheckpointPath()));
  EXPECT_TRUE(fs::is_directory(CheckpointPath()));
  EXPECT_THAT(reports_, IsEmpty());
}

TEST_F(CheckpointTest, StaleTempFileFromACrashIsIgnoredAndRemoved) {
  const std::string good = TwoClaims();
  // A crash after writing the temporary file but before the rename.
  const std::string stale = dir_ + "/.checkpoint.json.tmp.Ab12Cd";
  std::ofstream(stale) << R"({"version":1,"partial)";
  auto cp = MustOpen();
  ASSERT_NE(cp, nullptr);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(cp->open_corruption().has_value());
  EXPECT_EQ(cp->List()->size(), 2u);
  EXPECT_EQ(*ReadFile(CheckpointPath()), good);
}

TEST_F(CheckpointTest, LockTimeoutIsAnError) {
  options_.lock_timeout = absl::Milliseconds(50);
  auto cp = MustOpen();
  absl::StatusOr<FileLock> held = FileLock::Acquire(dir_ + "/cp.lock", absl::ZeroDuration());
  ASSERT_TRUE(held.ok());
  absl::Status status = Put(*cp, Claim("u1", ClaimState::kPrepareStarted));
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("update checkpoint " + CheckpointPath()));
  held->Release();
  EXPECT_TRUE(Put(*cp, Claim("u1", ClaimState::kPrepareStarted)).ok());
}

// Two processes each increment a counter kept in one claim's opaque payload; without the lock
// some read-modify-writes would be lost.
TEST_F(CheckpointTest, ConcurrentUpdatesFromTwoProcessesSerialize) {
  constexpr int kIterations = 40;
  ASSERT_NE(MustOpen(), nullptr);
  std::vector<pid_t> children;
  for (int child = 0; child < 2; ++child) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Checkpoint::Options options;
      options.lock_timeout = absl::Seconds(30);
      absl::StatusOr<std::unique_ptr<Checkpoint>> cp =
          Checkpoint::Open(dir_, boot_id_path_, options);
      if (!cp.ok()) ::_exit(2);
      for (int i = 0; i < kIterations; ++i) {
        absl::Status s = (*cp)->Update([&](ClaimMap& claims) {
          PreparedClaim& counter = claims["counter"];
          const int64_t n =
              counter.prepared_devices.is_null() ? 0 : counter.prepared_devices.get<int64_t>();
          ::usleep(200);  // widen the window a lost update would need
          counter.prepared_devices = n + 1;
          claims[absl::StrCat("child", child, "-", i)].state = ClaimState::kPrepareCompleted;
          return absl::OkStatus();
        });
        if (!s.ok()) ::_exit(3);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int wstatus = 0;
    ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
    ASSERT_TRUE(WIFEXITED(wstatus));
    EXPECT_EQ(WEXITSTATUS(wstatus), 0);
  }
  auto cp = MustOpen();
  absl::StatusOr<ClaimMap> claims = cp->List();
  ASSERT_TRUE(claims.ok());
  EXPECT_EQ(claims->at("counter").prepared_devices, 2 * kIterations);
  EXPECT_EQ(claims->size(), 1u + 2 * kIterations);
  EXPECT_FALSE(cp->open_corruption().has_value());
}

// Bytes this process read through read(2) and friends so far (/proc/self/io "rchar").
int64_t BytesRead() {
  std::ifstream in("/proc/self/io");
  std::string key;
  int64_t value = 0;
  while (in >> key >> value) {
    if (key == "rchar:") return value;
  }
  return -1;
}

TEST_F(CheckpointTest, TwoObjectsOnOneFileSeeEachOthersWrites) {
  auto a = MustOpen();
  auto b = MustOpen();
  ASSERT_TRUE(Put(*a, Claim("u1", ClaimState::kPrepareCompleted)).ok());
  ASSERT_TRUE(Put(*b, Claim("u2", ClaimState::kPrepareStarted)).ok());
  absl::StatusOr<ClaimMap> seen_by_a = a->List();
  ASSERT_TRUE(seen_by_a.ok()) << seen_by_a.status();
  EXPECT_EQ(seen_by_a->size(), 2u);
  ASSERT_TRUE(a->Update([](ClaimMap& claims) {
                 claims.erase("u1");
                 return absl::OkStatus();
               }).ok());
  absl::StatusOr<ClaimMap> seen_by_b = b->List();
  ASSERT_TRUE(seen_by_b.ok());
  ASSERT_EQ(seen_by_b->size(), 1u);
  EXPECT_EQ(seen_by_b->at("u2"), Claim("u2", ClaimState::kPrepareStarted));
  // A file replaced behind both (a checkpoint written by hand) is read again too.
  Contents other{.node_boot_id = "11111111-aaaa"};
  other.claims["u9"] = Claim("u9", ClaimState::kPrepareCompleted);
  ASSERT_TRUE(WriteFileAtomically(CheckpointPath(), *EncodeCheckpoint(other)).ok());
  seen_by_a = a->List();
  ASSERT_TRUE(seen_by_a.ok());
  ASSERT_EQ(seen_by_a->size(), 1u);
  EXPECT_TRUE(seen_by_a->contains("u9"));
}

TEST_F(CheckpointTest, AFileThisObjectWroteIsNotReadAgain) {
  auto cp = MustOpen();
  ASSERT_TRUE(Put(*cp, Claim("u1", ClaimState::kPrepareCompleted)).ok());
  const int64_t size = static_cast<int64_t>(fs::file_size(CheckpointPath()));
  const int64_t before = BytesRead();
  ASSERT_GE(before, 0);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<ClaimMap> all = cp->List();
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->at("u1"), Claim("u1", ClaimState::kPrepareCompleted));
  }
  ASSERT_TRUE(Put(*cp, Claim("u2", ClaimState::kPrepareStarted)).ok());
  // Three lists and an update, and not one read of the file.
  EXPECT_LT(BytesRead() - before, size);
}

}  // namespace
}  // namespace dra::checkpoint
