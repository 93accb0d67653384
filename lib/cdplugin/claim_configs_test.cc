// Config selection and decoding for compute-domain claims (claim_configs.h), the checkpoint
// record codec (prepared_claim.h) and the retry classification (errors.h).

#include "lib/cdplugin/claim_configs.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/cdplugin/errors.h"
#include "lib/cdplugin/prepared_claim.h"
#include "lib/common/status.h"

namespace dra::cdplugin {
namespace {

using ::testing::HasSubstr;

k8s::AllocationResult Allocation(const nlohmann::json& devices) {
  auto claim = k8s::ResourceClaim::FromJson(
      {{"apiVersion", "resource.k8s.io/v1"},
       {"kind", "ResourceClaim"},
       {"metadata", {{"name", "c"}, {"namespace", "ns"}, {"uid", "u"}}},
       {"spec", nlohmann::json::object()},
       {"status", {{"allocation", {{"devices", devices}}}}}});
  EXPECT_TRUE(claim.ok()) << claim.status();
  return *claim->status.allocation;
}

nlohmann::json Result(const std::string& request, const std::string& device,
                      const std::string& driver = kDriverName) {
  return {{"request", request}, {"driver", driver}, {"pool", "node-a"}, {"device", device}};
}

nlohmann::json Config(const std::string& source, const nlohmann::json& parameters,
                      const std::vector<std::string>& requests = {}) {
  nlohmann::json c = {{"source", source},
                      {"opaque", {{"driver", kDriverName}, {"parameters", parameters}}}};
  if (!requests.empty()) c["requests"] = requests;
  return c;
}

nlohmann::json Channel(const std::string& domain, const std::string& mode = "") {
  nlohmann::json j = {{"apiVersion", "resource.nvidia.com/v1beta1"},
                      {"kind", "ComputeDomainChannelConfig"},
                      {"domainID", domain}};
  if (!mode.empty()) j["allocationMode"] = mode;
  return j;
}

nlohmann::json Daemon(const std::string& domain) {
  return {{"apiVersion", "resource.nvidia.com/v1beta1"},
          {"kind", "ComputeDomainDaemonConfig"},
          {"domainID", domain}};
}

TEST(ClaimConfigsTest, ChannelFromClaimConfig) {
  auto devices = ConfigureDevices(
      Allocation({{"results", {Result("channel", "channel-0")}},
                  {"config", {Config("FromClaim", Channel("cd-1", "All"), {"channel"})}}}),
      true);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].type, DeviceType::kChannel);
  EXPECT_EQ((*devices)[0].id, 0);
  EXPECT_EQ((*devices)[0].domain_id(), "cd-1");
  EXPECT_TRUE(std::get<api::ComputeDomainChannelConfig>((*devices)[0].config).AllChannels());
}

TEST(ClaimConfigsTest, ClaimConfigWinsOverClassAndOtherDriversAreSkipped) {
  auto devices = ConfigureDevices(
      Allocation({{"results", {Result("d", "daemon-0"), Result("gpu", "gpu-0", "gpu.nvidia.com")}},
                  {"config",
                   {Config("FromClaim", Daemon("from-claim")),
                    Config("FromClass", Daemon("from-class"))}}}),
      true);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].type, DeviceType::kDaemon);
  EXPECT_EQ((*devices)[0].domain_id(), "from-claim");
}

TEST(ClaimConfigsTest, UnknownFieldIsPermanentAndNamesTheField) {
  nlohmann::json bad = Channel("cd-1");
  bad["unexpectedField"] = 1;
  auto devices = ConfigureDevices(Allocation({{"results", {Result("channel", "channel-0")}},
                                              {"config", {Config("FromClaim", bad)}}}),
                                  true);
  ASSERT_FALSE(devices.ok());
  EXPECT_TRUE(IsPermanent(devices.status()));
  EXPECT_THAT(devices.status().message(), HasSubstr("unknown field \"unexpectedField\""));
  EXPECT_THAT(devices.status().message(), HasSubstr("strict decoding error"));
  EXPECT_THAT(devices.status().message(), HasSubstr("config[0]"));
  // Unprepare's lenient decoding accepts it.
  auto lenient = ConfigureDevices(Allocation({{"results", {Result("channel", "channel-0")}},
                                              {"config", {Config("FromClaim", bad)}}}),
                                  false);
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  EXPECT_EQ((*lenient)[0].domain_id(), "cd-1");
}

