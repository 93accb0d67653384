#pragma once

// The fixture of the gpu-kubelet-plugin integration tests (plugin_integration_test.cc,
// plugin_lifecycle_integration_test.cc): the plugin binary started for a Node of its own on the
// real local control plane, with a mock driver root, and the claims and pods a test made.

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
#include "lib/k8s/client.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/objects_resource.h"
#include "proto/dra/v1/api.grpc.pb.h"
#include "test/doubles/testing/mock_driver_root.h"
#include "test/support/plugin_process.h"

namespace dra::gpu::testing {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;
using dra::k8s::Client;
using dra::k8s::ResourceClaim;
using dra::k8s::ResourceSlice;

class PluginIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cfg = dra::k8s::LoadKubeconfig(dra::testing::AdminKubeconfig());
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    client_ = std::move(*Client::Create(*cfg, {.qps = 0}));
    node_ = absl::StrCat("plugin-it-", getpid(), "-", ++counter_);
    auto node =
        client_->Create(dra::k8s::Node::kResource, "",
                        {{"apiVersion", "v1"},
                         {"kind", "Node"},
                         {"metadata", {{"name", node_}, {"labels", {{"plugin-it", node_}}}}}});
    ASSERT_TRUE(node.ok()) << node.status();
    // Without allocatable pods the scheduler would never place a pod here.
    nlohmann::json resources = {{"pods", "110"}, {"cpu", "8"}, {"memory", "32Gi"}};
    auto status = client_->MergePatch(
        dra::k8s::Node::kResource, "", node_,
        {{"status", {{"capacity", resources}, {"allocatable", resources}}}}, "status");
    ASSERT_TRUE(status.ok()) << status.status();
  }
  void TearDown() override {
    plugin_.reset();
    for (const auto& c : claims_) (void)client_->Delete(ResourceClaim::kResource, "default", c);
    for (const auto& p : pods_) {
      (void)client_->Delete({"", "v1", "Pod", "pods", true}, "default", p,
                            {.grace_period_seconds = 0});
    }
    auto slices = client_->ListAll(ResourceSlice::kResource, "",
                                   {.field_selector = "spec.nodeName=" + node_});
    if (slices.ok()) {
      for (const auto& s : (*slices)["items"]) {
        (void)client_->Delete(ResourceSlice::kResource, "", s["metadata"]["name"]);
      }
    }
    (void)client_->Delete(dra::k8s::Node::kResource, "", node_);
  }
  void StartPlugin(const std::string& profile) {
    std::string root = tmp_.path() + "/root";
    ASSERT_TRUE(dra::testing::MakeMockDriverRoot(profile, root).ok());
    plugin_ = std::make_unique<dra::testing::PluginProcess>(dra::testing::PluginProcessOptions{
        .node_name = node_,
        .driver_root = root,
        .work_dir = tmp_.path(),
        // An empty sysfs: the host's real PCI tree must not leak into the expected attributes.
        .extra_args = {"--sys-root=" + tmp_.path() + "/sys"}});
    plugin_->Start();
    ASSERT_TRUE(plugin_->WaitForSocket()) << "no DRA socket; see " << plugin_->log();
  }
  std::vector<ResourceSlice> WaitForSlices() {
    for (int i = 0; i < 2000; ++i) {
      auto list = client_->ListAll(ResourceSlice::kResource, "",
                                   {.field_selector = "spec.nodeName=" + node_});
      if (list.ok() && !(*list)["items"].empty()) {
        std::vector<ResourceSlice> out;
        for (const auto& item : (*list)["items"]) out.push_back(*ResourceSlice::FromJson(item));
        return out;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return {};
  }
  // A claim allocated directly through the status subresource, as the scheduler would.
  std::string AllocatedClaim(const std::string& name, const std::string& device) {
    nlohmann::json c = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceClaim"},
        {"metadata", {{"name", name}, {"namespace", "default"}}},
        {"spec",
         {{"devices",
           {{"requests",
             {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}}}}}}}}};
    auto created = client_->Create(ResourceClaim::kResource, "default", c);
    EXPECT_TRUE(created.ok()) << created.status();
    claims_.push_back(name);
    (*created)["status"] = {{"allocation",
                             {{"devices",
                               {{"results",
                                 {{{"request", "gpu"},
                                   {"driver", "gpu.nvidia.com"},
                                   {"pool", node_},
                                   {"device", device}}}}}}}}};
    auto updated = client_->UpdateStatus(ResourceClaim::kResource, "default", *created);
    EXPECT_TRUE(updated.ok()) << updated.status();
    return (*updated)["metadata"]["uid"];
  }
  std::unique_ptr<drapb::DRAPlugin::Stub> Stub() {
    return drapb::DRAPlugin::NewStub(
        grpc::CreateChannel("unix://" + plugin_->socket(), grpc::InsecureChannelCredentials()));
  }
  // Returns the claim's error string ("" on success) or the gRPC error.
  std::string Prepare(const std::string& name, const std::string& uid,
                      std::vector<std::string>* cdi_ids = nullptr) {
    drapb::NodePrepareResourcesRequest req;
    auto* c = req.add_claims();
    c->set_namespace_("default");
    c->set_name(name);
    c->set_uid(uid);
    drapb::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(45));
    grpc::Status s = Stub()->NodePrepareResources(&ctx, req, &resp);
    if (!s.ok()) return "grpc: " + s.error_message();
    if (!resp.claims().contains(uid)) return "no result for claim";
    const auto& r = resp.claims().at(uid);
    if (cdi_ids) {
      for (const auto& d : r.devices()) {
        for (const auto& id : d.cdi_device_ids()) cdi_ids->push_back(id);
      }
    }
    return r.error();
  }
  std::string Unprepare(const std::string& name, const std::string& uid) {
    drapb::NodeUnprepareResourcesRequest req;
    auto* c = req.add_claims();
    c->set_namespace_("default");
    c->set_name(name);
    c->set_uid(uid);
    drapb::NodeUnprepareResourcesResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = Stub()->NodeUnprepareResources(&ctx, req, &resp);
    if (!s.ok()) return "grpc: " + s.error_message();
    return resp.claims().at(uid).error();
  }
  bool SpecExists(const std::string& uid) {
    return std::filesystem::exists(plugin_->cdi_dir() + "/k8s.gpu.nvidia.com-claim_" + uid +
                                   ".json");
  }

  static inline int counter_ = 0;
  dra::testing::TempDir tmp_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<dra::testing::PluginProcess> plugin_;
  std::string node_;
  std::vector<std::string> claims_, pods_;
};

}  // namespace dra::gpu::testing
