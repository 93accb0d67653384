#pragma once

// The parts of an IMEX config file (KEY=VALUE lines) that the fake nvidia-imex and nvidia-imex-ctl
// use, and the name resolution they share. Plain C++ (no abseil): the fakes are mounted into
// containers that have only glibc.

#include <netinet/in.h>

#include <optional>
#include <string>
#include <vector>

namespace fake_imex {

struct ImexConfig {
  int server_port = 50000;       // SERVER_PORT: peer connections
  std::string node_config_file;  // IMEX_NODE_CONFIG_FILE: names or IPs, one a line
  std::string cmd_bind_ip;       // IMEX_CMD_BIND_INTERFACE_IP; "" or 0.0.0.0: all
  int cmd_port = 50005;          // IMEX_CMD_PORT: the ctl query port
  std::string cmd_unix_path;     // IMEX_CMD_UNIX_DOMAIN_PATH: also serve queries here ("" = not)
  std::string bind_ip;           // BIND_INTERFACE_IP: own peer address; "" derives it
};

// Parses the file text. Blank lines and lines starting with '#' are skipped; other lines must be
// KEY=VALUE (spaces around both trimmed). Unknown keys are ignored. On error returns nullopt and
// sets `error` to "<path>:<line>: <what>".
std::optional<ImexConfig> ParseImexConfig(const std::string& text, const std::string& path,
                                          std::string* error);
// Reads and parses `path`.
std::optional<ImexConfig> LoadImexConfig(const std::string& path, std::string* error);

// The entries of a nodes file: trimmed non-empty lines that do not start with '#'.
std::vector<std::string> ParseNodesFile(const std::string& text);

// Resolves `name` to one IPv4 address in dotted form: a literal IPv4 address is itself; otherwise,
// when FAKE_IMEX_HOSTS_FILE is set, only that hosts-format file is consulted (so a test can give
// each fake its own /etc/hosts), else the system resolver (getaddrinfo, AF_INET: /etc/hosts and
// DNS). nullopt when it does not resolve.
std::optional<std::string> ResolveIPv4(const std::string& name);

// Fills `addr` for ip:port; false when `ip` is not an IPv4 literal.
bool MakeSockaddr(const std::string& ip, int port, sockaddr_in* addr);

std::string Trim(const std::string& s);
std::optional<std::string> ReadWholeFile(const std::string& path);

}  // namespace fake_imex
