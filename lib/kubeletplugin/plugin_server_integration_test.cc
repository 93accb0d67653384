// NodePrepareResources against the real local kube-apiserver (hack/cluster/up.sh): the claim GET,
// the allocation check and the UID check, with the claims made and allocated through the API.

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "lib/k8s/client.h"
#include "lib/k8s/rest_config.h"
#include "lib/kubeletplugin/plugin_server.h"
#include "lib/kubeletplugin/test_util.h"
#include "test/support/cluster_env.h"

namespace dra::kubeletplugin {
namespace {

using testing::CallContext;
using testing::ClaimsRequest;
using testing::Dial;
using ::testing::ElementsAre;
using testing::FakeDriver;
using ::testing::HasSubstr;
using testing::TempTree;
namespace drapb_v1 = testing::drapb_v1;

constexpr char kNamespace[] = "default";
constexpr char kDriver[] = "gpu.kubeletplugin-test.example.com";

std::string Unique(absl::string_view prefix) {
  static int counter = 0;
  return absl::StrCat(prefix, "-", ::getpid(), "-", ++counter, "-",
                      absl::ToUnixMicros(absl::Now()) % 1000000);
}

nlohmann::json ClaimJson(const std::string& name) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", kNamespace}}},
          {"spec",
           {{"devices",
             {{"requests",
               {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.example.com"}}}}}}}}}}};
}

class PluginServerIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = k8s::LoadKubeconfig(dra::testing::AdminKubeconfig());
    ASSERT_TRUE(config.ok()) << config.status() << " (start the cluster with hack/cluster/up.sh)";
    // Short timeouts, as a plugin should configure them: the kubelet gives up after 45 s.
    auto client =
        k8s::Client::Create(*config, {.max_retries = 1, .request_timeout = absl::Seconds(10)});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);

    PluginServerOptions options = testing::Options(tree_, ClaimGetterFromClient(client_.get()));
    options.driver_name = kDriver;
    auto server = PluginServer::Create(&driver_, std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = drapb_v1::DRAPlugin::NewStub(Dial(server_->dra_socket_path()));
  }

  void TearDown() override {
    for (const std::string& name : created_) {
      (void)client_->Delete(k8s::ResourceClaim::kResource, kNamespace, name);
    }
  }

  // Creates a claim and returns its UID.
  std::string CreateClaim(const std::string& name) {
    auto created = client_->Create(k8s::ResourceClaim::kResource, kNamespace, ClaimJson(name));
    EXPECT_TRUE(created.ok()) << created.status();
    created_.push_back(name);
    return created.ok() ? (*created)["metadata"]["uid"].get<std::string>() : "";
  }

  // Writes status.allocation through the status subresource, as the scheduler does.
  void Allocate(const std::string& name, const std::string& device) {
    auto claim = client_->Get(k8s::ResourceClaim::kResource, kNamespace, name);
    ASSERT_TRUE(claim.ok()) << claim.status();
    (*claim)["status"] = {{"allocation",
                           {{"devices",
                             {{"results",
                               {{{"request", "gpu"},
                                 {"driver", kDriver},
                                 {"pool", "node1"},
                                 {"device", device}}}}}}}}};
    auto updated = client_->UpdateStatus(k8s::ResourceClaim::kResource, kNamespace, *claim);
    ASSERT_TRUE(updated.ok()) << updated.status();
  }

  grpc::Status Prepare(const std::vector<ClaimRef>& refs,
                       drapb_v1::NodePrepareResourcesResponse* response) {
    return stub_->NodePrepareResources(
        CallContext().get(), ClaimsRequest<drapb_v1::NodePrepareResourcesRequest>(refs), response);
  }

  TempTree tree_;
  FakeDriver driver_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<PluginServer> server_;
  std::unique_ptr<drapb_v1::DRAPlugin::Stub> stub_;
  std::vector<std::string> created_;
};

TEST_F(PluginServerIntegrationTest, AllocatedClaimsReachTheDriver) {
  const std::string a = Unique("kp-a"), b = Unique("kp-b");
  const std::string uid_a = CreateClaim(a), uid_b = CreateClaim(b);
  Allocate(a, "gpu-0");
  Allocate(b, "gpu-1");

  drapb_v1::NodePrepareResourcesResponse response;
  grpc::Status status = Prepare({{kNamespace, a, uid_a}, {kNamespace, b, uid_b}}, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.claims_size(), 2);
  const auto& first = response.claims().at(uid_a);
  EXPECT_EQ(first.error(), "");
  ASSERT_EQ(first.devices_size(), 1);
  EXPECT_EQ(first.devices(0).device_name(), "gpu-0");
  EXPECT_EQ(first.devices(0).pool_name(), "node1");
  EXPECT_THAT(first.devices(0).request_names(), ElementsAre("gpu"));
  EXPECT_EQ(response.claims().at(uid_b).devices(0).device_name(), "gpu-1");
  EXPECT_EQ(driver_.calls(), 1);
}

TEST_F(PluginServerIntegrationTest, UnallocatedClaimFailsTheCall) {
  const std::string a = Unique("kp-a"), pending = Unique("kp-pending");
  const std::string uid_a = CreateClaim(a), uid_pending = CreateClaim(pending);
  Allocate(a, "gpu-0");
  drapb_v1::NodePrepareResourcesResponse response;
  grpc::Status status =
      Prepare({{kNamespace, a, uid_a}, {kNamespace, pending, uid_pending}}, &response);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.error_message(), absl::StrCat("claim default/", pending, " not allocated"));
  EXPECT_EQ(driver_.calls(), 0);
}

TEST_F(PluginServerIntegrationTest, ReplacedClaimFailsTheCall) {
  const std::string name = Unique("kp-replaced");
  const std::string old_uid = CreateClaim(name);
  ASSERT_TRUE(client_->Delete(k8s::ResourceClaim::kResource, kNamespace, name).ok());
  const std::string new_uid = CreateClaim(name);
  ASSERT_NE(old_uid, new_uid);
  Allocate(name, "gpu-0");
  drapb_v1::NodePrepareResourcesResponse response;
  grpc::Status status = Prepare({{kNamespace, name, old_uid}}, &response);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.error_message(), absl::StrCat("claim default/", name, " got replaced"));
  EXPECT_EQ(driver_.calls(), 0);
}

TEST_F(PluginServerIntegrationTest, MissingClaimFailsTheCall) {
  const std::string name = Unique("kp-missing");
  drapb_v1::NodePrepareResourcesResponse response;
  grpc::Status status = Prepare({{kNamespace, name, "uid-x"}}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrCat("retrieve claim default/", name, ": ")));
  EXPECT_THAT(status.error_message(), HasSubstr("not found"));
  EXPECT_EQ(driver_.calls(), 0);
}

}  // namespace
}  // namespace dra::kubeletplugin
