// The loader and session model: library search under a driver root, load failures, init failures,
// reference-counted sessions and calls outside a session.

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/nvml/library.h"
#include "lib/nvml/nvml.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::nvml {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace fs = std::filesystem;

TEST(NvmlLoaderTest, SearchPathsFollowTheSpecOrder) {
  EXPECT_THAT(Nvml::LibrarySearchPaths("/driver-root/"),
              ::testing::ElementsAre("/driver-root/libnvidia-ml.so.1",
                                     "/driver-root/usr/lib64/libnvidia-ml.so.1",
                                     "/driver-root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
                                     "/driver-root/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1",
                                     "/driver-root/lib64/libnvidia-ml.so.1",
                                     "/driver-root/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
                                     "/driver-root/lib/aarch64-linux-gnu/libnvidia-ml.so.1"));
  EXPECT_EQ(Nvml::LibrarySearchPaths("/")[0], "/libnvidia-ml.so.1");
  EXPECT_EQ(Nvml::LibrarySearchPaths("/")[1], "/usr/lib64/libnvidia-ml.so.1");
}

TEST(NvmlLoaderTest, MissingLibraryNamesEverySearchedPath) {
  testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Create(dir.path());
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(nvml.status().message()),
              StartsWith("libnvidia-ml.so.1 not found under driver root " + dir.path()));
  for (const std::string& path : Nvml::LibrarySearchPaths(dir.path())) {
    EXPECT_THAT(std::string(nvml.status().message()), HasSubstr(path));
  }
}

TEST(NvmlLoaderTest, LoadsTheResolvedPathOfTheSymlink) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::MakeMockDriverRoot("t4-2x", dir.path()).ok());
  absl::StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Create(dir.path());
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  EXPECT_EQ((*nvml)->library_path(),
            dir.path() + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.126.20");
  EXPECT_TRUE((*nvml)->HasSymbol("nvmlDeviceGetAddressingMode"));
  EXPECT_FALSE((*nvml)->HasSymbol("nvmlNoSuchFunction"));
}

TEST(NvmlLoaderTest, SkipsDirectoriesAndDanglingLinksInSearchOrder) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::MakeMockDriverRoot("t4-2x", dir.path()).ok());
  // Earlier candidates that are not regular files are passed over.
  fs::create_directories(dir.path() + "/libnvidia-ml.so.1");
  fs::create_directories(dir.path() + "/usr/lib64");
  fs::create_symlink("/nonexistent/libnvidia-ml.so.1", dir.path() + "/usr/lib64/libnvidia-ml.so.1");
  absl::StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Create(dir.path());
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  EXPECT_THAT((*nvml)->library_path(), HasSubstr("/usr/lib/x86_64-linux-gnu/"));
}

TEST(NvmlLoaderTest, FirstHitWins) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::MakeMockDriverRoot("t4-2x", dir.path()).ok());
  fs::create_directories(dir.path() + "/usr/lib64");
  fs::copy_file(testing::MockNvmlLibraryPath(), dir.path() + "/usr/lib64/libnvidia-ml.so.1");
  absl::StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Create(dir.path());
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  EXPECT_EQ((*nvml)->library_path(), dir.path() + "/usr/lib64/libnvidia-ml.so.1");
}

TEST(NvmlLoaderTest, NotALibrary) {
  testing::TempDir dir;
  std::ofstream(dir.path() + "/libnvidia-ml.so.1") << "not an ELF file\n";
  absl::StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Create(dir.path());
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(nvml.status().message()),
              StartsWith("dlopen " + dir.path() + "/libnvidia-ml.so.1: "));
}

// A real shared library that is not NVML: libm, wherever this process loaded it from.
std::string LibmPath() {
  void* handle = ::dlopen("libm.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) handle = ::dlopen("libm.so.6", RTLD_NOW);
  link_map* map = nullptr;
  if (handle == nullptr || ::dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0) return "";
  return map->l_name;
}

TEST(NvmlLoaderTest, LibraryWithoutNvmlSymbols) {
  const std::string libm = LibmPath();
  ASSERT_FALSE(libm.empty());
  absl::StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::CreateFromLibrary(libm);
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(nvml.status().message()),
              HasSubstr("missing required NVML symbols: nvmlInit_v2, "));
  EXPECT_THAT(std::string(nvml.status().message()), HasSubstr("nvmlDeviceGetMinorNumber"));
}

