// Device metadata (device_metadata.h): the files themselves, and the deviceMetadata step of a
// DeviceState prepare (gate DeviceMetadata) with its rollback and unprepare.

#include "lib/gpuplugin/prepare/device_metadata.h"

#include <filesystem>

#include "lib/api/test_util.h"
#include "lib/cdi/spec.h"
#include "lib/gpuplugin/prepare/device_state_test_fixture.h"

namespace dra::gpu {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

nlohmann::json ReadJson(const std::string& path) {
  auto text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return nlohmann::json::parse(text.value_or("null"));
}

MetadataClaim TwoRequests() {
  MetadataClaim c{.uid = "uid-1", .namespace_name = "ns", .name = "claim"};
  c.requests.push_back({.name = "a", .devices = {{"gpu.nvidia.com", "node1", "gpu-0", {}}}});
  c.requests.push_back(
      {.name = "b",
       .devices = {{"gpu.nvidia.com", "node1", "gpu-vfio-1", {{"type", {{"string", "vfio"}}}}}}});
  return c;
}

TEST(DeviceMetadataFiles, WritesTheDocumentAndItsCdiSpecPerRequest) {
  dra::testing::TempDir tmp;
  DeviceMetadataFiles files(tmp.path() + "/plugin", tmp.path() + "/cdi");
  const MetadataClaim claim = TwoRequests();
  ASSERT_TRUE(files.Write(claim).ok());

  const std::string file_a = tmp.path() + "/plugin/dra-device-metadata/ns_claim/a/metadata.json";
  EXPECT_EQ(files.FilePath("ns", "claim", "a"), file_a);
  EXPECT_EQ(ReadJson(file_a), nlohmann::json::parse(R"({
    "apiVersion": "metadata.resource.k8s.io/v1alpha1", "kind": "DeviceMetadata",
    "requests": [{"name": "a",
                  "devices": [{"driver": "gpu.nvidia.com", "pool": "node1", "name": "gpu-0"}]}]})"));
  EXPECT_EQ(ReadJson(files.FilePath("ns", "claim", "b"))["requests"][0]["devices"][0]["attributes"],
            nlohmann::json::parse(R"({"type": {"string": "vfio"}})"));

  const std::string spec_a = tmp.path() + "/cdi/gpu.nvidia.com_metadata_uid-1_a.json";
  EXPECT_EQ(files.SpecPath("uid-1", "a"), spec_a);
  auto text = ReadFile(spec_a);
  ASSERT_TRUE(text.ok()) << text.status();
  auto spec = cdi::DecodeSpec(*text);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->version, "0.5.0");
  EXPECT_EQ(spec->kind, "gpu.nvidia.com/metadata");
  ASSERT_EQ(spec->devices.size(), 1u);
  EXPECT_EQ(spec->devices[0].name, "uid-1_a");
  EXPECT_THAT(
      spec->devices[0].container_edits.mounts,
      ElementsAre(cdi::Mount{
          .host_path = file_a,
          .container_path = "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/claim/a/"
                            "gpu.nvidia.com-metadata.json",
          .options = {"ro", "bind"}}));
  EXPECT_EQ(DeviceMetadataFiles::CdiDeviceId("uid-1", "a"), "gpu.nvidia.com/metadata=uid-1_a");
}

TEST(DeviceMetadataFiles, ClaimFromATemplateIsMountedUnderItsPodClaimName) {
  MetadataClaim claim = TwoRequests();
  claim.pod_claim_name = "gpus";
  EXPECT_EQ(DeviceMetadataFiles::ContainerPath(claim, "a"),
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpus/a/"
            "gpu.nvidia.com-metadata.json");
  EXPECT_EQ(DeviceMetadataFiles::Document(claim, claim.requests[0])["podClaimName"], "gpus");
}

