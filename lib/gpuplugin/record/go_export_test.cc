// The way back to the public Go driver (go_export.h): what the exporter writes is read back by
// our own adoption (the checkpoint's Open with GoDevicesConverter, as the plugin does at start-up)
// into the same records, its checksums verify by the format's rules, and claims the Go format
// cannot express are refused with nothing written.

#include "lib/gpuplugin/record/go_export.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "lib/checkpoint/go_format.h"
#include "lib/checkpoint/go_test_files.h"
#include "lib/gpuplugin/prepare/device_state_test_fixture.h"

namespace dra::gpu {
namespace {

using ::testing::HasSubstr;
using OJson = nlohmann::ordered_json;

class GoExportTest : public DeviceStateTest {
 protected:
  std::string CheckpointPath() { return tmp_.path() + "/plugin/checkpoint.json"; }

  checkpoint::ClaimMap Claims() {
    auto claims = checkpoint_->List();
    EXPECT_TRUE(claims.ok()) << claims.status();
    return claims.value_or(checkpoint::ClaimMap{});
  }

  void Add(checkpoint::PreparedClaim claim) {
    ASSERT_TRUE(checkpoint_
                    ->Update([&](checkpoint::ClaimMap& claims) {
                      claims[claim.uid] = claim;
                      return absl::OkStatus();
                    })
                    .ok());
  }

