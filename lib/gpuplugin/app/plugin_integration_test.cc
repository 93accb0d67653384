// The gpu-kubelet-plugin binary against the real local control plane: the slices it publishes per
// mock profile, allocation by the real kube-scheduler, prepare/unprepare through its DRA socket,
// device status and fabric partitions. Restarts, kills, health and metrics:
// plugin_lifecycle_integration_test.cc.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <set>
#include <sstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/gpuplugin/app/plugin_integration_test_fixture.h"
#include "lib/k8s/client.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/objects_resource.h"
#include "proto/dra/v1/api.grpc.pb.h"
#include "test/doubles/testing/mock_driver_root.h"
#include "test/support/plugin_process.h"

namespace dra::gpu {
namespace {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;
using dra::k8s::Client;
using dra::k8s::ResourceClaim;
using dra::k8s::ResourceSlice;

using testing::PluginIntegrationTest;

struct ProfileCase {
  std::string profile;
  std::vector<std::string> devices;
  std::set<std::string> attributes_of_first;  // exact attribute keys of devices[0]
};

TEST_F(PluginIntegrationTest, PublishesTheExpectedSlicesForEveryProfile) {
  const std::set<std::string> gpu_attrs = {"type",
                                           "uuid",
                                           "productName",
                                           "brand",
                                           "architecture",
                                           "cudaComputeCapability",
                                           "driverVersion",
                                           "cudaDriverVersion",
                                           "resource.kubernetes.io/pciBusID"};
  std::set<std::string> mig_attrs = gpu_attrs;
  mig_attrs.insert({"parentUUID", "profile"});
  const ProfileCase cases[] = {
      {"h100-8x",
       {"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"},
       gpu_attrs},
      {"t4-2x", {"gpu-0", "gpu-1"}, gpu_attrs},
      {"a100-mig-4x",
       {"gpu-0-mig-1g5gb-19-0", "gpu-0-mig-1g5gb-19-1", "gpu-0-mig-2g10gb-14-2",
        "gpu-0-mig-3g20gb-9-4", "gpu-1-mig-1g5gb-19-0", "gpu-1-mig-1g5gb-19-1",
        "gpu-1-mig-2g10gb-14-2", "gpu-1-mig-3g20gb-9-4", "gpu-2-mig-3g20gb-9-4"},
       mig_attrs},
      {"gb200-4x", {"gpu-0", "gpu-1", "gpu-2", "gpu-3"}, gpu_attrs},
  };
  for (const ProfileCase& c : cases) {
    SCOPED_TRACE(c.profile);
    StartPlugin(c.profile);
    std::vector<ResourceSlice> slices = WaitForSlices();
    ASSERT_EQ(slices.size(), 1u);
    std::vector<std::string> names;
    for (const auto& d : slices[0].spec.devices) names.push_back(d.name);
    EXPECT_EQ(names, c.devices);
    std::set<std::string> keys;
    for (const auto& [k, v] : slices[0].spec.devices[0].attributes) keys.insert(k);
    // addressingMode depends on the profile's architecture; everything else is exact.
    keys.erase("addressingMode");
    EXPECT_EQ(keys, c.attributes_of_first);
    plugin_->Stop();
    for (const auto& s : slices)
      (void)client_->Delete(ResourceSlice::kResource, "", s.metadata.name);
    std::filesystem::remove_all(tmp_.path() + "/root");
  }
}

TEST_F(PluginIntegrationTest, SchedulerAllocatesAndPrepareWritesTheSpec) {
  StartPlugin("h100-8x");
  ASSERT_FALSE(WaitForSlices().empty());
  // The selector of the chart's gpu.nvidia.com DeviceClass (templates/deviceclasses.yaml).
  nlohmann::json dc = {{"apiVersion", "resource.k8s.io/v1"},
                       {"kind", "DeviceClass"},
                       {"metadata", {{"name", "gpu.nvidia.com"}}},
                       {"spec",
                        {{"selectors",
                          {{{"cel",
                             {{"expression",
                               "device.driver == 'gpu.nvidia.com' && "
                               "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}}}}}}}};
  // Created only where it is missing (a fresh cluster), and then removed again, so that the
  // cluster is left as this test found it: later tests and the e2e apply the real class.
  const bool created_class = client_->Create(dra::k8s::DeviceClass::kResource, "", dc).ok();
  absl::Cleanup remove_class = [&] {
    if (created_class)
      (void)client_->Delete(dra::k8s::DeviceClass::kResource, "", "gpu.nvidia.com");
  };
  std::string claim = node_ + "-sched";
  nlohmann::json selector = {
      {"cel",
       {{"expression",
         "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')"}}}};
  nlohmann::json request = {
      {"name", "gpu"},
      {"exactly", {{"deviceClassName", "gpu.nvidia.com"}, {"selectors", {selector}}}}};
  nlohmann::json c = {{"apiVersion", "resource.k8s.io/v1"},
                      {"kind", "ResourceClaim"},
                      {"metadata", {{"name", claim}, {"namespace", "default"}}},
                      {"spec", {{"devices", {{"requests", {request}}}}}}};
  ASSERT_TRUE(client_->Create(ResourceClaim::kResource, "default", c).ok());
  claims_.push_back(claim);
  // A pod pinned to our node by its label; the node has no kubelet, so tolerate its taints.
  std::string pod = node_ + "-pod";
  nlohmann::json p = {{"apiVersion", "v1"},
                      {"kind", "Pod"},
                      {"metadata", {{"name", pod}, {"namespace", "default"}}},
                      {"spec",
                       {{"nodeSelector", {{"plugin-it", node_}}},
                        {"tolerations", {{{"operator", "Exists"}}}},
                        {"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", claim}}}},
                        {"containers",
                         {{{"name", "c"},
                           {"image", "localhost/dra-workload:v1"},
                           {"resources", {{"claims", {{{"name", "gpu"}}}}}}}}}}}};
  ASSERT_TRUE(client_->Create({"", "v1", "Pod", "pods", true}, "default", p).ok());
  pods_.push_back(pod);
  std::optional<ResourceClaim> allocated;
  for (int i = 0; i < 600 && !allocated; ++i) {
    auto got = client_->Get(ResourceClaim::kResource, "default", claim);
    if (got.ok()) {
      auto rc = ResourceClaim::FromJson(*got);
      if (rc.ok() && rc->status.allocation) allocated = *rc;
    }
    if (!allocated) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(allocated.has_value()) << "the scheduler did not allocate the claim";
  ASSERT_EQ(allocated->status.allocation->devices.results.size(), 1u);
  const auto& result = allocated->status.allocation->devices.results[0];
  EXPECT_EQ(result.driver, "gpu.nvidia.com");
  EXPECT_EQ(result.pool, node_);
  std::vector<std::string> ids;
  ASSERT_EQ(Prepare(claim, allocated->metadata.uid, &ids), "");
  EXPECT_THAT(ids, ::testing::ElementsAre(absl::StrCat(
                       "k8s.gpu.nvidia.com/claim=", allocated->metadata.uid, "-", result.device)));
  EXPECT_TRUE(SpecExists(allocated->metadata.uid));
  ASSERT_EQ(Unprepare(claim, allocated->metadata.uid), "");
  EXPECT_FALSE(SpecExists(allocated->metadata.uid));
}

// KEP-4817 status.devices: prepare writes this driver's entry (the GPU's UUID and product name, a
// Ready condition) under the field manager "gpu.nvidia.com/<node>"; another driver's entry on the
// same claim, written by its own manager, is left alone; unprepare removes ours only, and an
// unprepare after the claim was deleted succeeds.
TEST_F(PluginIntegrationTest, PrepareWritesDeviceStatusAndUnprepareRemovesIt) {
  StartPlugin("h100-8x");
  std::string uuid;
  for (const ResourceSlice& slice : WaitForSlices()) {
    for (const auto& d : slice.spec.devices) {
      if (d.name == "gpu-3") uuid = *d.attributes.at("uuid").string_value;
    }
  }
  ASSERT_FALSE(uuid.empty()) << "gpu-3 not published";
  const std::string name = node_ + "-status";
  nlohmann::json c = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", "default"}}},
      {"spec",
       {{"devices",
         {{"requests",
           {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}},
            {{"name", "nic"}, {"exactly", {{"deviceClassName", "nic.example.com"}}}}}}}}}}};
  auto created = client_->Create(ResourceClaim::kResource, "default", c);
  ASSERT_TRUE(created.ok()) << created.status();
  claims_.push_back(name);
  (*created)["status"] = {{"allocation",
                           {{"devices",
                             {{"results",
                               {{{"request", "gpu"},
                                 {"driver", "gpu.nvidia.com"},
                                 {"pool", node_},
                                 {"device", "gpu-3"}},
                                {{"request", "nic"},
                                 {"driver", "nic.example.com"},
                                 {"pool", node_},
                                 {"device", "eth1"}}}}}}}}};
  auto updated = client_->UpdateStatus(ResourceClaim::kResource, "default", *created);
  ASSERT_TRUE(updated.ok()) << updated.status();
  const std::string uid = (*updated)["metadata"]["uid"];
  // The other driver's entry, applied by its own manager.
  auto cfg = dra::k8s::LoadKubeconfig(dra::testing::AdminKubeconfig());
  ASSERT_TRUE(cfg.ok());
  auto nic = Client::Create(*cfg, {.qps = 0, .field_manager = "nic.example.com/" + node_});
  ASSERT_TRUE(nic.ok());
  nlohmann::json nic_entry = {{"driver", "nic.example.com"},
                              {"pool", node_},
                              {"device", "eth1"},
                              {"data", {{"mac", "aa:bb"}}}};
  auto applied = (*nic)->Apply(ResourceClaim::kResource, "default",
                               {{"apiVersion", "resource.k8s.io/v1"},
                                {"kind", "ResourceClaim"},
                                {"metadata", {{"name", name}, {"namespace", "default"}}},
                                {"status", {{"devices", {nic_entry}}}}},
                               true, "status");
  ASSERT_TRUE(applied.ok()) << applied.status();

  auto entries = [&](const std::string& driver) {
    std::vector<nlohmann::json> out;
    auto got = client_->Get(ResourceClaim::kResource, "default", name);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) return out;
    for (const auto& d : (*got)["status"].value("devices", nlohmann::json::array())) {
      if (d["driver"] == driver) out.push_back(d);
    }
    return out;
  };
  // The plugin writes and removes its entries in the background after the call returned
  // (device_status_queue.h): wait up to 10 s until `driver` has `n` entries.
  auto wait_entries = [&](const std::string& driver, size_t n) {
    for (int i = 0; i < 200 && entries(driver).size() != n; ++i) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    return entries(driver);
  };

  ASSERT_EQ(Prepare(name, uid), "");
  std::vector<nlohmann::json> ours = wait_entries("gpu.nvidia.com", 1);
  ASSERT_EQ(ours.size(), 1u);
  EXPECT_EQ(ours[0]["pool"], node_);
  EXPECT_EQ(ours[0]["device"], "gpu-3");
  EXPECT_EQ(ours[0]["data"]["uuid"], uuid);
  EXPECT_THAT(ours[0]["data"]["productName"].get<std::string>(),
              ::testing::StartsWith("NVIDIA H100"));
  ASSERT_EQ(ours[0]["conditions"].size(), 1u);
  EXPECT_EQ(ours[0]["conditions"][0]["type"], "Ready");
  EXPECT_EQ(ours[0]["conditions"][0]["status"], "True");
  EXPECT_EQ(ours[0]["conditions"][0]["reason"], "DevicePrepared");
  EXPECT_EQ(entries("nic.example.com").size(), 1u);
  auto got = client_->Get(ResourceClaim::kResource, "default", name);
  ASSERT_TRUE(got.ok());
  std::set<std::string> managers;
  for (const auto& m : (*got)["metadata"]["managedFields"]) managers.insert(m["manager"]);
  EXPECT_TRUE(managers.contains("gpu.nvidia.com/" + node_)) << (*got)["metadata"].dump();

  ASSERT_EQ(Unprepare(name, uid), "");
  EXPECT_TRUE(wait_entries("gpu.nvidia.com", 0).empty());
  ASSERT_EQ(entries("nic.example.com").size(), 1u);
  EXPECT_EQ(entries("nic.example.com")[0]["data"], nlohmann::json({{"mac", "aa:bb"}}));

  // Prepared again, then the claim is deleted before the unprepare: success.
  ASSERT_EQ(Prepare(name, uid), "");
  EXPECT_EQ(wait_entries("gpu.nvidia.com", 1).size(), 1u);
  ASSERT_TRUE(client_->Delete(ResourceClaim::kResource, "default", name).ok());
  for (int i = 0; i < 100; ++i) {
    if (absl::IsNotFound(client_->Get(ResourceClaim::kResource, "default", name).status())) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(Unprepare(name, uid), "");
  EXPECT_FALSE(SpecExists(uid));
}

// Gate FabricManagerPartitioning (docs/fabric-manager.md): the binary finds the fake NVSwitch
// under --host-root, loads the fake libnvfm.so.1 from the driver root, publishes the partition
// attributes, activates the partition of a claim's GPU at prepare, refuses a GPU that is no
// partition by itself, and deactivates at unprepare.
TEST_F(PluginIntegrationTest, FabricManagerPartitionOfAClaimIsActivatedAndDeactivated) {
  const std::string root = tmp_.path() + "/root";
  ASSERT_TRUE(dra::testing::MakeMockDriverRoot("h100-8x", root).ok());
  ASSERT_TRUE(dra::testing::InstallFakeFabricManager(root,
                                                     R"({"partitions": [
    {"id": 0, "gpus": [1, 2, 3, 4, 5, 6, 7, 8]}, {"id": 3, "gpus": [1, 2]}, {"id": 7, "gpus": [1]}
  ]})",
                                                     /*host_root=*/tmp_.path() + "/host")
                  .ok());
  plugin_ = std::make_unique<dra::testing::PluginProcess>(dra::testing::PluginProcessOptions{
      .node_name = node_,
      .driver_root = root,
      .work_dir = tmp_.path(),
      .extra_args = {"--sys-root=" + tmp_.path() + "/sys", "--host-root=" + tmp_.path() + "/host",
                     "--feature-gates=FabricManagerPartitioning=true"}});
  plugin_->Start();
  ASSERT_TRUE(plugin_->WaitForSocket()) << "no DRA socket; see " << plugin_->log();
  std::map<std::string, k8s::Device> devices;
  for (const ResourceSlice& s : WaitForSlices()) {
    for (const k8s::Device& d : s.spec.devices) devices[d.name] = d;
  }
  ASSERT_TRUE(devices.contains("gpu-0") && devices.contains("gpu-1"));
  EXPECT_EQ(devices["gpu-0"].attributes.at("gpuModuleID").int_value, 1);
  EXPECT_EQ(devices["gpu-0"].attributes.at("partition1").int_value, 7);
  EXPECT_EQ(devices["gpu-0"].attributes.at("partition2").int_value, 3);
  EXPECT_EQ(devices["gpu-0"].attributes.at("partition8").int_value, 0);
  EXPECT_EQ(devices["gpu-1"].attributes.at("gpuModuleID").int_value, 2);
  EXPECT_FALSE(devices["gpu-1"].attributes.contains("partition1"));
  const std::string state = root + "/var/lib/mock-nvfm/state.json";
  auto active = [&] {
    std::ifstream in(state);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    return j.is_object() ? j.value("active", nlohmann::json::array()) : nlohmann::json::array();
  };

  const std::string uid = AllocatedClaim("fm-one", "gpu-0");
  ASSERT_EQ(Prepare("fm-one", uid), "");
  EXPECT_EQ(active(), nlohmann::json({7}));
  const std::string other = AllocatedClaim("fm-none", "gpu-1");
  EXPECT_THAT(Prepare("fm-none", other),
              ::testing::HasSubstr("fabric manager: GPU module set [2] does not match any FM "
                                   "partition; refusing partition activation"));
  EXPECT_FALSE(SpecExists(other));
  EXPECT_EQ(active(), nlohmann::json({7}));
  ASSERT_EQ(Unprepare("fm-one", uid), "");
  EXPECT_EQ(active(), nlohmann::json::array());
}

}  // namespace
}  // namespace dra::gpu