TEST(DeviceMetadataFiles, RemoveDeletesFilesAndDirectoriesAndIsIdempotent) {
  dra::testing::TempDir tmp;
  DeviceMetadataFiles files(tmp.path() + "/plugin", tmp.path() + "/cdi");
  ASSERT_TRUE(files.Write(TwoRequests()).ok());
  // Another claim's files in the same directories stay.
  MetadataClaim other = TwoRequests();
  other.uid = "uid-2";
  other.name = "other";
  ASSERT_TRUE(files.Write(other).ok());

  ASSERT_TRUE(files.Remove("uid-1", "ns", "claim", {"a", "b"}).ok());
  EXPECT_FALSE(fs::exists(files.ClaimDir("ns", "claim")));
  EXPECT_FALSE(fs::exists(files.SpecPath("uid-1", "a")));
  EXPECT_FALSE(fs::exists(files.SpecPath("uid-1", "b")));
  EXPECT_TRUE(fs::exists(files.FilePath("ns", "other", "a")));
  EXPECT_TRUE(fs::exists(files.SpecPath("uid-2", "b")));
  EXPECT_TRUE(files.Remove("uid-1", "ns", "claim", {"a", "b"}).ok());
}

TEST(DeviceMetadataFiles, FailedWriteRemovesWhatItWrote) {
  dra::testing::TempDir tmp;
  // The CDI root is a file: the first request's document is written, its spec is not.
  ASSERT_TRUE(WriteFileAtomically(tmp.path() + "/cdi", "not a directory").ok());
  DeviceMetadataFiles files(tmp.path() + "/plugin", tmp.path() + "/cdi");
  absl::Status s = files.Write(TwoRequests());
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("write the device metadata of request a"));
  EXPECT_FALSE(fs::exists(files.FilePath("ns", "claim", "a")));
  EXPECT_FALSE(fs::exists(files.ClaimDir("ns", "claim")));
}

TEST(DeviceMetadataUndo, RejectsRecordsThatWouldLeaveTheDirectory) {
  dra::testing::TempDir tmp;
  DeviceMetadataFiles files(tmp.path() + "/plugin", tmp.path() + "/cdi");
  const nlohmann::json good = {
      {"uid", "u"}, {"namespace", "ns"}, {"name", "c"}, {"requests", {"a"}}};
  EXPECT_TRUE(UndoDeviceMetadata(&files, good).ok());
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"name", "../x"}, {"namespace", ".."}, {"uid", 3}, {"requests", {"a/b"}}}) {
    nlohmann::json bad = good;
    bad[key] = value;
    absl::Status s = UndoDeviceMetadata(&files, bad);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << key << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(key)) << s;
  }
  EXPECT_TRUE(absl::IsFailedPrecondition(UndoDeviceMetadata(nullptr, good)));
}

// DeviceState with the gate on and a metadata directory.
class DeviceMetadataStateTest : public DeviceStateTest {
 protected:
  void SetUp() override {
    Init("h100-8x");
    // Both gates are unavailable in this version (PassthroughSupport is not implemented): a
    // registry where every gate is available, as once it is.
    gates_ = std::make_unique<FeatureGates>();
    api::testing::RegisterDriverGatesAllAvailable(*gates_);
    ASSERT_TRUE(gates_->Set("DeviceMetadata=true,PassthroughSupport=true").ok());
    files_ = std::make_unique<DeviceMetadataFiles>(tmp_.path() + "/plugin", tmp_.path() + "/cdi");
    state_ =
        std::make_unique<DeviceState>(inventory_, cdi_.get(), checkpoint_.get(),
                                      DeviceState::Options{.pool_name = "node1",
                                                           .gates = gates_.get(),
                                                           .services = {.metadata = files_.get()},
                                                           .clock = &clock_});
  }
  // Claim `uid` (template-made, pod claim name "gpus") with request "a" = gpu-0, gpu-1 and
  // request "b" = gpu-2.
  k8s::ResourceClaim TwoRequestClaim(const std::string& uid) {
    k8s::ResourceClaim claim = Claim(uid, {"gpu-0", "gpu-1", "gpu-2"});
    auto& results = claim.status.allocation->devices.results;
    results[0].request = "a";
    results[1].request = "a";
    results[2].request = "b";
    claim.metadata.annotations[kPodClaimNameAnnotation] = "gpus";
    return claim;
  }
  std::unique_ptr<DeviceMetadataFiles> files_;
};

