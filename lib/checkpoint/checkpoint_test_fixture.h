#pragma once

// The fixture of the checkpoint tests (checkpoint_test.cc, checkpoint_go_adoption_test.cc): a
// checkpoint directory and boot-ID file under a fresh temporary root, a fake clock, and the
// corruption and adoption reports the checkpoint made.

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/common/atomic_file.h"
#include "lib/common/clock.h"

namespace dra::checkpoint::testing {

namespace fs = std::filesystem;
using Json = nlohmann::json;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/checkpoint_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/plugins/gpu.example.com";
    boot_id_path_ = root_ + "/boot_id";
    SetBootId("11111111-aaaa\n");
    options_.clock = &clock_;
    options_.on_corruption = [this](const CorruptionReport& r) { reports_.push_back(r); };
    options_.on_adoption = [this](const AdoptionReport& r) { adoptions_.push_back(r); };
    // Stands in for lib/gpuplugin's conversion: wraps the Go groups so the tests can see them.
    options_.convert_go_devices = [](const std::string& uid, const Json& go_devices,
                                     const Json& allocation) -> absl::StatusOr<Json> {
      if (uid == "unconvertible") return absl::InvalidArgumentError("no such device type");
      return Json{{"go", go_devices}, {"allocationSeen", !allocation.is_null()}};
    };
  }
  void TearDown() override {
    WaitForBackgroundUnlinks();
    fs::remove_all(root_);
  }

  void SetBootId(const std::string& id) { std::ofstream(boot_id_path_) << id; }

  std::unique_ptr<Checkpoint> MustOpen() {
    absl::StatusOr<std::unique_ptr<Checkpoint>> cp =
        Checkpoint::Open(dir_, boot_id_path_, options_);
    EXPECT_TRUE(cp.ok()) << cp.status();
    return cp.ok() ? std::move(*cp) : nullptr;
  }

  std::string CheckpointPath() const { return dir_ + "/checkpoint.json"; }

  std::vector<std::string> DirEntries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  static PreparedClaim Claim(const std::string& uid, ClaimState state) {
    return {.uid = uid,
            .namespace_name = "default",
            .name = "claim-" + uid,
            .state = state,
            .allocation = Json::parse(R"({"devices":{"results":[{"driver":"gpu.example.com"}]}})"),
            .prepared_devices = Json::parse(R"([{"device":"gpu-0","cdi":["x/y=z"]}])")};
  }

  absl::Status Put(Checkpoint& cp, const PreparedClaim& claim) {
    return cp.Update([&](ClaimMap& claims) {
      claims[claim.uid] = claim;
      return absl::OkStatus();
    });
  }

  // Writes a valid checkpoint with two claims, then returns its text.
  std::string TwoClaims() {
    auto cp = MustOpen();
    EXPECT_TRUE(Put(*cp, Claim("u1", ClaimState::kPrepareCompleted)).ok());
    EXPECT_TRUE(Put(*cp, Claim("u2", ClaimState::kPrepareStarted)).ok());
    return *ReadFile(CheckpointPath());
  }

  std::string root_, dir_, boot_id_path_;
  FakeClock clock_{absl::FromUnixSeconds(1'700'000'000)};
  Checkpoint::Options options_;
  std::vector<CorruptionReport> reports_;
  std::vector<AdoptionReport> adoptions_;
};

}  // namespace dra::checkpoint::testing
