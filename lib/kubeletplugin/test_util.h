#pragma once

// Test helpers for lib/kubeletplugin tests (not part of the library): a short temporary directory
// tree for sockets, a scriptable DraDriver double, canned claims and gRPC clients.

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "lib/kubeletplugin/plugin_server.h"
#include "proto/dra/v1/api.grpc.pb.h"
#include "proto/dra/v1beta1/api.grpc.pb.h"
#include "proto/dra_health/v1alpha1/api.grpc.pb.h"
#include "proto/pluginregistration/v1/api.grpc.pb.h"

namespace dra::kubeletplugin::testing {

namespace drapb_v1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drapb_v1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

// /tmp/kp-XXXXXX with plugins/ and registry/ inside; short enough for unix socket paths.
// Removed with everything in it on destruction.
class TempTree {
 public:
  TempTree() {
    char tmpl[] = "/tmp/kp-XXXXXX";
    const char* dir = ::mkdtemp(tmpl);
    EXPECT_NE(dir, nullptr);
    root_ = dir ? dir : "/tmp";
    std::filesystem::create_directory(plugins());
    std::filesystem::create_directory(registry());
  }
  ~TempTree() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  const std::string& root() const { return root_; }
  std::string plugins() const { return root_ + "/plugins"; }
  std::string registry() const { return root_ + "/registry"; }

 private:
  std::string root_;
};

// A DraDriver double. By default every claim prepares with one device per allocation result of
// the claim object and every unprepare succeeds; tests replace `prepare`/`unprepare` to script
// other answers. Records calls and the highest number of calls running at once, counted in
// `in_driver` which several doubles may share to observe exclusion across servers.
class FakeDriver : public DraDriver {
 public:
  using PrepareFn = std::function<absl::StatusOr<std::map<std::string, PrepareResult>>(
      const CallInfo&, const std::vector<k8s::ResourceClaim>&)>;
  using UnprepareFn = std::function<absl::StatusOr<std::map<std::string, absl::Status>>(
      const CallInfo&, const std::vector<ClaimRef>&)>;

  explicit FakeDriver(
      std::shared_ptr<std::atomic<int>> in_driver = std::make_shared<std::atomic<int>>(0))
      : in_driver_(std::move(in_driver)) {}

  absl::StatusOr<std::map<std::string, PrepareResult>> PrepareResourceClaims(
      const CallInfo& call, const std::vector<k8s::ResourceClaim>& claims) override {
    Enter(call);
    absl::Cleanup leave = [this] { Leave(); };  // also when a scripted answer throws
    absl::StatusOr<std::map<std::string, PrepareResult>> result;
    if (prepare) {
      result = prepare(call, claims);
    } else {
      std::map<std::string, PrepareResult> ok;
      for (const k8s::ResourceClaim& claim : claims) {
        PrepareResult& r = ok[claim.metadata.uid];
        for (const auto& res : claim.status.allocation->devices.results) {
          r.devices.push_back(PreparedDevice{{res.request},
                                             res.pool,
                                             res.device,
                                             {"example.com/gpu=" + res.device},
                                             res.share_id});
        }
      }
      result = std::move(ok);
    }
    return result;
  }

  absl::StatusOr<std::map<std::string, absl::Status>> UnprepareResourceClaims(
      const CallInfo& call, const std::vector<ClaimRef>& claims) override {
    Enter(call);
    absl::Cleanup leave = [this] { Leave(); };
    absl::StatusOr<std::map<std::string, absl::Status>> result;
    if (unprepare) {
      result = unprepare(call, claims);
    } else {
      std::map<std::string, absl::Status> ok;
      for (const ClaimRef& claim : claims) ok[claim.uid] = absl::OkStatus();
      result = std::move(ok);
    }
    return result;
  }

  int calls() const { return calls_.load(); }
  int max_concurrent() const { return max_concurrent_.load(); }
  std::vector<CallInfo> call_infos() {
    absl::MutexLock lock(&mu_);
    return call_infos_;
  }

  PrepareFn prepare;
  UnprepareFn unprepare;
  // Extra time spent inside the driver per call, to widen overlap windows.
  absl::Duration hold = absl::ZeroDuration();

 private:
  void Enter(const CallInfo& call) {
    ++calls_;
    const int now = ++*in_driver_;
    int seen = max_concurrent_.load();
    while (now > seen && !max_concurrent_.compare_exchange_weak(seen, now)) {
    }
    {
      absl::MutexLock lock(&mu_);
      call_infos_.push_back(call);
    }
    absl::SleepFor(hold);
  }
  void Leave() { --*in_driver_; }

  std::shared_ptr<std::atomic<int>> in_driver_;
  std::atomic<int> calls_{0};
  std::atomic<int> max_concurrent_{0};
  absl::Mutex mu_;
  std::vector<CallInfo> call_infos_ ABSL_GUARDED_BY(mu_);
};

// An allocated claim with one allocation result per "request:device" entry.
inline k8s::ResourceClaim AllocatedClaim(const std::string& ns, const std::string& name,
                                         const std::string& uid,
                                         const std::vector<std::string>& results) {
  k8s::ResourceClaim claim;
  claim.metadata.namespace_name = ns;
  claim.metadata.name = name;
  claim.metadata.uid = uid;
  claim.status.allocation.emplace();
  for (const std::string& entry : results) {
    k8s::DeviceRequestAllocationResult r;
    const size_t colon = entry.find(':');
    r.request = entry.substr(0, colon);
    r.device = entry.substr(colon + 1);
    r.driver = "example.com";
    r.pool = "node1";
    claim.status.allocation->devices.results.push_back(r);
  }
  return claim;
}

// A ClaimGetter over a fixed set of claims keyed "ns/name"; unknown claims are NotFound.
class FakeClaims {
 public:
  void Add(k8s::ResourceClaim claim) {
    absl::MutexLock lock(&mu_);
    claims_[claim.metadata.namespace_name + "/" + claim.metadata.name] = std::move(claim);
  }
  int gets() {
    absl::MutexLock lock(&mu_);
    return gets_;
  }
  ClaimGetter Getter() {
    return [this](const std::string& ns,
                  const std::string& name) -> absl::StatusOr<k8s::ResourceClaim> {
      absl::MutexLock lock(&mu_);
      ++gets_;
      auto it = claims_.find(ns + "/" + name);
      if (it == claims_.end()) {
        return absl::NotFoundError("resourceclaims \"" + name + "\" not found");
      }
      return it->second;
    };
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, k8s::ResourceClaim> claims_ ABSL_GUARDED_BY(mu_);
  int gets_ ABSL_GUARDED_BY(mu_) = 0;
};

inline PluginServerOptions Options(const TempTree& tree, ClaimGetter getter) {
  PluginServerOptions options;
  options.driver_name = "example.com";
  options.claim_getter = std::move(getter);
  options.kubelet_plugins_dir = tree.plugins();
  options.registry_dir = tree.registry();
  return options;
}

inline std::shared_ptr<grpc::Channel> Dial(const std::string& socket) {
  return grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
}

// A context with the kubelet's timeout, short enough that a hung test fails instead of hanging.
inline std::unique_ptr<grpc::ClientContext> CallContext(
    absl::Duration timeout = absl::Seconds(20)) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return context;
}

template <typename Request>
Request ClaimsRequest(const std::vector<ClaimRef>& refs) {
  Request request;
  for (const ClaimRef& ref : refs) {
    auto* claim = request.add_claims();
    claim->set_namespace_(ref.namespace_name);
    claim->set_name(ref.name);
    claim->set_uid(ref.uid);
  }
  return request;
}

}  // namespace dra::kubeletplugin::testing