TEST(ClaimConfigsTest, PermanentErrors) {
  auto empty_domain =
      ConfigureDevices(Allocation({{"results", {Result("channel", "channel-0")}}}), true);
  ASSERT_FALSE(empty_domain.ok());
  EXPECT_TRUE(IsPermanent(empty_domain.status()));
  EXPECT_THAT(empty_domain.status().message(), HasSubstr("domainID cannot be empty"));

  auto mismatch =
      ConfigureDevices(Allocation({{"results", {Result("channel", "channel-0")}},
                                   {"config", {Config("FromClaim", Daemon("cd-1"), {"channel"})}}}),
                       true);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_TRUE(IsPermanent(mismatch.status()));
  EXPECT_THAT(mismatch.status().message(),
              HasSubstr("cannot apply ComputeDomainDaemonConfig to request channel"));

  auto unknown_device =
      ConfigureDevices(Allocation({{"results", {Result("x", "gpu-0")}},
                                   {"config", {Config("FromClaim", Channel("cd-1"))}}}),
                       true);
  ASSERT_FALSE(unknown_device.ok());
  EXPECT_THAT(unknown_device.status().message(), HasSubstr("not allocatable: gpu-0"));

  auto gpu_kind = ConfigureDevices(
      Allocation({{"results", {Result("channel", "channel-0")}},
                  {"config",
                   {Config("FromClaim", {{"apiVersion", "resource.nvidia.com/v1beta1"},
                                         {"kind", "GpuConfig"}})}}}),
      true);
  ASSERT_FALSE(gpu_kind.ok());
  EXPECT_THAT(gpu_kind.status().message(), HasSubstr("GpuConfig is not a config of driver"));

  nlohmann::json no_opaque = {{"source", "FromClaim"}};
  auto missing = ConfigureDevices(
      Allocation({{"results", {Result("channel", "channel-0")}}, {"config", {no_opaque}}}), true);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("only opaque parameters are supported"));
}

TEST(ClaimConfigsTest, SubrequestMatchesItsBaseRequest) {
  auto devices =
      ConfigureDevices(Allocation({{"results", {Result("main/channel", "channel-0")}},
                                   {"config", {Config("FromClaim", Channel("cd-2"), {"main"})}}}),
                       true);
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ((*devices)[0].domain_id(), "cd-2");
}

TEST(ErrorsTest, Classification) {
  EXPECT_TRUE(IsPermanent(PermanentError("x")));
  EXPECT_TRUE(IsPermanent(Annotate(PermanentError("x"), "context")));
  EXPECT_FALSE(IsPermanent(RetryableError("not ready")));
  EXPECT_FALSE(IsPermanent(absl::UnavailableError("api down")));
  EXPECT_FALSE(IsPermanent(absl::OkStatus()));
}

TEST(PreparedClaimTest, RoundTripIncludingAborted) {
  ClaimRecord r;
  r.phase = Phase::kAborted;
  r.aborted_at = absl::FromUnixSeconds(1'700'000'123);
  r.devices.push_back(
      {.kubelet = {.request_names = {"channel"},
                   .pool_name = "node-a",
                   .device_name = "channel-0",
                   .cdi_device_ids = {"k8s.compute-domain.nvidia.com/claim=u-channel-0"}},
       .type = DeviceType::kChannel,
       .id = 0,
       .domain_id = "cd-1",
       .allocation_mode = "All"});
  checkpoint::PreparedClaim c = ToCheckpoint(r, "u", "ns", "c", nullptr);
  EXPECT_EQ(c.state, checkpoint::ClaimState::kPrepareStarted);  // aborted is stored as started
  EXPECT_EQ(c.prepared_devices["phase"], "PrepareAborted");
  auto back = DecodeRecord(c);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);

  r.phase = Phase::kCompleted;
  c = ToCheckpoint(r, "u", "ns", "c", nullptr);
  EXPECT_EQ(c.state, checkpoint::ClaimState::kPrepareCompleted);
  EXPECT_EQ(DecodeRecord(c)->phase, Phase::kCompleted);

  c.prepared_devices["devices"][0]["type"] = "gpu";
  EXPECT_THAT(DecodeRecord(c).status().message(), HasSubstr("unknown value \"gpu\""));

  // A member of the wrong type is an error naming its path (checked reads, json_access.h).
  c.prepared_devices["devices"][0]["type"] = "channel";
  c.prepared_devices["devices"][0]["id"] = "7";
  EXPECT_EQ(DecodeRecord(c).status().message(),
            "checkpoint entry of claim u: preparedDevices.devices[0].id: expected integer, got "
            "string");
  c.prepared_devices["devices"][0]["id"] = 7;
  c.prepared_devices["devices"][0]["cdiDeviceIDs"] = {"a", 5};
  EXPECT_EQ(DecodeRecord(c).status().message(),
            "checkpoint entry of claim u: preparedDevices.devices[0].cdiDeviceIDs[1]: expected "
            "string, got integer");
  c.prepared_devices["devices"] = {5};
  EXPECT_EQ(DecodeRecord(c).status().message(),
            "checkpoint entry of claim u: preparedDevices.devices[0]: expected object, got "
            "integer");
}

}  // namespace
}  // namespace dra::cdplugin
