// The public Go driver's demo and documentation examples (docs/compatibility.md "Examples"),
// written as the manifests users apply; the opaque parameters are taken from them as the plugin and
// the webhook see them, and must decode to what the Go driver makes of them.

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/api/config.h"
#include "lib/api/consumable_shares.h"
#include "lib/api/mps_limits.h"
#include "lib/api/test_util.h"
#include "lib/k8s/yaml_json.h"

namespace dra::api {
namespace {

using ::dra::api::testing::Gates;

// The manifest as kubectl sends it; a malformed one fails the test.
nlohmann::json FromYaml(const char* yaml) {
  absl::StatusOr<nlohmann::json> j = k8s::YamlToJson(yaml);
  EXPECT_TRUE(j.ok()) << j.status();
  return j.ok() ? *j : nlohmann::json();
}

// The opaque parameters for driver gpu.nvidia.com in a ResourceClaim or ResourceClaimTemplate.
std::vector<nlohmann::json> GpuParameters(const char* manifest) {
  nlohmann::json object = FromYaml(manifest);
  const nlohmann::json& spec =
      object["kind"] == "ResourceClaimTemplate" ? object["spec"]["spec"] : object["spec"];
  std::vector<nlohmann::json> out;
  for (const nlohmann::json& config : spec["devices"]["config"]) {
    if (config["opaque"]["driver"] == "gpu.nvidia.com")
      out.push_back(config["opaque"]["parameters"]);
  }
  return out;
}

constexpr char kGpuTestMps[] = R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {namespace: gpu-test-mps, name: shared-gpu}
spec:
  spec:
    devices:
      requests:
      - name: mps-gpu
        exactly: {deviceClassName: gpu.nvidia.com}
      config:
      - requests: ["mps-gpu"]
        opaque:
          driver: gpu.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: GpuConfig
            sharing:
              strategy: MPS
              mpsConfig:
                defaultActiveThreadPercentage: 50
                defaultPinnedDeviceMemoryLimit: 10Gi
)";

TEST(ApiExamplesTest, GpuTestMps) {
  auto gates = Gates("MPSSupport=true");
  std::vector<nlohmann::json> params = GpuParameters(kGpuTestMps);
  ASSERT_EQ(params.size(), 1u);
  absl::StatusOr<Config> config = DecodeOpaqueConfig(params[0], *gates);
  ASSERT_TRUE(config.ok()) << config.status();
  const MpsConfig& mps = *std::get<GpuConfig>(*config).sharing->mps_config;
  EXPECT_EQ(mps.default_active_thread_percentage, 50);
  auto limits = ResolvePinnedMemoryLimits(mps, {"GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c"});
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_EQ(FormatMiB(limits->at("GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c")), "10240M");

  // Without the gate, the Go driver's message.
  absl::StatusOr<Config> off = DecodeOpaqueConfig(params[0], *Gates());
  ASSERT_FALSE(off.ok());
  EXPECT_EQ(off.status().message(),
            "sharing.strategy: \"MPS\" is selected as the GPU sharing strategy, but the "
            "\"MPSSupport\" feature gate is not enabled");
  // And never with consumable shares.
  EXPECT_FALSE(CheckConsumableSharesAllowSharing(
                   *config, ConsumableShares{.mode = ConsumableShares::Mode::kUnlimited})
                   .ok());
}

// gpu-test3 style: one claim shared by several pods, time-sliced with a long interval.
constexpr char kTimeSlicedClaim[] = R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {namespace: gpu-test3, name: single-gpu}
spec:
  devices:
    requests:
    - name: ts-gpu
      exactly: {deviceClassName: gpu.nvidia.com}
    config:
    - requests: ["ts-gpu"]
      opaque:
        driver: gpu.nvidia.com
        parameters:
          apiVersion: resource.nvidia.com/v1beta1
          kind: GpuConfig
          sharing:
            strategy: TimeSlicing
            timeSlicingConfig:
              interval: Long
)";

