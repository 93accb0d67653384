#include "test/doubles/imex/imex_config.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace fake_imex {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

bool ParsePort(const std::string& v, int* out) {
  if (v.empty() || v.size() > 5 || v.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  int p = std::atoi(v.c_str());
  if (p < 1 || p > 65535) return false;
  *out = p;
  return true;
}

}  // namespace

std::optional<ImexConfig> ParseImexConfig(const std::string& text, const std::string& path,
                                          std::string* error) {
  ImexConfig c;
  std::istringstream in(text);
  std::string raw;
  int line_no = 0;
  auto fail = [&](const std::string& what) {
    *error = path + ":" + std::to_string(line_no) + ": " + what;
    return std::nullopt;
  };
  while (std::getline(in, raw)) {
    ++line_no;
    std::string line = Trim(raw);
    if (line.empty() || line[0] == '#') continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) return fail("expected KEY=VALUE, got \"" + line + "\"");
    std::string key = Trim(line.substr(0, eq));
    std::string value = Trim(line.substr(eq + 1));
    if (key.empty()) return fail("empty key in \"" + line + "\"");
    if (key == "SERVER_PORT") {
      if (!ParsePort(value, &c.server_port)) return fail("SERVER_PORT: not a port: " + value);
    } else if (key == "IMEX_CMD_UNIX_DOMAIN_PATH") {
      c.cmd_unix_path = value;
    } else if (key == "IMEX_CMD_PORT") {
      if (!ParsePort(value, &c.cmd_port)) return fail("IMEX_CMD_PORT: not a port: " + value);
    } else if (key == "IMEX_NODE_CONFIG_FILE") {
      c.node_config_file = value;
    } else if (key == "IMEX_CMD_BIND_INTERFACE_IP") {
      c.cmd_bind_ip = value;
    } else if (key == "BIND_INTERFACE_IP") {
      c.bind_ip = value;
    }
    // Every other key is accepted and ignored, as the fake does not model it.
  }
  return c;
}

std::optional<ImexConfig> LoadImexConfig(const std::string& path, std::string* error) {
  std::optional<std::string> text = ReadWholeFile(path);
  if (!text) {
    *error = "cannot read config file " + path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  return ParseImexConfig(*text, path, error);
}

std::vector<std::string> ParseNodesFile(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string raw;
  while (std::getline(in, raw)) {
    std::string line = Trim(raw);
    if (line.empty() || line[0] == '#') continue;
    out.push_back(line);
  }
  return out;
}

bool MakeSockaddr(const std::string& ip, int port, sockaddr_in* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sin_family = AF_INET;
  addr->sin_port = htons(static_cast<uint16_t>(port));
  return ::inet_pton(AF_INET, ip.c_str(), &addr->sin_addr) == 1;
}

std::optional<std::string> ResolveIPv4(const std::string& name) {
  sockaddr_in sa;
  if (MakeSockaddr(name, 0, &sa)) return name;
  const char* hosts = std::getenv("FAKE_IMEX_HOSTS_FILE");
  if (hosts != nullptr && *hosts != '\0') {
    std::optional<std::string> text = ReadWholeFile(hosts);
    if (!text) return std::nullopt;
    std::istringstream in(*text);
    std::string raw;
    while (std::getline(in, raw)) {
      size_t hash = raw.find('#');
      if (hash != std::string::npos) raw.resize(hash);
      std::istringstream fields(raw);
      std::string ip, host;
      if (!(fields >> ip) || !MakeSockaddr(ip, 0, &sa)) continue;
      while (fields >> host) {
        if (host == name) return ip;
      }
    }
    return std::nullopt;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) {
    return std::nullopt;
  }
  char buf[INET_ADDRSTRLEN] = {};
  auto* in4 = reinterpret_cast<sockaddr_in*>(res->ai_addr);
  ::inet_ntop(AF_INET, &in4->sin_addr, buf, sizeof(buf));
  ::freeaddrinfo(res);
  return std::string(buf);
}

}  // namespace fake_imex