  // Exports over our own checkpoint (where the public driver reads it), then reads it back as
  // the plugin does at start-up, and expects every claim back as it was, field for field.
  void ExpectRoundTrip() {
    const checkpoint::ClaimMap before = Claims();
    ASSERT_FALSE(before.empty());
    const std::string ours = *ReadFile(CheckpointPath());

    absl::StatusOr<GoExportResult> exported =
        ExportGoCheckpoint(CheckpointPath(), CheckpointPath());
    ASSERT_TRUE(exported.ok()) << exported.status();
    EXPECT_EQ(exported->claims, before.size());
    ASSERT_FALSE(exported->kept_ours.empty());
    EXPECT_EQ(*ReadFile(exported->kept_ours), ours);  // our file's bytes, for a way back
    const std::string go = *ReadFile(CheckpointPath());
    ASSERT_TRUE(checkpoint::LooksLikeGoCheckpoint(go)) << go;
    ASSERT_TRUE(checkpoint::DecodeGoCheckpoint(go).ok())
        << checkpoint::DecodeGoCheckpoint(go).status();

    Reopen();
    ASSERT_TRUE(checkpoint_->open_adoption().has_value()) << "not adopted: " << go;
    EXPECT_FALSE(checkpoint_->open_corruption().has_value());
    EXPECT_EQ(checkpoint_->open_adoption()->claims, before.size());
    const checkpoint::ClaimMap after = Claims();
    ASSERT_EQ(after.size(), before.size());
    for (const auto& [uid, was] : before) {
      SCOPED_TRACE(uid);
      ASSERT_EQ(after.count(uid), 1u);
      const checkpoint::PreparedClaim& now = after.at(uid);
      EXPECT_EQ(now.state, was.state);
      EXPECT_EQ(now.name, was.name);
      EXPECT_EQ(now.namespace_name, was.namespace_name);
      EXPECT_EQ(now.allocation, was.allocation);
      auto devices_was = PreparedDevicesFromJson(was.prepared_devices);
      auto devices_now = PreparedDevicesFromJson(now.prepared_devices);
      ASSERT_TRUE(devices_was.ok() && devices_now.ok());
      EXPECT_EQ(PreparedDevicesToJson(*devices_now), PreparedDevicesToJson(*devices_was));
      EXPECT_TRUE(*devices_now == *devices_was);
    }
  }
};

TEST_F(GoExportTest, FullGpusWithTimeSlicingAndMpsComeBackAsTheyWere) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true,MPSSupport=true");
  ASSERT_TRUE(state_->Prepare(Claim("uid-plain", {"gpu-0"})).ok());
  ASSERT_TRUE(state_->Prepare(Claim("uid-ts", {"gpu-1", "gpu-2"}, TimeSliced("Long"))).ok());
  ASSERT_TRUE(
      state_->Prepare(Claim("uid-mps", {"gpu-3", "gpu-4"}, GpuConfigEntry({{"strategy", "MPS"}})))
          .ok());
  // What the test is about: the records carry a time-slice flag and an MPS daemon.
  const checkpoint::ClaimMap before = Claims();
  EXPECT_EQ(before.at("uid-ts").prepared_devices[0]["timeSliceApplied"], true);
  EXPECT_TRUE(before.at("uid-mps").prepared_devices[1].contains("mpsDaemon"));
  ExpectRoundTrip();
}

TEST_F(GoExportTest, GroupsFollowTheConfigsAndWriteGoFields) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true,MPSSupport=true");
  ASSERT_TRUE(
      state_->Prepare(Claim("uid-mps", {"gpu-3", "gpu-4"}, GpuConfigEntry({{"strategy", "MPS"}})))
          .ok());
  ASSERT_TRUE(state_->Prepare(Claim("uid-ts", {"gpu-1", "gpu-2"}, TimeSliced("Long"))).ok());
  auto contents = checkpoint::DecodeCheckpoint(*ReadFile(CheckpointPath()));
  ASSERT_TRUE(contents.ok());
  auto text = GoCheckpointText(*contents);
  ASSERT_TRUE(text.ok()) << text.status();
  const OJson go = OJson::parse(*text);
  const OJson& mps = go["v2"]["preparedClaims"]["uid-mps"];
  EXPECT_EQ(mps["checkpointState"], "PrepareCompleted");
  ASSERT_EQ(mps["preparedDevices"].size(), 1u);
  const OJson& group = mps["preparedDevices"][0];
  EXPECT_EQ(group["devices"].size(), 2u);
  EXPECT_EQ(group["configState"]["mpsControlDaemonID"],
            MpsDaemonId("uid-mps", {Uuid("gpu-3"), Uuid("gpu-4")}));
  const OJson& dev = group["devices"][0];
  EXPECT_EQ(
      dev.dump(),
      OJson::parse(
          absl::StrCat(
              R"({"gpu":{"info":{"uuid":")", Uuid("gpu-3"),
              R"("},"device":{"Requests":["gpu"],"PoolName":"node1",)",
              R"("DeviceName":"gpu-3","CDIDeviceIDs":["k8s.gpu.nvidia.com/claim=uid-mps-gpu-3"]}},"mig":null})"))
          .dump());
  // "v3": the same claim, D with lower-case omitempty keys and no null members.
  const OJson& dev3 = go["v3"]["preparedClaims"]["uid-mps"]["preparedDevices"][0]["devices"][0];
  EXPECT_FALSE(dev3.contains("mig"));
  EXPECT_EQ(dev3["gpu"]["device"]["deviceName"], "gpu-3");
  // "v1": completed claims, {status, preparedDevices}.
  EXPECT_EQ(go["v1"]["preparedClaims"]["uid-ts"].size(), 2u);
  const OJson& ts = go["v2"]["preparedClaims"]["uid-ts"]["preparedDevices"][0]["configState"];
  EXPECT_EQ(ts.dump(), R"({"mpsControlDaemonID":"","timeSliceApplied":true})");
  EXPECT_EQ(go["v2"]["nodeBootID"], "boot-1");
  // Keys in the Go structs' order.
  std::vector<std::string> top;
  for (const auto& [k, v] : go.items()) top.push_back(k);
  EXPECT_EQ(top, (std::vector<std::string>{"checksum", "v1", "v2", "v3"}));
}

TEST_F(GoExportTest, MigDevicesComeBackAsTheyWere) {
  Init("a100-mig-4x");
  std::vector<std::string> migs;
  for (const AllocatableDevice& d : inventory_.devices) {
    if (d.type == DeviceType::kMig && d.mig && !d.mig->dynamic) migs.push_back(d.name);
  }
  ASSERT_GE(migs.size(), 3u);
  ASSERT_TRUE(state_->Prepare(Claim("uid-mig", {migs[0], migs[1]})).ok());
  ASSERT_TRUE(state_->Prepare(Claim("uid-mig2", {migs[2]})).ok());
  ExpectRoundTrip();
}

