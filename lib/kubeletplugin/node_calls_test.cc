// NodePrepareResources/NodeUnprepareResources through real unix sockets, v1 and v1beta1, against
// a DraDriver double: every claim answered, request names reduced, share_id only in v1, claim
// checks before the driver runs, and serialization within and across server instances.

#include <stdexcept>
#include <thread>

#include "lib/common/file_lock.h"
#include "lib/common/log.h"
#include "lib/kubeletplugin/plugin_server.h"
#include "lib/kubeletplugin/test_util.h"

namespace dra::kubeletplugin {
namespace {

using testing::AllocatedClaim;
using testing::CallContext;
using testing::ClaimsRequest;
using testing::Dial;
using ::testing::ElementsAre;
using testing::FakeClaims;
using testing::FakeDriver;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Options;
using testing::TempTree;
namespace drapb_v1 = testing::drapb_v1;
namespace drapb_v1beta1 = testing::drapb_v1beta1;

const ClaimRef kClaimA{"default", "a", "uid-a"};
const ClaimRef kClaimB{"default", "b", "uid-b"};
const ClaimRef kClaimC{"other", "c", "uid-c"};

// A server over claims a, b and c with a driver that gives a two devices (one from a
// subrequest, one with a share ID), fails b and forgets c.
class NodeCallsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    claims_.Add(AllocatedClaim("default", "a", "uid-a", {"gpu/large:gpu-0", "nic:nic-1"}));
    claims_.Add(AllocatedClaim("default", "b", "uid-b", {"gpu:gpu-1"}));
    claims_.Add(AllocatedClaim("other", "c", "uid-c", {"gpu:gpu-2"}));
    driver_.prepare = [](const CallInfo&, const std::vector<k8s::ResourceClaim>& claims)
        -> absl::StatusOr<std::map<std::string, PrepareResult>> {
      std::map<std::string, PrepareResult> out;
      for (const auto& claim : claims) {
        if (claim.metadata.uid == "uid-a") {
          out["uid-a"].devices = {
              PreparedDevice{{"gpu/large"}, "node1", "gpu-0", {"example.com/gpu=a-0"}, "share-7"},
              PreparedDevice{{"nic"}, "node1", "nic-1", {"example.com/nic=a-1", "x.org/y=z"}, {}},
          };
        } else if (claim.metadata.uid == "uid-b") {
          out["uid-b"].status = absl::InternalError("gpu-1 is busy");
        }
      }
      out["uid-unknown"] = PrepareResult{};  // not asked for: must not reach the kubelet
      return out;
    };
    driver_.unprepare =
        [](const CallInfo&,
           const std::vector<ClaimRef>&) -> absl::StatusOr<std::map<std::string, absl::Status>> {
      return std::map<std::string, absl::Status>{
          {"uid-a", absl::OkStatus()}, {"uid-b", absl::UnavailableError("cdi spec busy")}};
    };
    auto server = PluginServer::Create(&driver_, Options(tree_, claims_.Getter()));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  TempTree tree_;
  FakeClaims claims_;
  FakeDriver driver_;
  std::unique_ptr<PluginServer> server_;
};

TEST_F(NodeCallsTest, V1PrepareAnswersEveryClaim) {
  auto stub = drapb_v1::DRAPlugin::NewStub(Dial(server_->dra_socket_path()));
  drapb_v1::NodePrepareResourcesResponse response;
  grpc::Status status = stub->NodePrepareResources(
      CallContext().get(),
      ClaimsRequest<drapb_v1::NodePrepareResourcesRequest>({kClaimA, kClaimB, kClaimC}), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.claims_size(), 3);

  const auto& a = response.claims().at("uid-a");
  EXPECT_EQ(a.error(), "");
  ASSERT_EQ(a.devices_size(), 2);
  EXPECT_THAT(a.devices(0).request_names(), ElementsAre("gpu"));
  EXPECT_EQ(a.devices(0).pool_name(), "node1");
  EXPECT_EQ(a.devices(0).device_name(), "gpu-0");
  EXPECT_THAT(a.devices(0).cdi_device_ids(), ElementsAre("example.com/gpu=a-0"));
  ASSERT_TRUE(a.devices(0).has_share_id());
  EXPECT_EQ(a.devices(0).share_id(), "share-7");
  EXPECT_THAT(a.devices(1).request_names(), ElementsAre("nic"));
  EXPECT_THAT(a.devices(1).cdi_device_ids(), ElementsAre("example.com/nic=a-1", "x.org/y=z"));
  EXPECT_FALSE(a.devices(1).has_share_id());

  EXPECT_EQ(response.claims().at("uid-b").error(), "gpu-1 is busy");
  EXPECT_THAT(response.claims().at("uid-b").devices(), IsEmpty());
  EXPECT_THAT(response.claims().at("uid-c").error(), HasSubstr("driver returned no result"));
  EXPECT_EQ(claims_.gets(), 3);
}

TEST_F(NodeCallsTest, V1beta1PrepareDropsShareId) {
  auto stub = drapb_v1beta1::DRAPlugin::NewStub(Dial(server_->dra_socket_path()));
  drapb_v1beta1::NodePrepareResourcesResponse response;
  grpc::Status status = stub->NodePrepareResources(
      CallContext().get(),
      ClaimsRequest<drapb_v1beta1::NodePrepareResourcesRequest>({kClaimA, kClaimB, kClaimC}),
      &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.claims_size(), 3);
  const auto& a = response.claims().at("uid-a");
  ASSERT_EQ(a.devices_size(), 2);
  EXPECT_THAT(a.devices(0).request_names(), ElementsAre("gpu"));
  EXPECT_EQ(a.devices(0).device_name(), "gpu-0");
  // Field 5 was not on the wire: a v1beta1 parser would keep it as an unknown field.
  EXPECT_TRUE(a.devices(0).GetReflection()->GetUnknownFields(a.devices(0)).empty());
  EXPECT_EQ(response.claims().at("uid-b").error(), "gpu-1 is busy");
  EXPECT_THAT(response.claims().at("uid-c").error(), HasSubstr("driver returned no result"));
}

TEST_F(NodeCallsTest, UnprepareAnswersEveryClaimWithoutReadingClaims) {
  auto v1 = drapb_v1::DRAPlugin::NewStub(Dial(server_->dra_socket_path()));
  drapb_v1::NodeUnprepareResourcesResponse response;
  // Claim d does not exist in the API: unprepare must not care.
  const ClaimRef gone{"default", "d", "uid-d"};
  grpc::Status status = v1->NodeUnprepareResources(
      CallContext().get(),
      ClaimsRequest<drapb_v1::NodeUnprepareResourcesRequest>({kClaimA, kClaimB, gone}), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.claims_size(), 3);
  EXPECT_EQ(response.claims().at("uid-a").error(), "");
  EXPECT_EQ(response.claims().at("uid-b").error(), "cdi spec busy");
  EXPECT_THAT(response.claims().at("uid-d").error(), HasSubstr("driver returned no result"));
  EXPECT_EQ(claims_.gets(), 0);

  auto v1beta1 = drapb_v1beta1::DRAPlugin::NewStub(Dial(server_->dra_socket_path()));
  drapb_v1beta1::NodeUnprepareResourcesResponse beta;
  status = v1beta1->NodeUnprepareResources(
      CallContext().get(),
      ClaimsRequest<drapb_v1beta1::NodeUnprepareResourcesRequest>({kClaimA, kClaimB}), &beta);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(beta.claims_size(), 2);
  EXPECT_EQ(beta.claims().at("uid-b").error(), "cdi spec busy");
}

TEST_F(NodeCallsTest, ClaimProblemsFailTheWholeCallBeforeTheDriver) {
  claims_.Add(AllocatedClaim("default", "replaced", "uid-new", {"gpu:gpu-3"}));
  k8s::ResourceClaim pending = AllocatedClaim("default", "pending", "uid-p", {});
  pending.status.allocation.reset();
  claims_.Add(pending);
  struct Case {
    ClaimRef bad;
    const char* error;
  };
  const std::vector<Case> cases = {
      {{"default", "missing", "uid-m"}, "retrieve claim default/missing: "},
      {{"default", "pending", "uid-p"}, "claim default/pending not allocated"},
      {{"default", "replaced", "uid-old"}, "claim default/replaced got replaced"},
  };
  auto stub = drapb_v1::DRAPlugin::NewStub(Dial(server_->dra_socket_path()));
  for (const Case& c : cases) {
    drapb_v1::NodePrepareResourcesResponse response;
    grpc::Status status = stub->NodePrepareResources(
        CallContext().get(), ClaimsRequest<drapb_v1::NodePrepareResourcesRequest>({kClaimA, c.bad}),
        &response);
    EXPECT_FALSE(status.ok()) << c.error;
    EXPECT_THAT(status.error_message(), HasSubstr(c.error));
  }
  EXPECT_EQ(driver_.calls(), 0);
}

TEST_F(NodeCallsTest, DriverErrorFailsTheWholeCall) {
  driver_.prepare = [](const CallInfo&, const std::vector<k8s::ResourceClaim>&)
      -> absl::StatusOr<std::map<std::string, PrepareResult>> {
    return absl::UnavailableError("checkpoint unreadable");
  };
  auto stub = drapb_v1::DRAPlugin::NewStub(Dial(server_->dra_socket_path()));
  drapb_v1::NodePrepareResourcesResponse response;
  grpc::Status status = stub->NodePrepareResources(
      CallContext().get(), ClaimsRequest<drapb_v1::NodePrepareResourcesRequest>({kClaimA}),
      &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "prepare resource claims: checkpoint unreadable");
}

TEST_F(NodeCallsTest, DriverExceptionBecomesInternalError) {
  driver_.unprepare = [](const CallInfo&, const std::vector<ClaimRef>&)
      -> absl::StatusOr<std::map<std::string, absl::Status>> { throw std::runtime_error("boom"); };
  auto stub = drapb_v1::DRAPlugin::NewStub(Dial(server_->dra_socket_path()));
  drapb_v1::NodeUnprepareResourcesResponse response;
  grpc::Status status = stub->NodeUnprepareResources(
      CallContext().get(), ClaimsRequest<drapb_v1::NodeUnprepareResourcesRequest>({kClaimA}),
      &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(status.error_message(), HasSubstr("unexpected exception: boom"));
  // The serialization was given back: the next call gets through.
  driver_.unprepare = nullptr;
  status = stub->NodeUnprepareResources(
      CallContext().get(), ClaimsRequest<drapb_v1::NodeUnprepareResourcesRequest>({kClaimA}),
      &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(NodeCallsTest, DriverSeesDeadlineAndIncreasingRequestIds) {
  driver_.prepare = nullptr;  // the default double: one device per allocation result
  auto stub = drapb_v1::DRAPlugin::NewStub(Dial(server_->dra_socket_path()));
  for (int i = 0; i < 2; ++i) {
    drapb_v1::NodePrepareResourcesResponse response;
    ASSERT_TRUE(stub->NodePrepareResources(
                        CallContext(absl::Seconds(45)).get(),
                        ClaimsRequest<drapb_v1::NodePrepareResourcesRequest>({kClaimC}), &response)
                    .ok());
  }
  std::vector<CallInfo> calls = driver_.call_infos();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_LT(calls[0].request_id, calls[1].request_id);
  EXPECT_GT(calls[0].deadline, absl::Now() + absl::Seconds(30));
  EXPECT_LT(calls[0].deadline, absl::Now() + absl::Seconds(46));
}

// Runs `n` v1 prepares of claim c at once against `sockets` (round robin).
void PrepareConcurrently(const std::vector<std::string>& sockets, int n) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([socket = sockets[i % sockets.size()]] {
      auto stub = drapb_v1::DRAPlugin::NewStub(Dial(socket));
      drapb_v1::NodePrepareResourcesResponse response;
      grpc::Status status = stub->NodePrepareResources(
          CallContext().get(), ClaimsRequest<drapb_v1::NodePrepareResourcesRequest>({kClaimC}),
          &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      EXPECT_EQ(response.claims_size(), 1);
    });
  }
  for (std::thread& t : threads) t.join();
}

// A ClaimLookup double: knows claim a (as the cache would), records what was unprepared.
class FakeLookup final : public ClaimLookup {
 public:
  std::shared_ptr<const k8s::ResourceClaim> Find(const ClaimRef& ref) override {
    if (ref.uid != "uid-a") return nullptr;
    return std::make_shared<const k8s::ResourceClaim>(
        AllocatedClaim("default", "a", "uid-a", {"gpu/large:gpu-0", "nic:nic-1"}));
  }
  void Unprepared(const ClaimRef& ref) override { unprepared.push_back(ref.uid); }
  std::vector<std::string> unprepared;
};

TEST_F(NodeCallsTest, LookupAnswersBeforeTheGetterTracedAndToldOfSuccessfulUnprepares) {
  FakeLookup lookup;
  PluginServerOptions options = Options(tree_, claims_.Getter());
  options.claim_lookup = &lookup;
  options.trace_calls = true;
  server_.reset();
  auto server = PluginServer::Create(&driver_, options);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<std::string> traces;
  log::SetSink([&traces](std::string_view line) {
    if (line.find("trace\"") != std::string_view::npos) traces.emplace_back(line);
  });
  auto stub = drapb_v1::DRAPlugin::NewStub(Dial((*server)->dra_socket_path()));
  drapb_v1::NodePrepareResourcesResponse prepared;
  grpc::Status status = stub->NodePrepareResources(
      CallContext().get(), ClaimsRequest<drapb_v1::NodePrepareResourcesRequest>({kClaimA, kClaimB}),
      &prepared);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(prepared.claims().at("uid-a").error(), "");
  EXPECT_EQ(claims_.gets(), 1);  // b only
  drapb_v1::NodeUnprepareResourcesResponse unprepared;
  status = stub->NodeUnprepareResources(
      CallContext().get(),
      ClaimsRequest<drapb_v1::NodeUnprepareResourcesRequest>({kClaimA, kClaimB}), &unprepared);
  ASSERT_TRUE(status.ok()) << status.error_message();
  log::SetSink(nullptr);
  EXPECT_THAT(lookup.unprepared, ElementsAre("uid-a"));  // b's unprepare failed
  ASSERT_EQ(traces.size(), 2u);
  EXPECT_THAT(traces[0], HasSubstr("\"prepare trace\" totalUs="));
  EXPECT_THAT(traces[0], HasSubstr("claimCacheHits=1 claimCacheMisses=1"));
  EXPECT_THAT(traces[0], HasSubstr("claimFetchUs="));
  EXPECT_THAT(traces[1], HasSubstr("\"unprepare trace\""));
}

TEST(SerializationTest, CallsNeverOverlapInTheDriver) {
  TempTree tree;
  FakeClaims claims;
  claims.Add(AllocatedClaim("other", "c", "uid-c", {"gpu:gpu-2"}));
  FakeDriver driver;
  driver.hold = absl::Milliseconds(50);
  auto server = PluginServer::Create(&driver, Options(tree, claims.Getter()));
  ASSERT_TRUE(server.ok()) << server.status();
  PrepareConcurrently({(*server)->dra_socket_path()}, 4);
  EXPECT_EQ(driver.calls(), 4);
  EXPECT_EQ(driver.max_concurrent(), 1);
}

TEST(SerializationTest, SerializeFalseLeavesConcurrencyToTheDriver) {
  TempTree tree;
  FakeClaims claims;
  claims.Add(AllocatedClaim("other", "c", "uid-c", {"gpu:gpu-2"}));
  FakeDriver driver;
  driver.hold = absl::Milliseconds(500);
  PluginServerOptions options = Options(tree, claims.Getter());
  options.serialize = false;
  auto server = PluginServer::Create(&driver, std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();
  PrepareConcurrently({(*server)->dra_socket_path()}, 2);
  EXPECT_EQ(driver.max_concurrent(), 2);
}

TEST(SerializationTest, RollingUpdateInstancesExcludeEachOtherByFlock) {
  TempTree tree;
  FakeClaims claims;
  claims.Add(AllocatedClaim("other", "c", "uid-c", {"gpu:gpu-2"}));
  auto in_driver = std::make_shared<std::atomic<int>>(0);  // shared by both drivers
  FakeDriver old_driver(in_driver), new_driver(in_driver);
  old_driver.hold = new_driver.hold = absl::Milliseconds(50);
  PluginServerOptions old_options = Options(tree, claims.Getter());
  old_options.pod_uid = "old";
  PluginServerOptions new_options = Options(tree, claims.Getter());
  new_options.pod_uid = "new";
  auto old_server = PluginServer::Create(&old_driver, std::move(old_options));
  auto new_server = PluginServer::Create(&new_driver, std::move(new_options));
  ASSERT_TRUE(old_server.ok()) << old_server.status();
  ASSERT_TRUE(new_server.ok()) << new_server.status();
  EXPECT_EQ((*old_server)->serialize_lock_path(), (*new_server)->serialize_lock_path());

  PrepareConcurrently({(*old_server)->dra_socket_path(), (*new_server)->dra_socket_path()}, 6);
  EXPECT_EQ(old_driver.calls() + new_driver.calls(), 6);
  EXPECT_EQ(old_driver.max_concurrent(), 1);
  EXPECT_EQ(new_driver.max_concurrent(), 1);
}

TEST(SerializationTest, HeldLockFileKeepsCallsOutOfTheDriver) {
  TempTree tree;
  FakeClaims claims;
  claims.Add(AllocatedClaim("other", "c", "uid-c", {"gpu:gpu-2"}));
  FakeDriver driver;
  PluginServerOptions options = Options(tree, claims.Getter());
  options.pod_uid = "p1";
  options.lock_timeout = absl::Milliseconds(300);
  auto server = PluginServer::Create(&driver, std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();

  // Another instance (here: the test) holds the lock.
  auto held = FileLock::Acquire((*server)->serialize_lock_path(), absl::ZeroDuration());
  ASSERT_TRUE(held.ok()) << held.status();
  auto stub = drapb_v1::DRAPlugin::NewStub(Dial((*server)->dra_socket_path()));
  drapb_v1::NodeUnprepareResourcesResponse response;
  grpc::Status status = stub->NodeUnprepareResources(
      CallContext().get(), ClaimsRequest<drapb_v1::NodeUnprepareResourcesRequest>({kClaimC}),
      &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("serialize with other plugin instances"));
  EXPECT_EQ(driver.calls(), 0);

  held->Release();
  status = stub->NodeUnprepareResources(
      CallContext().get(), ClaimsRequest<drapb_v1::NodeUnprepareResourcesRequest>({kClaimC}),
      &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(driver.calls(), 1);
}

}  // namespace
}  // namespace dra::kubeletplugin