TEST(ApiExamplesTest, TimeSlicedSharedClaim) {
  auto gates = Gates("TimeSlicingSettings=true");
  std::vector<nlohmann::json> params = GpuParameters(kTimeSlicedClaim);
  ASSERT_EQ(params.size(), 1u);
  absl::StatusOr<Config> config = DecodeOpaqueConfig(params[0], *gates);
  ASSERT_TRUE(config.ok()) << config.status();
  const GpuSharing& sharing = *std::get<GpuConfig>(*config).sharing;
  EXPECT_EQ(sharing.strategy, SharingStrategy::kTimeSlicing);
  EXPECT_EQ(TimeSliceIntervalValue(*sharing.time_slicing_config->interval), 3);
  EXPECT_FALSE(DecodeOpaqueConfig(params[0], *Gates()).ok());
}

// The API reference's examples: time-slicing with interval Default, MIG time-slicing and MPS.
TEST(ApiExamplesTest, ReferenceDocExamples) {
  auto gates = Gates("TimeSlicingSettings=true,MPSSupport=true");
  absl::StatusOr<Config> ts = DecodeOpaqueConfig(FromYaml(R"(
apiVersion: resource.nvidia.com/v1beta1
kind: GpuConfig
sharing:
  strategy: TimeSlicing
  timeSlicingConfig:
    interval: Default
)"),
                                                 *gates);
  ASSERT_TRUE(ts.ok()) << ts.status();
  EXPECT_EQ(std::get<GpuConfig>(*ts).sharing->time_slicing_config->interval,
            TimeSliceInterval::kDefault);

  absl::StatusOr<Config> mps = DecodeOpaqueConfig(FromYaml(R"(
apiVersion: resource.nvidia.com/v1beta1
kind: GpuConfig
sharing:
  strategy: MPS
  mpsConfig:
    defaultActiveThreadPercentage: 50
    defaultPinnedDeviceMemoryLimit: "4Gi"
    defaultPerDevicePinnedMemoryLimit:
      "0": "2Gi"
)"),
                                                  *gates);
  ASSERT_TRUE(mps.ok()) << mps.status();
  auto limits = ResolvePinnedMemoryLimits(*std::get<GpuConfig>(*mps).sharing->mps_config,
                                          {"GPU-bbbb", "GPU-aaaa"});
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_EQ(*limits, (std::map<std::string, int64_t>{{"GPU-aaaa", 2048}, {"GPU-bbbb", 4096}}));

  absl::StatusOr<Config> mig_ts = DecodeOpaqueConfig(FromYaml(R"(
apiVersion: resource.nvidia.com/v1beta1
kind: MigDeviceConfig
sharing:
  strategy: TimeSlicing
)"),
                                                     *gates);
  ASSERT_TRUE(mig_ts.ok()) << mig_ts.status();
  // Written for the public driver: no interval, and none after Normalize (nothing is set).
  EXPECT_EQ(std::get<MigDeviceConfig>(*mig_ts).sharing->time_slicing_config, std::nullopt);

  absl::StatusOr<Config> mig_long = DecodeOpaqueConfig(FromYaml(R"(
apiVersion: resource.nvidia.com/v1beta1
kind: MigDeviceConfig
sharing:
  strategy: TimeSlicing
  timeSlicingConfig:
    interval: Long
)"),
                                                       *gates);
  ASSERT_TRUE(mig_long.ok()) << mig_long.status();
  EXPECT_EQ(std::get<MigDeviceConfig>(*mig_long).sharing->time_slicing_config,
            TimeSlicingConfig{TimeSliceInterval::kLong});

  absl::StatusOr<Config> mig_mps = DecodeOpaqueConfig(FromYaml(R"(
apiVersion: resource.nvidia.com/v1beta1
kind: MigDeviceConfig
sharing:
  strategy: MPS
  mpsConfig:
    defaultActiveThreadPercentage: 50
)"),
                                                      *gates);
  ASSERT_TRUE(mig_mps.ok()) << mig_mps.status();
  EXPECT_EQ(
      std::get<MigDeviceConfig>(*mig_mps).sharing->mps_config->default_active_thread_percentage,
      50);
}