TEST_F(GoExportTest, VfioAndAdminAccessDevicesComeBackAsTheyWere) {
  Init("h100-8x");
  // A VFIO device of this node (discovery under PassthroughSupport adds these): GPU 5's.
  AllocatableDevice vfio = *inventory_.Find("gpu-5");
  vfio.name = "gpu-vfio-5";
  vfio.type = DeviceType::kVfio;
  inventory_.devices.push_back(vfio);
  std::sort(inventory_.devices.begin(), inventory_.devices.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  ASSERT_NE(inventory_.Find("gpu-vfio-5"), nullptr);
  Reopen();

  RecordedDevice v{.kubelet = {.request_names = {"vm"},
                               .pool_name = "node1",
                               .device_name = "gpu-vfio-5",
                               .cdi_device_ids = {"k8s.gpu.nvidia.com/claim=uid-vfio-gpu-vfio-5"}},
                   .type = DeviceType::kVfio,
                   .uuid = vfio.gpu.uuid,
                   .minor = vfio.gpu.minor,
                   .pci_bus_id = vfio.gpu.pci_bus_id};
  Add({.uid = "uid-vfio",
       .namespace_name = "ns",
       .name = "vm",
       .state = checkpoint::ClaimState::kPrepareCompleted,
       .allocation = nlohmann::json::parse(R"({"devices": {"results": [
           {"request": "vm", "driver": "gpu.nvidia.com", "pool": "node1",
            "device": "gpu-vfio-5"}]}})"),
       .prepared_devices = PreparedDevicesToJson({v})});

  const AllocatableDevice& g = *inventory_.Find("gpu-6");
  RecordedDevice admin{.kubelet = {.request_names = {"all"},
                                   .pool_name = "node1",
                                   .device_name = "gpu-6",
                                   .cdi_device_ids = {"k8s.gpu.nvidia.com/claim=uid-admin-gpu-6"}},
                       .type = DeviceType::kGpu,
                       .uuid = g.gpu.uuid,
                       .minor = g.gpu.minor,
                       .pci_bus_id = g.gpu.pci_bus_id,
                       .admin_access = true};
  // An allocation with every kind of member the v1 types have, in an order of its own.
  Add({.uid = "uid-admin",
       .state = checkpoint::ClaimState::kPrepareCompleted,
       .allocation = nlohmann::json::parse(R"({
         "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
           {"values": ["node1"], "operator": "In", "key": "metadata.name"}]}]},
         "allocationTimestamp": "2026-11-29T16:00:00Z",
         "devices": {
           "config": [{"source": "FromClass", "opaque": {"driver": "gpu.nvidia.com",
             "parameters": {"kind": "GpuConfig", "apiVersion": "resource.nvidia.com/v1beta1"}}}],
           "results": [{"tolerations": [{"operator": "Exists", "key": "k"}], "adminAccess": true,
             "device": "gpu-6", "pool": "node1", "driver": "gpu.nvidia.com", "request": "all",
             "consumedCapacity": {"memory": "1Gi"}}]}})"),
       .prepared_devices = PreparedDevicesToJson({admin})});
  ExpectRoundTrip();
}

TEST_F(GoExportTest, ChecksumsVerifyByTheFormatsRulesAndAFlippedByteFailsThem) {
  Init("h100-8x");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"})).ok());
  auto contents = checkpoint::DecodeCheckpoint(*ReadFile(CheckpointPath()));
  ASSERT_TRUE(contents.ok());
  auto text = GoCheckpointText(*contents);
  ASSERT_TRUE(text.ok()) << text.status();

  // Each checksum, computed again by the test's own FNV-1a 32 over go-spew's rendering of the
  // compact JSON (no HTML characters here, so nlohmann's compact dump is Go's text).
  const OJson file = OJson::parse(*text);
  EXPECT_EQ(file.dump(), *text);  // compact, as json.Marshal writes it
  for (const char* section : {"v2", "v3"}) {
    SCOPED_TRACE(section);
    OJson s = file[section];
    const uint64_t stored = s["checksum"];
    s["checksum"] = 0;
    EXPECT_EQ(stored, checkpoint::testing_go::Checksum(s.dump()));
  }
  OJson top = file;
  top.erase("v2");
  top.erase("v3");
  top["checksum"] = 0;
  EXPECT_EQ(file["checksum"].get<uint64_t>(), checkpoint::testing_go::Checksum(top.dump()));

  // One byte changed in a value: the reader finds the mismatch, as the Go driver would.
  std::string flipped = *text;
  const size_t at = flipped.find("\"DeviceName\":\"gpu-0\"");
  ASSERT_NE(at, std::string::npos);
  flipped[at + 18] = '1';  // gpu-0 -> gpu-1
  auto bad = checkpoint::DecodeGoCheckpoint(flipped);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(), HasSubstr("checksum mismatch"));
}

