// Two and three compute-domain-controller processes (the built binary) with leader election on a
// Lease of the local cluster: only the leader reconciles; after a SIGKILL of the leader the
// standby takes over once the lease expired; after a SIGTERM the leader releases the lease and
// the standby takes over at its next try, long before the lease would expire.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/cdcontroller/testing_cluster.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/objects_coordination.h"
#include "test/support/build_paths.h"
#include "test/support/crds.h"

namespace dra::cdcontroller {
namespace {

using ::dra::cdcontroller::testing::AdminClient;
using ::dra::cdcontroller::testing::ComputeDomainManifest;
using ::dra::cdcontroller::testing::Eventually;
using ::dra::cdcontroller::testing::ScopedNamespace;
using json = nlohmann::json;

class ControllerProcess {
 public:
  ControllerProcess(std::string log, std::vector<std::string> args)
      : log_(std::move(log)), args_(std::move(args)) {}
  ~ControllerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  void Start() {
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::freopen(log_.c_str(), "w", stdout);
      if (f == nullptr) _exit(127);
      dup2(STDOUT_FILENO, STDERR_FILENO);
      std::vector<char*> argv;
      static const std::string kBinary =
          dra::testing::BinaryDir() + "/cmd/compute-domain-controller/compute-domain-controller";
      argv.push_back(const_cast<char*>(kBinary.c_str()));
      for (std::string& a : args_) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  void Signal(int sig) { kill(pid_, sig); }
  // The exit status, or -1 when it did not exit within `timeout`.
  int Wait(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return -1;
  }
  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string log_;
  std::vector<std::string> args_;
  pid_t pid_ = -1;
};

class LeaderElectionIntegrationTest : public ::testing::Test {
 protected:
  // The ComputeDomain CRDs: every run starts from an empty control plane.
  static void SetUpTestSuite() {
    absl::Status crds = dra::testing::InstallChartCrds();
    ASSERT_TRUE(crds.ok()) << crds;
  }

  std::unique_ptr<ControllerProcess> Controller(const std::string& pod, absl::Duration lease,
                                                absl::Duration renew) {
    std::vector<std::string> args = {
        "--pod-name=" + pod,
        "--namespace=" + drv_.name(),
        "--watch-namespace=" + ws_.name(),
        "--image-name=registry.invalid/dra:test",
        "--log-verbosity-cd-daemon=4",
        "--kubeconfig=" + dra::testing::AdminKubeconfig(),
        "--kube-api-qps=100",
        "--kube-api-burst=100",
        "--leader-election-enabled",
        "--leader-election-lease-lock-namespace=" + drv_.name(),
        "--leader-election-lease-lock-name=cdc-leader",
        "--leader-election-lease-duration=" + absl::FormatDuration(lease),
        "--leader-election-renew-deadline=" + absl::FormatDuration(renew),
        "--leader-election-retry-period=1s",
    };
    return std::make_unique<ControllerProcess>(
        absl::StrCat(::testing::TempDir(), "/", pod, "-", testing::RandomSuffix(), ".log"), args);
  }
  std::string Holder() {
    auto l = client_->Get(k8s::Lease::kResource, drv_.name(), "cdc-leader");
    if (!l.ok()) return "<none>";
    return (*l)["spec"].value("holderIdentity", "");
  }
  bool HasFinalizer(const std::string& name) {
    auto cd = client_->Get(k8s::ComputeDomain::kResource, ws_.name(), name);
    return cd.ok() && (*cd)["metadata"].value("finalizers", json::array()).size() == 1;
  }
  void CreateDomain(const std::string& name) {
    auto r = client_->Create(k8s::ComputeDomain::kResource, ws_.name(),
                             ComputeDomainManifest(ws_.name(), name, 0, name + "-channel"));
    ASSERT_TRUE(r.ok()) << r.status();
  }
  void DeleteDomainAndWait(const std::string& name) {
    ASSERT_TRUE(client_->Delete(k8s::ComputeDomain::kResource, ws_.name(), name).ok());
    ASSERT_NE(Eventually([&] {
                return absl::IsNotFound(
                    client_->Get(k8s::ComputeDomain::kResource, ws_.name(), name).status());
              }),
              absl::InfiniteDuration());
  }