TEST(NvmlLoaderTest, MissingOptionalSymbolIsFunctionNotFound) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::MakeMockDriverRoot("t4-2x", dir.path()).ok());
  absl::StatusOr<std::unique_ptr<internal::Library>> library =
      internal::Library::Open(dir.path() + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1");
  ASSERT_TRUE(library.ok()) << library.status();
  const absl::Status missing = (*library)->Missing("nvmlDeviceGetFutureThing");
  EXPECT_TRUE(IsNvmlError(missing, ReturnCode::kFunctionNotFound));
  EXPECT_TRUE(IsNotSupported(missing));
  EXPECT_THAT(std::string(missing.message()),
              StartsWith("nvmlDeviceGetFutureThing: not supported by "));
}

TEST(NvmlLoaderTest, NoDriverFailsInitNamingTheLibrary) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::MakeMockDriverRoot("t4-2x", dir.path()).ok());
  fs::remove(dir.path() + "/dev/nvidiactl");
  absl::StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Create(dir.path());
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  absl::StatusOr<Session> session = (*nvml)->Open();
  ASSERT_FALSE(session.ok());
  EXPECT_TRUE(IsNvmlError(session.status(), ReturnCode::kDriverNotLoaded));
  EXPECT_EQ(session.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(session.status().message()),
              StartsWith("nvmlInitWithFlags: driver not loaded (library " + dir.path()));
}

TEST(NvmlLoaderTest, PlainInitAlsoWorks) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::MakeMockDriverRoot("t4-2x", dir.path()).ok());
  auto nvml = Nvml::Create(dir.path());
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  absl::StatusOr<Session> session = (*nvml)->Open(/*no_gpus_ok=*/false);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(*session->DeviceCount(), 2u);
}

TEST(NvmlLoaderTest, CallsAfterTheLastSessionClosedAreUninitialized) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::MakeMockDriverRoot("t4-2x", dir.path()).ok());
  auto nvml = Nvml::Create(dir.path());
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  absl::StatusOr<Session> session = (*nvml)->Open();
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<Device> gpu = session->DeviceByIndex(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_TRUE(session->Close().ok());

  absl::StatusOr<std::string> name = gpu->Name();
  ASSERT_FALSE(name.ok());
  EXPECT_TRUE(IsNvmlError(name.status(), ReturnCode::kUninitialized));
  EXPECT_EQ(name.status().message(), "nvmlDeviceGetName: uninitialized");

  absl::StatusOr<unsigned int> count = session->DeviceCount();
  ASSERT_FALSE(count.ok());
  EXPECT_TRUE(IsNvmlError(count.status(), ReturnCode::kUninitialized));
  EXPECT_EQ(count.status().message(), "nvmlDeviceGetCount_v2: nvml session is closed");
  EXPECT_TRUE(session->Close().ok());  // idempotent
}

TEST(NvmlLoaderTest, SessionsAreReferenceCounted) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::MakeMockDriverRoot("t4-2x", dir.path()).ok());
  auto nvml = Nvml::Create(dir.path());
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  absl::StatusOr<Session> outer = (*nvml)->Open();
  ASSERT_TRUE(outer.ok());
  {
    absl::StatusOr<Session> inner = (*nvml)->Open();
    ASSERT_TRUE(inner.ok());
    Session moved = *std::move(inner);  // moving does not end the session
    EXPECT_TRUE(moved.DeviceCount().ok());
  }
  // The inner session's shutdown left the outer one working.
  absl::StatusOr<Device> gpu = outer->DeviceByIndex(1);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_TRUE(gpu->Uuid().ok());
}

TEST(NvmlLoaderTest, ForcedErrorsReachTheCaller) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::MakeMockDriverRoot("t4-2x", dir.path()).ok());
  ::setenv("MOCK_NVML_FORCED_ERRORS", "nvmlDeviceGetMemoryInfo_v2=3,nvmlDeviceGetBrand=15", 1);
  auto nvml = Nvml::Create(dir.path());
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  absl::StatusOr<Session> session = (*nvml)->Open();
  ::unsetenv("MOCK_NVML_FORCED_ERRORS");
  ASSERT_TRUE(session.ok()) << session.status();
  Device gpu = *session->DeviceByIndex(0);
  EXPECT_TRUE(IsNotSupported(gpu.Memory().status()));
  EXPECT_EQ(gpu.Memory().status().message(), "nvmlDeviceGetMemoryInfo_v2: not supported");
  EXPECT_TRUE(IsNvmlError(gpu.Brand().status(), ReturnCode::kGpuIsLost));
  EXPECT_EQ(gpu.Brand().status().message(), "nvmlDeviceGetBrand: gpu is lost");
}

}  // namespace
}  // namespace dra::nvml
