#include "lib/k8s/rest_config.h"

#include <cstdlib>
#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "lib/common/atomic_file.h"
#include "lib/common/status.h"
#include "yaml-cpp/yaml.h"

namespace dra::k8s {
namespace {

// Returns node[key] as a string, or "" if absent.
std::string Str(const YAML::Node& node, const char* key) {
  const YAML::Node v = node[key];
  return v && v.IsScalar() ? v.as<std::string>() : std::string();
}

// Finds the entry named `name` in a kubeconfig list (clusters, users, contexts) and returns its
// inner map (the `cluster`, `user` or `context` field).
absl::StatusOr<YAML::Node> FindNamed(const YAML::Node& root, const char* list, const char* inner,
                                     const std::string& name, absl::string_view path) {
  const YAML::Node entries = root[list];
  if (entries && entries.IsSequence()) {
    for (const YAML::Node& e : entries) {
      if (Str(e, "name") == name) {
        if (!e[inner] || !e[inner].IsMap()) {
          return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", path, ": ", list,
                                                         " entry \"", name, "\" has no ", inner));
        }
        return e[inner];
      }
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("kubeconfig ", path, ": ", inner, " \"", name, "\" not found in ", list));
}

// Reads PEM from an inline base64 `<key>-data` field or from a file field `<key>` (relative paths
// are relative to the kubeconfig's directory, as kubectl does).
absl::StatusOr<std::string> PemField(const YAML::Node& node, const std::string& key,
                                     const std::filesystem::path& base, absl::string_view path,
                                     const KubeconfigFileReader& read_file) {
  std::string data = Str(node, (key + "-data").c_str());
  if (!data.empty()) {
    std::string decoded;
    if (!absl::Base64Unescape(data, &decoded)) {
      return absl::InvalidArgumentError(
          absl::StrCat("kubeconfig ", path, ": ", key, "-data is not valid base64"));
    }
    return decoded;
  }
  std::string file = Str(node, key.c_str());
  if (file.empty()) return std::string();
  std::filesystem::path p(file);
  if (p.is_relative()) p = base / p;
  auto contents = read_file(p.string());
  if (!contents.ok()) {
    return Annotate(contents.status(), absl::StrCat("kubeconfig ", path, ": ", key));
  }
  return *contents;
}

}  // namespace

absl::StatusOr<RestConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  auto text = ReadFile(path);
  if (!text.ok()) return Annotate(text.status(), "read kubeconfig");
  return ParseKubeconfig(*text, path, context, [](const std::string& p) { return ReadFile(p); });
}

absl::StatusOr<RestConfig> ParseKubeconfig(absl::string_view text, const std::string& path,
                                           const std::string& context,
                                           const KubeconfigFileReader& read_file) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig ", path, ": not valid YAML: ", e.what()));
  }
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", path, ": not a YAML mapping"));
  }
  std::string ctx_name = context.empty() ? Str(root, "current-context") : context;
  if (ctx_name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig ", path, ": no current-context and no context given"));
  }
  try {
    ASSIGN_OR_RETURN(YAML::Node ctx, FindNamed(root, "contexts", "context", ctx_name, path));
    ASSIGN_OR_RETURN(YAML::Node cluster,
                     FindNamed(root, "clusters", "cluster", Str(ctx, "cluster"), path));
    const std::filesystem::path base = std::filesystem::path(path).parent_path();
    RestConfig cfg;
    cfg.source = absl::StrCat("kubeconfig ", path, " context \"", ctx_name, "\"");
    cfg.server = std::string(absl::StripSuffix(Str(cluster, "server"), "/"));
    if (cfg.server.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", path, ": cluster \"",
                                                     Str(ctx, "cluster"), "\" has no server"));
    }
    if (!absl::StartsWith(cfg.server, "https://") && !absl::StartsWith(cfg.server, "http://")) {
      return absl::InvalidArgumentError(
          absl::StrCat("kubeconfig ", path, ": server \"", cfg.server, "\" is not an http(s) URL"));
    }
    cfg.insecure_skip_tls_verify = Str(cluster, "insecure-skip-tls-verify") == "true";
    cfg.tls_server_name = Str(cluster, "tls-server-name");
    ASSIGN_OR_RETURN(cfg.ca_pem, PemField(cluster, "certificate-authority", base, path, read_file));
    std::string user_name = Str(ctx, "user");
    if (!user_name.empty()) {
      ASSIGN_OR_RETURN(YAML::Node user, FindNamed(root, "users", "user", user_name, path));
      ASSIGN_OR_RETURN(cfg.client_cert_pem,
                       PemField(user, "client-certificate", base, path, read_file));
      ASSIGN_OR_RETURN(cfg.client_key_pem, PemField(user, "client-key", base, path, read_file));
      if (cfg.client_cert_pem.empty() != cfg.client_key_pem.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("kubeconfig ", path, ": user \"", user_name,
                         "\" needs both client-certificate and client-key, or neither"));
      }
      cfg.bearer_token = Str(user, "token");
      std::string token_file = Str(user, "tokenFile");
      if (!token_file.empty()) {
        std::filesystem::path p(token_file);
        cfg.bearer_token_file = p.is_relative() ? (base / p).string() : token_file;
      }
      if (user["exec"] || user["auth-provider"]) {
        return absl::UnimplementedError(
            absl::StrCat("kubeconfig ", path, ": user \"", user_name,
                         "\" uses exec or auth-provider credentials, which are not supported; "
                         "use a client certificate or a token"));
      }
    }
    return cfg;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", path, ": ", e.what()));
  }
}

absl::StatusOr<RestConfig> InClusterConfig(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return absl::FailedPreconditionError(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
  RestConfig cfg;
  std::string h(host);
  if (h.find(':') != std::string::npos) h = absl::StrCat("[", h, "]");  // IPv6 literal
  cfg.server = absl::StrCat("https://", h, ":", port);
  cfg.bearer_token_file = sa_dir + "/token";
  auto token = ReadFile(cfg.bearer_token_file);
  if (!token.ok()) return Annotate(token.status(), "in-cluster config: service-account token");
  auto ca = ReadFile(sa_dir + "/ca.crt");
  if (!ca.ok()) return Annotate(ca.status(), "in-cluster config: service-account CA");
  cfg.ca_pem = *ca;
  cfg.source = "in-cluster service account";
  return cfg;
}

absl::StatusOr<RestConfig> ResolveRestConfig(const std::string& kubeconfig_flag) {
  if (!kubeconfig_flag.empty()) return LoadKubeconfig(kubeconfig_flag);
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    // KUBECONFIG may be a list; like client-go's loader for a single cluster, take the first.
    std::string first(env);
    first = first.substr(0, first.find(':'));
    return LoadKubeconfig(first);
  }
  if (const char* host = std::getenv("KUBERNETES_SERVICE_HOST"); host != nullptr && *host) {
    return InClusterConfig();
  }
  const char* home = std::getenv("HOME");
  if (home != nullptr) {
    std::string def = absl::StrCat(home, "/.kube/config");
    if (std::filesystem::exists(def)) return LoadKubeconfig(def);
  }
  return absl::FailedPreconditionError(
      "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, or run in a pod");
}

}  // namespace dra::k8s