TEST_F(DeviceMetadataStateTest, PrepareWritesMetadataAndUnprepareRemovesIt) {
  auto devices = state_->Prepare(TwoRequestClaim("uid-1"));
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 3u);
  // The metadata CDI ID goes to the first device of each request only.
  EXPECT_THAT((*devices)[0].kubelet.cdi_device_ids,
              ElementsAre(ClaimCdi::DeviceId("uid-1", "gpu-0"), "gpu.nvidia.com/metadata=uid-1_a"));
  EXPECT_THAT((*devices)[1].kubelet.cdi_device_ids,
              ElementsAre(ClaimCdi::DeviceId("uid-1", "gpu-1")));
  EXPECT_THAT((*devices)[2].kubelet.cdi_device_ids,
              ElementsAre(ClaimCdi::DeviceId("uid-1", "gpu-2"), "gpu.nvidia.com/metadata=uid-1_b"));

  const nlohmann::json a = ReadJson(files_->FilePath("ns", "claim-uid-1", "a"));
  EXPECT_EQ(a["podClaimName"], "gpus");
  ASSERT_EQ(a["requests"][0]["devices"].size(), 2u);
  EXPECT_EQ(a["requests"][0]["devices"][1]["name"], "gpu-1");
  EXPECT_FALSE(a["requests"][0]["devices"][0].contains("attributes"));  // not a VFIO device
  EXPECT_TRUE(fs::exists(files_->SpecPath("uid-1", "b")));

  auto record = checkpoint_->Get("uid-1");
  ASSERT_TRUE(record.ok() && record->has_value());
  auto steps = prepare::StepRecordsFromJson((*record)->steps);
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_EQ(steps->size(), 2u);
  EXPECT_EQ((*steps)[0].name, kDeviceMetadataStep);
  EXPECT_EQ((*steps)[0].undo["requests"], nlohmann::json({"a", "b"}));

  // A repeated prepare returns the recorded devices, IDs included.
  auto again = state_->Prepare(TwoRequestClaim("uid-1"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *devices);

  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_FALSE(fs::exists(files_->ClaimDir("ns", "claim-uid-1")));
  EXPECT_FALSE(fs::exists(files_->SpecPath("uid-1", "a")));
  EXPECT_FALSE(fs::exists(files_->SpecPath("uid-1", "b")));
  EXPECT_FALSE(fs::exists(SpecPath("uid-1")));
}

TEST_F(DeviceMetadataStateTest, FailedCdiSpecRollsTheMetadataBack) {
  // The claim spec cannot be written: its directory is replaced by a file.
  const std::string claim_spec = SpecPath("uid-1");
  fs::create_directories(claim_spec);  // a directory where the file goes: rename fails
  auto devices = state_->Prepare(TwoRequestClaim("uid-1"));
  ASSERT_FALSE(devices.ok());
  EXPECT_FALSE(fs::exists(files_->ClaimDir("ns", "claim-uid-1")));
  EXPECT_FALSE(fs::exists(files_->SpecPath("uid-1", "a")));
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);  // nothing left: the claim is retriable
  fs::remove(claim_spec);
  EXPECT_TRUE(state_->Prepare(TwoRequestClaim("uid-1")).ok());
}

TEST_F(DeviceMetadataStateTest, GateOffWritesNothing) {
  ASSERT_TRUE(gates_->Set("DeviceMetadata=false").ok());
  auto devices = state_->Prepare(TwoRequestClaim("uid-1"));
  ASSERT_TRUE(devices.ok());
  EXPECT_THAT((*devices)[0].kubelet.cdi_device_ids,
              ElementsAre(ClaimCdi::DeviceId("uid-1", "gpu-0")));
  EXPECT_FALSE(fs::exists(files_->ClaimDir("ns", "claim-uid-1")));
}

}  // namespace
}  // namespace dra::gpu
