#include "lib/cdi/transient_specs.h"

#include <linux/magic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/cdi/spec.h"
#include "lib/common/atomic_file.h"

namespace dra::cdi {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kKind[] = "k8s.gpu.example.com/claim";

class TransientSpecDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cdi_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/var/run/cdi";
    auto created = TransientSpecDir::Create(dir_, kKind);
    ASSERT_TRUE(created.ok()) << created.status();
    specs_ = std::move(*created);
  }
  void TearDown() override { fs::remove_all(root_); }

  static Spec ClaimSpec(const std::string& uid) {
    Spec spec;
    spec.kind = kKind;
    spec.devices.push_back(
        {.name = uid + "-gpu-0", .container_edits = {.device_nodes = {{.path = "/dev/nvidia0"}}}});
    return spec;
  }

  static void Touch(const std::string& path) { std::ofstream(path) << "x"; }

  std::string root_;
  std::string dir_;
  std::unique_ptr<TransientSpecDir> specs_;
};

TEST_F(TransientSpecDirTest, CreateMakesTheDirectory) {
  EXPECT_TRUE(fs::is_directory(dir_));
  EXPECT_EQ(specs_->kind().vendor, "k8s.gpu.example.com");
}

TEST_F(TransientSpecDirTest, CreateRejectsBadKindAndFileInTheWay) {
  EXPECT_FALSE(TransientSpecDir::Create(dir_, "nokind").ok());
  Touch(root_ + "/file");
  absl::StatusOr<std::unique_ptr<TransientSpecDir>> s =
      TransientSpecDir::Create(root_ + "/file", kKind);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("is not a directory"));
}

TEST_F(TransientSpecDirTest, WritesNamedFileWithMinimumVersionAndMode0644) {
  const std::string uid = "7f3a0c2e-1111-2222-3333-444455556666";
  absl::StatusOr<std::string> path = specs_->Write(uid, ClaimSpec(uid));
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir_ + "/k8s.gpu.example.com-claim_" + uid + ".json");
  EXPECT_EQ(*path, specs_->PathFor(uid));
  struct stat st;
  ASSERT_EQ(::stat(path->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  absl::StatusOr<std::string> text = ReadFile(*path);
  ASSERT_TRUE(text.ok());
  absl::StatusOr<Spec> decoded = DecodeSpec(*text);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->version, "0.5.0");  // the device name starts with a digit
  EXPECT_EQ(decoded->devices[0].name, uid + "-gpu-0");
}

TEST_F(TransientSpecDirTest, SlashInIdBecomesUnderscore) {
  EXPECT_EQ(TransientSpecName(specs_->kind(), "a/b"), "k8s.gpu.example.com-claim_a_b");
  EXPECT_EQ(specs_->PathFor("a/b"), dir_ + "/k8s.gpu.example.com-claim_a_b.json");
}

TEST_F(TransientSpecDirTest, RejectsInvalidSpecsWithoutWriting) {
  Spec wrong_kind = ClaimSpec("u1");
  wrong_kind.kind = "other.com/claim";
  absl::StatusOr<std::string> r = specs_->Write("u1", wrong_kind);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("does not match"));

  Spec dup = ClaimSpec("u1");
  dup.devices.push_back(dup.devices[0]);
  r = specs_->Write("u1", dup);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("write CDI spec " + specs_->PathFor("u1") +
                        ": devices[1].name: duplicate device name"));

  Spec too_old = ClaimSpec("7u1");  // a leading digit needs 0.5.0
  too_old.version = "0.3.0";
  EXPECT_FALSE(specs_->Write("u1", too_old).ok());
  EXPECT_FALSE(specs_->Write("", ClaimSpec("u1")).ok());
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(TransientSpecDirTest, OverwriteReplacesAndRemovesLegacyYaml) {
  const std::string legacy = dir_ + "/k8s.gpu.example.com-claim_u1.yaml";
  Touch(legacy);
  ASSERT_TRUE(specs_->Write("u1", ClaimSpec("u1")).ok());
  Spec second = ClaimSpec("u1");
  second.devices[0].name = "u1-gpu-1";
  ASSERT_TRUE(specs_->Write("u1", second).ok());
  EXPECT_FALSE(fs::exists(legacy));
  absl::StatusOr<Spec> decoded = DecodeSpec(*ReadFile(specs_->PathFor("u1")));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->devices[0].name, "u1-gpu-1");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(TransientSpecDirTest, RemoveIsIdempotentAndTakesLegacyYaml) {
  ASSERT_TRUE(specs_->Write("u1", ClaimSpec("u1")).ok());
  Touch(dir_ + "/k8s.gpu.example.com-claim_u1.yaml");
  EXPECT_TRUE(specs_->Remove("u1").ok());
  EXPECT_TRUE(fs::is_empty(dir_));
  EXPECT_TRUE(specs_->Remove("u1").ok());
  EXPECT_TRUE(specs_->Remove("never-written").ok());
}

