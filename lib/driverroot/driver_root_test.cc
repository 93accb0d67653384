#include "lib/driverroot/driver_root.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/driverroot/fake_root_for_test.h"

namespace dra::driverroot {
namespace {

using test_util::FakeRoot;
using ::testing::HasSubstr;

std::unique_ptr<DriverRoot> MustCreate(DriverRoot::Options options) {
  absl::StatusOr<std::unique_ptr<DriverRoot>> root = DriverRoot::Create(std::move(options));
  EXPECT_TRUE(root.ok()) << root.status();
  return root.ok() ? std::move(*root) : nullptr;
}

TEST(DriverRootCreate, ValidatesRoots) {
  FakeRoot fake;
  fake.File("/file");
  absl::StatusOr<std::unique_ptr<DriverRoot>> r = DriverRoot::Create({.root = fake.Abs("/none")});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsNotFound(r.status()));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("driver root " + fake.Abs("/none")));
  r = DriverRoot::Create({.root = "relative"});
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  r = DriverRoot::Create({.root = fake.Abs("/file")});
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("is not a directory"));
  r = DriverRoot::Create({.root = fake.path(), .host_root = "run/nvidia"});
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("host driver root must be an absolute"));
  r = DriverRoot::Create({.root = fake.path(), .dev_root = fake.Abs("/nodev")});
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("dev root"));
}

TEST(DriverRootCreate, DevRootIsTheDriverRootWhenItHasDev) {
  FakeRoot fake;
  auto without = MustCreate({.root = fake.path() + "/"});
  EXPECT_EQ(without->root(), fake.path());
  EXPECT_EQ(without->dev_root(), "/");
  EXPECT_EQ(without->DevPath("/dev/nvidiactl"), "/dev/nvidiactl");
  fake.Dir("/dev");
  auto with = MustCreate({.root = fake.path()});
  EXPECT_EQ(with->dev_root(), fake.path());
  EXPECT_EQ(with->DevPath("/dev/nvidiactl"), fake.Abs("/dev/nvidiactl"));
  EXPECT_EQ(with->Path("/usr/bin/x"), fake.Abs("/usr/bin/x"));
  EXPECT_EQ(with->proc_root(), "/proc");
}

TEST(DriverRootCreate, SlashRootJoinsPlainly) {
  auto root = MustCreate({.root = "/", .proc_root = "/proc/", .sys_root = "/sys"});
  EXPECT_EQ(root->Path("/usr/lib/x"), "/usr/lib/x");
  EXPECT_EQ(root->dev_root(), "/");
  EXPECT_EQ(root->proc_root(), "/proc");
}

TEST(DriverRootResolve, StaysInsideTheRoot) {
  FakeRoot fake;
  fake.File("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15");
  fake.Symlink("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "libnvidia-ml.so.550.54.15");
  fake.Symlink("/lib", "usr/lib");                      // relative
  fake.Symlink("/lib64", "/usr/lib/x86_64-linux-gnu");  // absolute: means inside the root
  fake.Symlink("/up", "../../../../usr");               // ".." cannot leave the root
  fake.Symlink("/loop1", "loop2");
  fake.Symlink("/loop2", "/loop1");
  fake.File("/file");
  auto root = MustCreate({.root = fake.path()});

  struct Case {
    std::string in, want;
  } cases[] = {
      {"/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
       "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15"},
      {"/lib64/libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15"},
      {"/up/lib/./x86_64-linux-gnu/../x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"},
      {"/", "/"},
      {"//usr//lib/", "/usr/lib"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> got = root->Resolve(c.in);
    ASSERT_TRUE(got.ok()) << c.in << ": " << got.status();
    EXPECT_EQ(*got, c.want) << c.in;
  }
  absl::StatusOr<std::string> loop = root->Resolve("/loop1/x");
  EXPECT_THAT(std::string(loop.status().message()), HasSubstr("too many levels of symbolic links"));
  EXPECT_TRUE(absl::IsNotFound(root->Resolve("/usr/missing").status()));
  EXPECT_TRUE(absl::IsNotFound(root->Resolve("/file/below").status()));
}

TEST(DriverRootFind, LibraryAndBinary) {
  FakeRoot fake;
  fake.File("/usr/lib64/libnvidia-ml.so.550.54.15");
  fake.Symlink("/usr/lib64/libnvidia-ml.so.1", "/usr/lib64/libnvidia-ml.so.550.54.15");
  fake.File("/usr/bin/nvidia-smi", "#!/bin/sh\n", 0644);  // not executable: skipped
  fake.File("/sbin/nvidia-smi", "#!/bin/sh\n", 0755);
  fake.Symlink("/bin", "/usr/bin");
  auto root = MustCreate({.root = fake.path()});

  absl::StatusOr<std::string> nvml = root->FindLibrary("libnvidia-ml.so.1");
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  EXPECT_EQ(*nvml, fake.Abs("/usr/lib64/libnvidia-ml.so.550.54.15"));
  absl::StatusOr<std::string> smi = root->FindBinary("nvidia-smi");
  ASSERT_TRUE(smi.ok()) << smi.status();
  EXPECT_EQ(*smi, fake.Abs("/sbin/nvidia-smi"));

  absl::StatusOr<std::string> missing = root->FindLibrary("libcuda.so.1");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("find library libcuda.so.1: not in / or /usr/lib64, "));
  EXPECT_TRUE(absl::IsNotFound(root->FindBinary("nvidia-imex").status()));
}

TEST(DriverRootHostPaths, RewritesFromRootToHostRoot) {
  FakeRoot fake;
  auto root = MustCreate({.root = fake.path(), .host_root = "/run/nvidia/driver"});
  EXPECT_EQ(root->ToHostPath(fake.Abs("/usr/bin/nvidia-smi")),
            "/run/nvidia/driver/usr/bin/nvidia-smi");
  EXPECT_EQ(root->ToHostPath("/dev/nvidia0"), "/dev/nvidia0");
  cdi::Spec spec;
  spec.container_edits.mounts = {
      {.host_path = fake.Abs("/usr/lib/libcuda.so.1"), .container_path = "/usr/lib/libcuda.so.1"}};
  root->TransformSpec(spec);
  EXPECT_EQ(spec.container_edits.mounts[0].host_path, "/run/nvidia/driver/usr/lib/libcuda.so.1");
}

}  // namespace
}  // namespace dra::driverroot
