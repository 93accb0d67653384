#include "lib/nvml/errors.h"

#include "gtest/gtest.h"
#include "lib/common/status.h"
#include "lib/nvml/types.h"

namespace dra::nvml {
namespace {

TEST(NvmlErrorsTest, MessageNamesFunctionAndLowerCasedText) {
  const absl::Status s =
      MakeNvmlError(ReturnCode::kNotSupported, "nvmlDeviceGetMemoryInfo", "Not Supported");
  EXPECT_EQ(s.message(), "nvmlDeviceGetMemoryInfo: not supported");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(NvmlReturnCode(s), ReturnCode::kNotSupported);
  EXPECT_TRUE(IsNotSupported(s));
}

TEST(NvmlErrorsTest, TrailingPeriodIsDropped) {
  const absl::Status s = MakeNvmlError(ReturnCode::kOperatingSystem, "nvmlInit_v2",
                                       "The operating system has blocked the request.");
  EXPECT_EQ(s.message(), "nvmlInit_v2: the operating system has blocked the request");
}

TEST(NvmlErrorsTest, EmptyTextFallsBackToTheNumber) {
  EXPECT_EQ(MakeNvmlError(ReturnCode::kUnknown, "nvmlShutdown", "").message(),
            "nvmlShutdown: nvml error 999");
}

TEST(NvmlErrorsTest, CodeSurvivesAnnotation) {
  const absl::Status s = Annotate(
      MakeNvmlError(ReturnCode::kInUse, "nvmlGpuInstanceDestroy", "In use by another client"),
      "destroy GPU instance 3 on GPU-1");
  EXPECT_TRUE(IsNvmlError(s, ReturnCode::kInUse));
  EXPECT_EQ(s.message(),
            "destroy GPU instance 3 on GPU-1: nvmlGpuInstanceDestroy: in use by another client");
}

TEST(NvmlErrorsTest, StatusCodeMapping) {
  struct Case {
    ReturnCode code;
    absl::StatusCode want;
  };
  const Case cases[] = {
      {ReturnCode::kNotFound, absl::StatusCode::kNotFound},
      {ReturnCode::kFunctionNotFound, absl::StatusCode::kUnimplemented},
      {ReturnCode::kInvalidArgument, absl::StatusCode::kInvalidArgument},
      {ReturnCode::kNoPermission, absl::StatusCode::kPermissionDenied},
      {ReturnCode::kInsufficientResources, absl::StatusCode::kResourceExhausted},
      {ReturnCode::kTimeout, absl::StatusCode::kDeadlineExceeded},
      {ReturnCode::kInUse, absl::StatusCode::kUnavailable},
      {ReturnCode::kDriverNotLoaded, absl::StatusCode::kUnavailable},
      {ReturnCode::kGpuIsLost, absl::StatusCode::kUnavailable},
      {ReturnCode::kUninitialized, absl::StatusCode::kFailedPrecondition},
      {ReturnCode::kResetRequired, absl::StatusCode::kFailedPrecondition},
      {ReturnCode::kUnknown, absl::StatusCode::kInternal},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ToStatusCode(c.code), c.want) << static_cast<int>(c.code);
  }
}

TEST(NvmlErrorsTest, PlainStatusHasNoReturnCode) {
  EXPECT_FALSE(NvmlReturnCode(absl::InternalError("x")).has_value());
  EXPECT_FALSE(IsNotSupported(absl::OkStatus()));
}

TEST(NvmlTypesTest, Names) {
  EXPECT_EQ(ArchitectureName(Architecture::kAda), "Ada Lovelace");
  EXPECT_EQ(ArchitectureName(Architecture::kBlackwell), "Blackwell");
  EXPECT_EQ(ArchitectureName(Architecture::kRubin), "Rubin");
  EXPECT_EQ(ArchitectureName(static_cast<Architecture>(42)), "Unknown");
  EXPECT_EQ(BrandName(Brand::kNvidia), "Nvidia");
  EXPECT_EQ(BrandName(Brand::kNvidiaVpc), "NvidiaVPC");
  EXPECT_EQ(BrandName(static_cast<Brand>(99)), "Unknown");
  EXPECT_EQ(AddressingModeName(AddressingMode::kAts), "ATS");
}

TEST(NvmlTypesTest, FabricClusterUuid) {
  FabricInfo f;
  EXPECT_TRUE(f.ClusterUuidIsZero());
  for (int i = 0; i < 16; ++i) f.cluster_uuid[i] = static_cast<uint8_t>(0x10 + i);
  EXPECT_FALSE(f.ClusterUuidIsZero());
  EXPECT_EQ(f.ClusterUuidString(), "10111213-1415-1617-1819-1a1b1c1d1e1f");
}

}  // namespace
}  // namespace dra::nvml