TEST_F(GoExportTest, AClaimNotCompletedIsRefusedByNameAndNothingIsWritten) {
  Init("h100-8x");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"})).ok());
  Add({.uid = "uid-2",
       .namespace_name = "ns",
       .name = "busy",
       .state = checkpoint::ClaimState::kPrepareStarted});
  const std::string ours = *ReadFile(CheckpointPath());
  const std::string out = tmp_.path() + "/go-checkpoint.json";

  auto r = ExportGoCheckpoint(CheckpointPath(), out);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("claim ns/busy (uid uid-2)"));
  EXPECT_THAT(r.status().message(), HasSubstr("PrepareStarted"));
  EXPECT_FALSE(std::filesystem::exists(out));
  // Over our own file: refused the same way, our file untouched and no copy made.
  r = ExportGoCheckpoint(CheckpointPath(), CheckpointPath());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ReadFile(CheckpointPath()), ours);
  for (const auto& e : std::filesystem::directory_iterator(tmp_.path() + "/plugin")) {
    EXPECT_EQ(e.path().filename().string().find("cpp-driver"), std::string::npos) << e.path();
  }
}

TEST_F(GoExportTest, ADynamicMigDeviceIsRefusedByName) {
  Init("h100-8x");
  const AllocatableDevice& g = *inventory_.Find("gpu-0");
  RecordedDevice d{.kubelet = {.request_names = {"gpu"},
                               .pool_name = "node1",
                               .device_name = "gpu-0-mig-1g10gb-19-0"},
                   .type = DeviceType::kMig,
                   .uuid = "MIG-1",
                   .minor = g.gpu.minor,
                   .pci_bus_id = g.gpu.pci_bus_id,
                   .mig = MigInfo{.uuid = "MIG-1", .parent_uuid = g.gpu.uuid, .dynamic = true}};
  Add({.uid = "uid-dyn",
       .state = checkpoint::ClaimState::kPrepareCompleted,
       .prepared_devices = PreparedDevicesToJson({d})});
  const std::string out = tmp_.path() + "/go-checkpoint.json";
  auto r = ExportGoCheckpoint(CheckpointPath(), out);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("claim uid-dyn: device gpu-0-mig-1g10gb-19-0"));
  EXPECT_THAT(r.status().message(), HasSubstr("DynamicMIG"));
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST_F(GoExportTest, AGoCheckpointIsNotExportedAgain) {
  Init("h100-8x");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"})).ok());
  ASSERT_TRUE(ExportGoCheckpoint(CheckpointPath(), CheckpointPath()).ok());
  auto again = ExportGoCheckpoint(CheckpointPath(), tmp_.path() + "/x.json");
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("already in the public driver's format"));
}

TEST_F(GoExportTest, AServingPluginIsFoundByItsSocketAndALeftOverSocketIsNot) {
  Init("h100-8x");
  const std::string dir = tmp_.path() + "/plugin";
  EXPECT_TRUE(CheckNoPluginServing(dir).ok());
  const std::string path = dir + "/dra-pod1.sock";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  absl::Status serving = CheckNoPluginServing(dir);
  EXPECT_EQ(serving.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(serving.message(), HasSubstr(path));
  ::close(fd);  // the socket file stays, nobody answers on it
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_TRUE(CheckNoPluginServing(dir).ok());
}

}  // namespace
}  // namespace dra::gpu