constexpr char kGpuTest5[] = R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {namespace: gpu-test5, name: multiple-gpus}
spec:
  spec:
    devices:
      requests:
      - name: ts-gpu
        exactly: {deviceClassName: gpu.nvidia.com}
      - name: mps-gpu
        exactly: {deviceClassName: gpu.nvidia.com}
      config:
      - requests: ["ts-gpu"]
        opaque:
          driver: gpu.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: GpuConfig
            sharing:
              strategy: TimeSlicing
              timeSlicingConfig:
                interval: Long
      - requests: ["mps-gpu"]
        opaque:
          driver: gpu.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: GpuConfig
            sharing:
              strategy: MPS
              mpsConfig:
                defaultActiveThreadPercentage: 50
                defaultPinnedDeviceMemoryLimit: 10Gi
)";

TEST(ApiExamplesTest, GpuTest5MixesTimeSlicingAndMps) {
  auto gates = Gates("TimeSlicingSettings=true,MPSSupport=true");
  std::vector<nlohmann::json> params = GpuParameters(kGpuTest5);
  ASSERT_EQ(params.size(), 2u);
  absl::StatusOr<Config> ts = DecodeOpaqueConfig(params[0], *gates);
  absl::StatusOr<Config> mps = DecodeOpaqueConfig(params[1], *gates);
  ASSERT_TRUE(ts.ok()) << ts.status();
  ASSERT_TRUE(mps.ok()) << mps.status();
  EXPECT_EQ(std::get<GpuConfig>(*ts).sharing->time_slicing_config->interval,
            TimeSliceInterval::kLong);
  EXPECT_FALSE(std::get<GpuConfig>(*ts).sharing->mps_config.has_value());
  const MpsConfig& m = *std::get<GpuConfig>(*mps).sharing->mps_config;
  EXPECT_EQ(m.default_active_thread_percentage, 50);
  EXPECT_EQ(QuantityToMiB(*m.default_pinned_device_memory_limit), 10240);

  // With only one of the two gates, the other request's config fails.
  EXPECT_TRUE(DecodeOpaqueConfig(params[0], *Gates("TimeSlicingSettings=true")).ok());
  EXPECT_FALSE(DecodeOpaqueConfig(params[1], *Gates("TimeSlicingSettings=true")).ok());
}

constexpr char kGpuTestVfioConfig[] = R"(
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {namespace: gpu-test-vfio-config, name: vfio-gpu}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: vfio.gpu.nvidia.com}
      config:
      - requests: ["gpu"]
        opaque:
          driver: gpu.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: VfioDeviceConfig
            iommu:
              backendPolicy: LegacyOnly
              enableAPIDevice: true
)";

TEST(ApiExamplesTest, GpuTestVfioConfig) {
  std::vector<nlohmann::json> params = GpuParameters(kGpuTestVfioConfig);
  ASSERT_EQ(params.size(), 1u);
  // Decoded without gates, as in Go (the gate PassthroughSupport cannot be enabled in this
  // version; whether the kind is usable is CheckGpuConfigKind's question).
  absl::StatusOr<Config> config = DecodeOpaqueConfig(params[0], *Gates());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(std::get<VfioDeviceConfig>(*config).iommu,
            (IommuConfig{IommuBackendPolicy::kLegacyOnly, true}));
}

// What the compute-domain controller writes into the channel and daemon claim templates.
TEST(ApiExamplesTest, ComputeDomainControllerConfigs) {
  auto gates = Gates();
  absl::StatusOr<Config> channel = DecodeOpaqueConfig(FromYaml(R"(
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomainChannelConfig
domainID: 3f1e9c2a-0b7d-4c41-9e55-2b8f6f0d1a77
allocationMode: Single
)"),
                                                      *gates);
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_FALSE(std::get<ComputeDomainChannelConfig>(*channel).AllChannels());
  absl::StatusOr<Config> daemon = DecodeOpaqueConfig(FromYaml(R"(
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomainDaemonConfig
domainID: 3f1e9c2a-0b7d-4c41-9e55-2b8f6f0d1a77
)"),
                                                     *gates);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_EQ(std::get<ComputeDomainDaemonConfig>(*daemon).domain_id,
            "3f1e9c2a-0b7d-4c41-9e55-2b8f6f0d1a77");
}

}  // namespace
}  // namespace dra::api