  std::unique_ptr<k8s::Client> client_ = AdminClient();
  ScopedNamespace drv_{client_.get(), "h3-cdle-drv"};
  ScopedNamespace ws_{client_.get(), "h3-cdle-ws"};
};

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

TEST_F(LeaderElectionIntegrationTest, OnlyTheLeaderWorksAndAStandbyTakesOver) {
  const absl::Duration lease = absl::Seconds(6);
  auto a = Controller("h3-a", lease, absl::Seconds(4));
  auto b = Controller("h3-b", lease, absl::Seconds(4));
  a->Start();
  ASSERT_NE(Eventually([&] { return StartsWith(Holder(), "h3-a-"); }), absl::InfiniteDuration())
      << a->Log();
  b->Start();
  absl::SleepFor(absl::Seconds(3));  // b tried a few times
  EXPECT_TRUE(StartsWith(Holder(), "h3-a-"));

  // Work is proven by the objects a controller creates in its own driver namespace ("created
  // object"): a compute-domain controller installed in the cluster (the e2e suite's Helm release)
  // may add the finalizer first, but never writes into this test's driver namespace.
  CreateDomain("one");
  ASSERT_NE(Eventually([&] {
              return HasFinalizer("one") && absl::StrContains(a->Log(), "\"created object\"");
            }),
            absl::InfiniteDuration())
      << a->Log();
  EXPECT_THAT(b->Log(), ::testing::Not(::testing::HasSubstr("\"created object\"")));
  EXPECT_THAT(b->Log(), ::testing::Not(::testing::HasSubstr("\"added finalizer\"")));
  EXPECT_THAT(b->Log(), ::testing::Not(::testing::HasSubstr("informer caches synced")));

  // SIGKILL: no release; b waits out the lease.
  a->Signal(SIGKILL);
  ASSERT_NE(a->Wait(absl::Seconds(5)), -1);
  absl::Duration took = Eventually([&] { return StartsWith(Holder(), "h3-b-"); });
  ASSERT_NE(took, absl::InfiniteDuration()) << b->Log();
  std::printf("timing: leader SIGKILLed -> standby holds the lease: %s (lease duration %s)\n",
              absl::FormatDuration(took).c_str(), absl::FormatDuration(lease).c_str());
  EXPECT_LE(took, lease + absl::Seconds(3));
  CreateDomain("two");
  ASSERT_NE(Eventually([&] {
              return HasFinalizer("two") && absl::StrContains(b->Log(), "\"created object\"");
            }),
            absl::InfiniteDuration())
      << b->Log();
  DeleteDomainAndWait("one");
  DeleteDomainAndWait("two");
  b->Signal(SIGTERM);
  EXPECT_EQ(b->Wait(absl::Seconds(10)), 0) << b->Log();
}

TEST_F(LeaderElectionIntegrationTest, SigtermReleasesTheLeaseAtOnce) {
  // A long lease: without the release the standby would wait about 20 s.
  const absl::Duration lease = absl::Seconds(20);
  auto a = Controller("h3-c", lease, absl::Seconds(10));
  auto b = Controller("h3-d", lease, absl::Seconds(10));
  a->Start();
  ASSERT_NE(Eventually([&] { return StartsWith(Holder(), "h3-c-"); }), absl::InfiniteDuration())
      << a->Log();
  b->Start();
  absl::SleepFor(absl::Seconds(2));
  a->Signal(SIGTERM);
  const absl::Time sent = absl::Now();
  ASSERT_EQ(a->Wait(absl::Seconds(10)), 0) << a->Log();
  const std::string after_exit = Holder();
  EXPECT_TRUE(after_exit.empty() || StartsWith(after_exit, "h3-d-")) << after_exit;
  EXPECT_THAT(a->Log(), ::testing::HasSubstr("released leader lease"));
  absl::Duration took = Eventually([&] { return StartsWith(Holder(), "h3-d-"); });
  ASSERT_NE(took, absl::InfiniteDuration()) << b->Log();
  std::printf("timing: leader SIGTERMed -> standby holds the lease: %s (lease duration %s)\n",
              absl::FormatDuration(absl::Now() - sent).c_str(),
              absl::FormatDuration(lease).c_str());
  EXPECT_LT(absl::Now() - sent, absl::Seconds(5));
  // The new leader works.
  CreateDomain("three");
  ASSERT_NE(Eventually([&] { return HasFinalizer("three"); }), absl::InfiniteDuration())
      << b->Log();
  DeleteDomainAndWait("three");
  b->Signal(SIGTERM);
  EXPECT_EQ(b->Wait(absl::Seconds(10)), 0) << b->Log();
}

}  // namespace
}  // namespace dra::cdcontroller
