#include "lib/k8s/rest_config.h"

#include <cstdlib>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::k8s {
namespace {

using ::testing::HasSubstr;

class RestConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/restcfg-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string Write(const std::string& name, const std::string& text) {
    std::string p = dir_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  std::string dir_;
};

constexpr char kValid[] = R"(apiVersion: v1
kind: Config
current-context: main
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:6443/
    certificate-authority-data: Q0EtUEVN
- name: other
  cluster:
    server: https://10.0.0.1:6443
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    client-certificate: certs/admin.crt
    client-key-data: S0VZLVBFTQ==
- name: robot
  user:
    token: abc123
contexts:
- name: main
  context: {cluster: local, user: admin}
- name: robot
  context: {cluster: other, user: robot}
)";

TEST_F(RestConfigTest, LoadsCurrentContextWithInlineAndRelativeFiles) {
  std::system(("mkdir -p " + dir_ + "/certs").c_str());
  Write("certs/admin.crt", "CERT-PEM");
  auto cfg = LoadKubeconfig(Write("config", kValid));
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->server, "https://127.0.0.1:6443");
  EXPECT_EQ(cfg->ca_pem, "CA-PEM");
  EXPECT_EQ(cfg->client_cert_pem, "CERT-PEM");
  EXPECT_EQ(cfg->client_key_pem, "KEY-PEM");
  EXPECT_FALSE(cfg->insecure_skip_tls_verify);
}

TEST_F(RestConfigTest, ExplicitContextWithToken) {
  auto cfg = LoadKubeconfig(Write("config", kValid), "robot");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->server, "https://10.0.0.1:6443");
  EXPECT_TRUE(cfg->insecure_skip_tls_verify);
  EXPECT_EQ(cfg->bearer_token, "abc123");
}

TEST_F(RestConfigTest, BadKubeconfigsGiveOneLineErrorsNamingTheCause) {
  struct Case {
    std::string text;
    std::string context;
    std::string want;
  };
  const Case cases[] = {
      {"key: [unclosed", "", "not valid YAML"},
      {"- a\n- b\n", "", "not a YAML mapping"},
      {"apiVersion: v1\nkind: Config\n", "", "no current-context"},
      {kValid, "missing", "context \"missing\" not found in contexts"},
      {std::string(kValid).replace(std::string(kValid).find("server: https://127.0.0.1:6443/"), 31,
                                   "server: ftp://x"),
       "", "is not an http(s) URL"},
      {std::string(kValid).replace(std::string(kValid).find("Q0EtUEVN"), 8, "not*base64"), "",
       "certificate-authority-data is not valid base64"},
      {std::string(kValid).replace(std::string(kValid).find("client-key-data: S0VZLVBFTQ=="), 29,
                                   "exec: {command: x}"),
       "", "needs both client-certificate and client-key"},
  };
  std::system(("mkdir -p " + dir_ + "/certs").c_str());
  Write("certs/admin.crt", "CERT-PEM");
  for (const Case& c : cases) {
    std::string path = Write("bad", c.text);
    auto cfg = LoadKubeconfig(path, c.context);
    ASSERT_FALSE(cfg.ok()) << c.want;
    EXPECT_THAT(std::string(cfg.status().message()), HasSubstr(c.want));
    EXPECT_THAT(std::string(cfg.status().message()), HasSubstr(path));
    EXPECT_EQ(std::string(cfg.status().message()).find('\n'), std::string::npos) << cfg.status();
  }
}

TEST_F(RestConfigTest, MissingFileNamesThePath) {
  auto cfg = LoadKubeconfig(dir_ + "/nope");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(cfg.status().message()), HasSubstr(dir_ + "/nope"));
}

TEST_F(RestConfigTest, InClusterReadsServiceAccountFiles) {
  Write("token", "tok\n");
  Write("ca.crt", "CA");
  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto cfg = InClusterConfig(dir_);
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->server, "https://10.96.0.1:443");
  EXPECT_EQ(cfg->bearer_token_file, dir_ + "/token");
  EXPECT_EQ(cfg->ca_pem, "CA");
  auto missing = InClusterConfig(dir_);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("KUBERNETES_SERVICE_HOST"));
}

}  // namespace
}  // namespace dra::k8s
