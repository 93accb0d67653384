// Which kinds driver gpu.nvidia.com applies in this version (the webhook refuses the others).

#include "lib/api/gpu_kinds.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/api/config.h"
#include "lib/api/errors.h"
#include "lib/api/test_util.h"

namespace dra::api {
namespace {

using ::dra::api::testing::Gates;
using ::dra::api::testing::Params;

struct KindRow {
  std::string name;
  std::string params;
  std::string message;  // "" = usable
};

const KindRow kKindRows[] = {
    {"Gpu", Params("GpuConfig"), ""},
    {"Mig", Params("MigDeviceConfig"), ""},
    {"Vfio", Params("VfioDeviceConfig"), ""},
    {"Channel", Params("ComputeDomainChannelConfig", R"(,"domainID":"d")"),
     "kind: ComputeDomainChannelConfig does not configure devices of driver gpu.nvidia.com "
     "(allowed kinds for driver gpu.nvidia.com: GpuConfig, MigDeviceConfig, VfioDeviceConfig)"},
    {"Daemon", Params("ComputeDomainDaemonConfig", R"(,"domainID":"d")"),
     "kind: ComputeDomainDaemonConfig does not configure devices of driver gpu.nvidia.com "
     "(allowed kinds for driver gpu.nvidia.com: GpuConfig, MigDeviceConfig, VfioDeviceConfig)"},
};

class ApiGpuKindTest : public ::testing::TestWithParam<KindRow> {};

TEST_P(ApiGpuKindTest, UsableOnlyWhenTheGpuPluginAppliesIt) {
  const KindRow& row = GetParam();
  absl::StatusOr<Config> config = DecodeOpaqueConfigText(row.params, *Gates());
  ASSERT_TRUE(config.ok()) << config.status();
  absl::Status status = CheckGpuConfigKind(*config);
  if (row.message.empty()) {
    EXPECT_TRUE(status.ok()) << status;
    return;
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), row.message);
  EXPECT_TRUE(IsPermanentConfigError(status));
}

INSTANTIATE_TEST_SUITE_P(Rows, ApiGpuKindTest, ::testing::ValuesIn(kKindRows),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dra::api