TEST_F(TransientSpecDirTest, RemoveReportsOtherErrors) {
  // A directory where the file should be: unlink fails with EISDIR/EPERM, not ENOENT.
  fs::create_directory(specs_->PathFor("u1"));
  absl::Status status = specs_->Remove("u1");
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("remove CDI spec " + specs_->PathFor("u1") + ": "));
}

TEST_F(TransientSpecDirTest, ListFindsOnlyThisKindsSpecFiles) {
  ASSERT_TRUE(specs_->Write("u2", ClaimSpec("u2")).ok());
  ASSERT_TRUE(specs_->Write("u1", ClaimSpec("u1")).ok());
  Touch(dir_ + "/k8s.gpu.example.com-claim_old.yaml");                 // Go driver's file
  Touch(dir_ + "/.k8s.gpu.example.com-claim_u3.json.tmp.abc");         // in-flight temp file
  Touch(dir_ + "/k8s.gpu.example.com-claim_u4.txt");                   // not a spec
  Touch(dir_ + "/other.com-claim_u5.json");                            // another vendor
  Touch(dir_ + "/k8s.gpu.example.com-claim_.json");                    // no ID
  fs::create_directory(dir_ + "/k8s.gpu.example.com-claim_dir.json");  // not a regular file
  fs::create_symlink(specs_->PathFor("u1"), dir_ + "/k8s.gpu.example.com-claim_link.json");

  absl::StatusOr<std::vector<TransientSpecFile>> files = specs_->List();
  ASSERT_TRUE(files.ok()) << files.status();
  std::vector<std::string> ids;
  for (const TransientSpecFile& f : *files) {
    ids.push_back(f.id);
    EXPECT_EQ(f.path.rfind(dir_ + "/k8s.gpu.example.com-claim_", 0), 0u) << f.path;
  }
  EXPECT_THAT(ids, ElementsAre("old", "u1", "u2"));
}

TEST_F(TransientSpecDirTest, ListOfMissingDirectoryFails) {
  fs::remove_all(dir_);
  absl::StatusOr<std::vector<TransientSpecFile>> files = specs_->List();
  ASSERT_FALSE(files.ok());
  EXPECT_TRUE(absl::IsNotFound(files.status()));
  EXPECT_THAT(std::string(files.status().message()), HasSubstr("list CDI specs in " + dir_));
}

TEST_F(TransientSpecDirTest, RemoveTemporaryFilesTakesOnlyOurLeftovers) {
  auto touch = [this](const std::string& name) { std::ofstream(dir_ + "/" + name) << "x"; };
  touch(".k8s.gpu.example.com-claim_u1.json.tmp.AbC123");  // ours, left by a crash
  touch(".other-vendor-claim_u1.json.tmp.AbC123");         // another kind's
  touch("k8s.gpu.example.com-claim_u2.json");              // a real spec
  auto removed = specs_->RemoveTemporaryFiles();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);
  EXPECT_FALSE(fs::exists(dir_ + "/.k8s.gpu.example.com-claim_u1.json.tmp.AbC123"));
  EXPECT_TRUE(fs::exists(dir_ + "/.other-vendor-claim_u1.json.tmp.AbC123"));
  EXPECT_TRUE(fs::exists(dir_ + "/k8s.gpu.example.com-claim_u2.json"));
}

TEST(TransientSpecDirDurabilityTest, NoSyncOnTmpfsAndSyncOnDisk) {
  // /dev/shm is tmpfs on Linux; the test's /tmp directory is on disk here (the CI machines keep
  // /tmp on the root file system), and a write goes through either way.
  char shm_tmpl[] = "/dev/shm/cdi_test_XXXXXX";
  ASSERT_NE(::mkdtemp(shm_tmpl), nullptr);
  auto on_shm = TransientSpecDir::Create(shm_tmpl, kKind);
  ASSERT_TRUE(on_shm.ok()) << on_shm.status();
  EXPECT_FALSE((*on_shm)->durable());
  Spec spec;
  spec.kind = kKind;
  spec.devices.push_back({.name = "d", .container_edits = {.device_nodes = {{.path = "/dev/x"}}}});
  auto path = (*on_shm)->Write("uid-1", spec);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_TRUE(fs::exists(*path));
  fs::remove_all(shm_tmpl);

  char disk_tmpl[] = "/tmp/cdi_test_XXXXXX";
  ASSERT_NE(::mkdtemp(disk_tmpl), nullptr);
  struct statfs st {};
  ASSERT_EQ(::statfs(disk_tmpl, &st), 0);
  auto on_disk = TransientSpecDir::Create(disk_tmpl, kKind);
  ASSERT_TRUE(on_disk.ok()) << on_disk.status();
  EXPECT_EQ((*on_disk)->durable(), st.f_type != TMPFS_MAGIC);
  fs::remove_all(disk_tmpl);
}

}  // namespace
}  // namespace dra::cdi
