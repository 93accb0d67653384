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
#include "lib/k8s/objects_resource.h"
#include "test/support/build_paths.h"
#include "test/support/fuzz_corpus.h"

namespace dra::k8s::fuzz {
namespace {

using Target = std::function<void(const uint8_t*, size_t)>;

std::vector<std::string> Corpus(const std::string& target) {
  std::vector<std::string> out;
  auto dir =
      std::filesystem::path(dra::testing::SourceDir()) / "lib" / "k8s" / "fuzz_corpus" / target;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    out.push_back(buffer.str());
  }
  return out;
}

void Run(const Target& target, const std::string& data) {
  target(reinterpret_cast<const uint8_t*>(data.data()), data.size());
}

void ReplayAndMutate(const std::string& name, const Target& target) {
  std::vector<std::string> seeds = Corpus(name);
  ASSERT_GE(seeds.size(), 8u) << "corpus missing for " << name;
  for (const std::string& s : seeds) Run(target, s);
  for (const std::string& s : {std::string(), std::string("\0", 1), std::string(1 << 16, '{'),
                               std::string(1 << 16, '\n'), std::string(1 << 17, 'x')}) {
    Run(target, s);
  }
  const std::vector<std::string> tokens = {"null",
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
  std::mt19937 rng(dra::testing::EnvOr("DRA_K8S_FUZZ_SEED", 20240607));
  const uint64_t iterations = dra::testing::EnvOr("DRA_K8S_FUZZ_ITERATIONS", 20000);
  for (uint64_t i = 0; i < iterations; ++i) {
    std::string data = dra::testing::MutateSeed(rng, seeds, tokens);
    Run(target, data);
  }
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

TEST(K8sFuzzReplayTest, HttpResponse) { ReplayAndMutate("http_response", HttpResponse); }
TEST(K8sFuzzReplayTest, WatchStream) { ReplayAndMutate("watch", WatchStream); }
TEST(K8sFuzzReplayTest, Objects) { ReplayAndMutate("objects", Objects); }
TEST(K8sFuzzReplayTest, Kubeconfig) { ReplayAndMutate("kubeconfig", Kubeconfig); }

}  // namespace
}  // namespace dra::k8s::fuzz
