// PluginServer life cycle over real unix sockets: registration answers, socket names and paths,
// stale and leftover sockets, option checks, and the health stream.

#include "lib/kubeletplugin/plugin_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "lib/kubeletplugin/test_util.h"

namespace dra::kubeletplugin {
namespace {

using testing::CallContext;
using testing::Dial;
using ::testing::ElementsAre;
using testing::FakeClaims;
using testing::FakeDriver;
using ::testing::HasSubstr;
using testing::Options;
using testing::TempTree;

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// Leaves a socket file behind the way a crashed process does: bound, then closed, not unlinked.
void MakeStaleSocket(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << path;
  ::close(fd);
  ASSERT_TRUE(Exists(path));
}

pluginregistration::PluginInfo GetInfo(const std::string& registration_socket) {
  auto stub = pluginregistration::Registration::NewStub(Dial(registration_socket));
  pluginregistration::PluginInfo info;
  grpc::Status status = stub->GetInfo(CallContext().get(), {}, &info);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return info;
}

TEST(PluginServerTest, GetInfoNamesDriverEndpointAndVersionsInOrder) {
  TempTree tree;
  FakeClaims claims;
  FakeDriver driver;
  auto server = PluginServer::Create(&driver, Options(tree, claims.Getter()));
  ASSERT_TRUE(server.ok()) << server.status();

  const std::string dra_socket = tree.plugins() + "/example.com/dra.sock";
  EXPECT_EQ((*server)->dra_socket_path(), dra_socket);
  EXPECT_EQ((*server)->registration_socket_path(), tree.registry() + "/example.com-reg.sock");
  EXPECT_EQ((*server)->serialize_lock_path(), "");
  EXPECT_TRUE(Exists(dra_socket));

  pluginregistration::PluginInfo info = GetInfo((*server)->registration_socket_path());
  EXPECT_EQ(info.type(), "DRAPlugin");
  EXPECT_EQ(info.name(), "example.com");
  EXPECT_EQ(info.endpoint(), dra_socket);
  EXPECT_THAT(info.supported_versions(), ElementsAre("v1.DRAPlugin", "v1beta1.DRAPlugin"));
}

TEST(PluginServerTest, GetInfoAdvertisesHealthLastWhenServed) {
  TempTree tree;
  FakeClaims claims;
  FakeDriver driver;
  PluginServerOptions options = Options(tree, claims.Getter());
  options.serve_health = true;
  auto server = PluginServer::Create(&driver, std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT(GetInfo((*server)->registration_socket_path()).supported_versions(),
              ElementsAre("v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth"));
}

TEST(PluginServerTest, GetInfoWithOnlyV1beta1) {
  TempTree tree;
  FakeClaims claims;
  FakeDriver driver;
  PluginServerOptions options = Options(tree, claims.Getter());
  options.serve_v1 = false;
  auto server = PluginServer::Create(&driver, std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT(GetInfo((*server)->registration_socket_path()).supported_versions(),
              ElementsAre("v1beta1.DRAPlugin"));
}

TEST(PluginServerTest, NotifyRegistrationStatusStoresStatusAndRejectsFailure) {
  TempTree tree;
  FakeClaims claims;
  FakeDriver driver;
  std::vector<bool> seen;  // written on gRPC threads, read after the calls returned
  absl::Mutex mu;
  PluginServerOptions options = Options(tree, claims.Getter());
  options.on_registration_status = [&](const RegistrationStatus& s) {
    absl::MutexLock lock(&mu);
    seen.push_back(s.registered);
  };
  auto server = PluginServer::Create(&driver, std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_FALSE((*server)->registration_status().has_value());
  auto stub =
      pluginregistration::Registration::NewStub(Dial((*server)->registration_socket_path()));

  pluginregistration::RegistrationStatus rejected;
  rejected.set_plugin_registered(false);
  rejected.set_error("no supported version");
  pluginregistration::RegistrationStatusResponse response;
  grpc::Status status = stub->NotifyRegistrationStatus(CallContext().get(), rejected, &response);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.error_message(),
              HasSubstr("failed registration process: no supported version"));
  ASSERT_TRUE((*server)->registration_status().has_value());
  EXPECT_FALSE((*server)->registration_status()->registered);
  EXPECT_EQ((*server)->registration_status()->error, "no supported version");

  pluginregistration::RegistrationStatus accepted;
  accepted.set_plugin_registered(true);
  status = stub->NotifyRegistrationStatus(CallContext().get(), accepted, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE((*server)->registration_status()->registered);
  absl::MutexLock lock(&mu);
  EXPECT_THAT(seen, ElementsAre(false, true));
}

TEST(PluginServerTest, RollingUpdateUsesPodUidInSocketNamesAndLocksPluginDir) {
  TempTree tree;
  FakeClaims claims;
  FakeDriver driver;
  PluginServerOptions options = Options(tree, claims.Getter());
  options.pod_uid = "pod-1234";
  auto server = PluginServer::Create(&driver, std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string dir = tree.plugins() + "/example.com";
  EXPECT_EQ((*server)->dra_socket_path(), dir + "/dra-pod-1234.sock");
  EXPECT_EQ((*server)->registration_socket_path(),
            tree.registry() + "/example.com-pod-1234-reg.sock");
  EXPECT_EQ((*server)->serialize_lock_path(), dir + "/serialize.lock");
  EXPECT_TRUE(Exists(dir + "/serialize.lock"));
  EXPECT_EQ(GetInfo((*server)->registration_socket_path()).endpoint(), dir + "/dra-pod-1234.sock");
}

TEST(PluginServerTest, RollingUpdateSweepsSocketsOfKilledInstancesButNotOfLiveOnes) {
  TempTree tree;
  FakeClaims claims;
  FakeDriver driver;
  const std::string dir = tree.plugins() + "/example.com";
  std::filesystem::create_directory(dir);
  PluginServerOptions live_options = Options(tree, claims.Getter());
  live_options.pod_uid = "pod-live";
  live_options.serialize = false;
  auto live = PluginServer::Create(&driver, std::move(live_options));
  ASSERT_TRUE(live.ok()) << live.status();
  MakeStaleSocket(dir + "/dra-pod-killed.sock");
  MakeStaleSocket(tree.registry() + "/example.com-pod-killed-reg.sock");
  MakeStaleSocket(tree.registry() + "/other.example.com-pod-x-reg.sock");

  PluginServerOptions options = Options(tree, claims.Getter());
  options.pod_uid = "pod-new";
  options.serialize = false;
  options.stale_socket_min_age = absl::ZeroDuration();
  auto server = PluginServer::Create(&driver, std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_FALSE(Exists(dir + "/dra-pod-killed.sock"));
  EXPECT_FALSE(Exists(tree.registry() + "/example.com-pod-killed-reg.sock"));
  EXPECT_TRUE(Exists(tree.registry() + "/other.example.com-pod-x-reg.sock"));  // another driver
  EXPECT_TRUE(Exists((*live)->dra_socket_path()));
  EXPECT_EQ(GetInfo((*live)->registration_socket_path()).endpoint(), dir + "/dra-pod-live.sock");
  EXPECT_EQ(GetInfo((*server)->registration_socket_path()).endpoint(), dir + "/dra-pod-new.sock");
}

TEST(PluginServerTest, StopRemovesBothSocketsAndIsIdempotent) {
  TempTree tree;
  FakeClaims claims;
  FakeDriver driver;
  auto server = PluginServer::Create(&driver, Options(tree, claims.Getter()));
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string dra = (*server)->dra_socket_path();
  const std::string reg = (*server)->registration_socket_path();
  ASSERT_TRUE(Exists(dra));
  ASSERT_TRUE(Exists(reg));
  (*server)->Stop();
  EXPECT_FALSE(Exists(dra));
  EXPECT_FALSE(Exists(reg));
  (*server)->Stop();
  server->reset();
  EXPECT_FALSE(Exists(reg));
}

TEST(PluginServerTest, StaleSocketsAreReplaced) {
  TempTree tree;
  std::filesystem::create_directory(tree.plugins() + "/example.com");
  MakeStaleSocket(tree.plugins() + "/example.com/dra.sock");
  MakeStaleSocket(tree.registry() + "/example.com-reg.sock");
  FakeClaims claims;
  FakeDriver driver;
  auto server = PluginServer::Create(&driver, Options(tree, claims.Getter()));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(GetInfo((*server)->registration_socket_path()).name(), "example.com");
}

TEST(PluginServerTest, RefusesToReplaceNonSocketFile) {
  TempTree tree;
  const std::string reg = tree.registry() + "/example.com-reg.sock";
  std::ofstream(reg) << "not a socket";
  FakeClaims claims;
  FakeDriver driver;
  auto server = PluginServer::Create(&driver, Options(tree, claims.Getter()));
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("is not a socket"));
  EXPECT_TRUE(std::filesystem::is_regular_file(reg));
  // The DRA server started first and was stopped again, socket and all.
  EXPECT_FALSE(Exists(tree.plugins() + "/example.com/dra.sock"));
}

TEST(PluginServerTest, RejectsBadOptions) {
  TempTree tree;
  FakeClaims claims;
  FakeDriver driver;
  struct Case {
    const char* name;
    std::function<void(PluginServerOptions&)> edit;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"no driver name", [](auto& o) { o.driver_name = ""; }, "driver name must be set"},
      {"slash in driver", [](auto& o) { o.driver_name = "a/b"; }, "cannot be used in a file name"},
      {"no getter", [](auto& o) { o.claim_getter = nullptr; }, "claim getter must be set"},
      {"no versions",
       [](auto& o) {
         o.serve_v1 = false;
         o.serve_v1beta1 = false;
       },
       "at least one"},
      {"missing registry", [&](auto& o) { o.registry_dir = tree.root() + "/nope"; },
       "kubelet plugin registry directory"},
      {"missing plugins dir", [&](auto& o) { o.kubelet_plugins_dir = tree.root() + "/nope"; },
       "create plugin data directory"},
      {"socket path too long", [&](auto& o) { o.pod_uid = std::string(100, 'u'); },
       "unix sockets allow at most 107"},
  };
  for (const Case& c : cases) {
    PluginServerOptions options = Options(tree, claims.Getter());
    c.edit(options);
    auto server = PluginServer::Create(&driver, std::move(options));
    ASSERT_FALSE(server.ok()) << c.name;
    EXPECT_THAT(server.status().message(), HasSubstr(c.error)) << c.name;
  }
  EXPECT_FALSE(PluginServer::Create(nullptr, Options(tree, claims.Getter())).ok());
}

TEST(PluginServerTest, CreatesPluginDataDirectory) {
  TempTree tree;
  FakeClaims claims;
  FakeDriver driver;
  PluginServerOptions options = Options(tree, claims.Getter());
  options.plugin_data_dir = tree.root() + "/own";
  auto server = PluginServer::Create(&driver, std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->dra_socket_path(), tree.root() + "/own/dra.sock");
  EXPECT_TRUE(std::filesystem::is_directory(tree.root() + "/own"));
}

TEST(PluginServerTest, HealthStreamSendsCurrentListAndChanges) {
  TempTree tree;
  FakeClaims claims;
  FakeDriver driver;
  PluginServerOptions options = Options(tree, claims.Getter());
  options.serve_health = true;
  auto server = PluginServer::Create(&driver, std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->PublishHealth(
      {DeviceHealth{"node1", "gpu-0", HealthStatus::kHealthy, absl::FromUnixSeconds(1700000000),
                    absl::Seconds(60), ""}});

  auto stub = v1alpha1::DRAResourceHealth::NewStub(Dial((*server)->dra_socket_path()));
  auto context = CallContext();
  auto reader = stub->NodeWatchResources(context.get(), {});
  v1alpha1::NodeWatchResourcesResponse response;
  ASSERT_TRUE(reader->Read(&response));
  ASSERT_EQ(response.devices_size(), 1);
  EXPECT_EQ(response.devices(0).device().pool_name(), "node1");
  EXPECT_EQ(response.devices(0).device().device_name(), "gpu-0");
  EXPECT_EQ(response.devices(0).health(), v1alpha1::HEALTHY);
  EXPECT_EQ(response.devices(0).last_updated_time(), 1700000000);
  EXPECT_EQ(response.devices(0).health_check_timeout_seconds(), 60);

  (*server)->PublishHealth(
      {DeviceHealth{"node1", "gpu-0", HealthStatus::kUnhealthy, absl::FromUnixSeconds(1700000100),
                    absl::ZeroDuration(), "xid 79"},
       DeviceHealth{"node1", "gpu-1", HealthStatus::kHealthy}});
  ASSERT_TRUE(reader->Read(&response));
  ASSERT_EQ(response.devices_size(), 2);
  EXPECT_EQ(response.devices(0).health(), v1alpha1::UNHEALTHY);
  EXPECT_EQ(response.devices(0).message(), "xid 79");
  EXPECT_EQ(response.devices(1).device().device_name(), "gpu-1");

  // Without a change the current list comes again after 5 s: the kubelet clears a driver's health
  // when any of its streams ends (the old instance's in a surge rollout), and this restores it.
  const absl::Time waited_from = absl::Now();
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_GE(absl::Now() - waited_from, absl::Seconds(4));
  ASSERT_EQ(response.devices_size(), 2);
  EXPECT_EQ(response.devices(0).message(), "xid 79");

  // Stopping ends the stream instead of waiting for the kubelet to hang up.
  const absl::Time start = absl::Now();
  (*server)->Stop();
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

// The kubelet (v1.36, gate ResourceHealthStatus) opens the health stream on every DRA plugin
// whether it advertised the service or not, and retries every 5 s, logging an error each time,
// when the call fails. Without health reporting the stream is accepted and stays quiet: no
// health is claimed, no error is logged, and Stop still ends it.
TEST(PluginServerTest, HealthStreamIsAcceptedAndQuietWhenHealthIsNotServed) {
  TempTree tree;
  FakeClaims claims;
  FakeDriver driver;
  auto server = PluginServer::Create(&driver, Options(tree, claims.Getter()));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT(GetInfo((*server)->registration_socket_path()).supported_versions(),
              ::testing::Not(::testing::Contains(::testing::HasSubstr("DRAResourceHealth"))));
  (*server)->PublishHealth({DeviceHealth{"node1", "gpu-0", HealthStatus::kHealthy}});

  auto stub = v1alpha1::DRAResourceHealth::NewStub(Dial((*server)->dra_socket_path()));
  {
    auto context = CallContext(absl::Milliseconds(700));
    auto reader = stub->NodeWatchResources(context.get(), {});
    v1alpha1::NodeWatchResourcesResponse response;
    EXPECT_FALSE(reader->Read(&response));
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  }

  auto context = CallContext();
  auto reader = stub->NodeWatchResources(context.get(), {});
  const absl::Time start = absl::Now();
  (*server)->Stop();
  v1alpha1::NodeWatchResourcesResponse response;
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(PluginServerTest, BaseRequestName) {
  EXPECT_EQ(BaseRequestName("gpu"), "gpu");
  EXPECT_EQ(BaseRequestName("gpu/large"), "gpu");
  EXPECT_EQ(BaseRequestName(""), "");
}

}  // namespace
}  // namespace dra::kubeletplugin
