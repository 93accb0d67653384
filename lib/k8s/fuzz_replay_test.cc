// Replays lib/k8s/fuzz_corpus/<target>/ through the fuzz entry points (fuzz_targets.h), plus a
// short fixed-seed mutation run over each corpus, so CI exercises them without a fuzzer runtime. A
// crash, an exception or an invariant violation aborts this test. For a longer local run:
//   DRA_K8S_FUZZ_ITERATIONS=1000000 DRA_K8S_FUZZ_SEED=7 build/check/lib/k8s/k8s_fuzz_replay_test

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/common/json_access.h"
#include "lib/k8s/fuzz_targets.h"
#include "lib/k8s/objects_apps.h"
#include "lib/k8s/objects_compute_domain.h"
#include "lib/k8s/objects_coordination.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/objects_resource.h"
#include "test/support/build_paths.h"
#include "test/support/fuzz_corpus.h"

namespace dra::k8s::fuzz {
namespace {

void ReplayAndMutate(const std::string& name, const dra::testing::FuzzTarget& target) {
  dra::testing::FuzzReplay replay;
  replay.corpus = "lib/k8s/fuzz_corpus/" + name;
  replay.tokens = {"null",
                   "true",
                   "0",
                   "-1",
                   "1e400",
                   "18446744073709551616",
                   "\"\"",
                   "{}",
                   "[]",
                   "\n",
                   "\"metadata\"",
                   "\"items\"",
                   "\"object\"",
                   "\"type\"",
                   "\"ERROR\"",
                   "\"ADDED\"",
                   "\"spec\"",
                   "\"status\"",
                   "\"daemons\"",
                   "\"nodes\"",
                   ",",
                   ":",
                   "\r\n",
                   "\r\n\r\n",
                   "Transfer-Encoding: chunked\r\n",
                   "Content-Length: 5\r\n",
                   "ffff\r\n",
                   "current-context: ",
                   "- name: ",
                   "  cluster:\n",
                   "client-key-data: "};
  replay.iterations_env = "DRA_K8S_FUZZ_ITERATIONS";
  replay.seed_env = "DRA_K8S_FUZZ_SEED";
  dra::testing::ReplayAndMutate(replay, target);
}

// The valid seeds must stay valid, or the corpus stops reaching the decoders' inner fields.
TEST(K8sFuzzReplayTest, ValidObjectSeedsDecode) {
  auto read = [](const char* file) {
    std::ifstream in(std::filesystem::path(dra::testing::SourceDir()) /
                     "lib/k8s/fuzz_corpus/objects" / file);
    std::stringstream buffer;
    buffer << in.rdbuf();
    absl::StatusOr<nlohmann::json> j = json_access::Parse(buffer.str());
    EXPECT_TRUE(j.ok()) << file << ": " << j.status();
    return j.value_or(nlohmann::json());
  };
  EXPECT_TRUE(ResourceClaim::FromJson(read("claim.json")).ok());
  EXPECT_TRUE(ResourceSlice::FromJson(read("slice.json")).ok());
}

// Likewise the typed seeds: each valid one decodes as its kind.
TEST(K8sFuzzReplayTest, ValidTypedSeedsDecode) {
  auto read = [](const char* file) {
    std::ifstream in(std::filesystem::path(dra::testing::SourceDir()) /
                     "lib/k8s/fuzz_corpus/typed" / file);
    std::stringstream buffer;
    buffer << in.rdbuf();
    absl::StatusOr<nlohmann::json> j = json_access::Parse(buffer.str());
    EXPECT_TRUE(j.ok()) << file << ": " << j.status();
    return j.value_or(nlohmann::json());
  };
  EXPECT_TRUE(ComputeDomain::FromJson(read("computedomain.json")).ok());
  EXPECT_TRUE(ComputeDomainClique::FromJson(read("clique.json")).ok());
  EXPECT_TRUE(Pod::FromJson(read("pod.json")).ok());
  EXPECT_TRUE(Node::FromJson(read("node.json")).ok());
  EXPECT_TRUE(DaemonSet::FromJson(read("daemonset.json")).ok());
  EXPECT_TRUE(Lease::FromJson(read("lease.json")).ok());
  EXPECT_TRUE(ResourceClaimTemplate::FromJson(read("claimtemplate.json")).ok());
  EXPECT_TRUE(DeviceClass::FromJson(read("deviceclass.json")).ok());
  EXPECT_TRUE(Event::FromJson(read("event.json")).ok());
}

TEST(K8sFuzzReplayTest, HttpResponse) { ReplayAndMutate("http_response", HttpResponse); }
TEST(K8sFuzzReplayTest, WatchStream) { ReplayAndMutate("watch", WatchStream); }
TEST(K8sFuzzReplayTest, Objects) { ReplayAndMutate("objects", Objects); }
TEST(K8sFuzzReplayTest, TypedObjects) { ReplayAndMutate("typed", TypedObjects); }
TEST(K8sFuzzReplayTest, Kubeconfig) { ReplayAndMutate("kubeconfig", Kubeconfig); }

}  // namespace
}  // namespace dra::k8s::fuzz
