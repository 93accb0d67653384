#include "lib/cddaemon/hosts_file.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/cddaemon/imex_files.h"
#include "lib/common/atomic_file.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::cddaemon {
namespace {

constexpr absl::string_view kDnsNamePrefix = "compute-domain-daemon-";
// The comment the Go daemon writes above its lines; dropped so that a pod switching from the Go
// daemon to ours does not keep it.
constexpr absl::string_view kGoComment = "# Compute Domain Daemon mappings";

bool IsIpAddress(const std::string& text) {
  unsigned char buf[sizeof(struct in6_addr)];
  if (text.find('\0') != std::string::npos) return false;
  return ::inet_pton(AF_INET, text.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

bool IsOurLine(absl::string_view line) {
  absl::string_view trimmed = absl::StripAsciiWhitespace(line);
  return absl::StrContains(line, kDnsNamePrefix) || trimmed == kHostsBlockBegin ||
         trimmed == kHostsBlockEnd || trimmed == kGoComment;
}

}  // namespace

absl::StatusOr<DnsMappings> BuildDnsMappings(
    const std::vector<k8s::ComputeDomainDaemonInfo>& daemons, absl::string_view clique_id,
    int max_nodes) {
  DnsMappings out;
  for (const k8s::ComputeDomainDaemonInfo& d : daemons) {
    if (d.clique_id != clique_id) continue;
    if (d.index < 0 || d.index >= max_nodes) {
      return absl::OutOfRangeError(absl::StrCat("daemon of node ", d.node_name, " has index ",
                                                d.index, ", outside [0, ", max_nodes,
                                                ") of maxNodesPerIMEXDomain"));
    }
    if (d.ip_address.empty()) continue;  // not yet registered with an address
    // The address becomes a line of /etc/hosts: anything but an address (a newline, a name after
    // a blank) would add lines or names of its own, which no rewrite removes.
    if (!IsIpAddress(d.ip_address)) {
      return absl::InvalidArgumentError(
          absl::StrCat("daemon of node ", d.node_name, " has the address \"",
                       absl::CHexEscape(d.ip_address), "\", which is not an IPv4 or IPv6 address"));
    }
    out[DnsName(d.index)] = d.ip_address;
  }
  return out;
}

std::string RenderHostsFile(absl::string_view existing, const DnsMappings& mappings) {
  std::string out;
  std::vector<absl::string_view> lines = absl::StrSplit(existing, '\n');
  // A trailing newline yields one empty last element, which is not a line.
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  for (absl::string_view line : lines) {
    if (IsOurLine(line)) continue;
    absl::StrAppend(&out, line, "\n");
  }
  if (mappings.empty()) return out;
  absl::StrAppend(&out, kHostsBlockBegin, "\n");
  for (const auto& [name, ip] : mappings) absl::StrAppend(&out, ip, "\t", name, "\n");
  absl::StrAppend(&out, kHostsBlockEnd, "\n");
  return out;
}

absl::Status WriteFileInPlace(const std::string& path, absl::string_view contents) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("open ", path, " for writing in place"));
  }
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n =
        ::pwrite(fd, contents.data() + done, contents.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      return absl::ErrnoToStatus(err, absl::StrCat("write ", path, " in place"));
    }
    done += static_cast<size_t>(n);
  }
  if (::ftruncate(fd, static_cast<off_t>(contents.size())) != 0 || ::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("truncate/fsync ", path));
  }
  ::close(fd);
  return absl::OkStatus();
}

absl::Status UpdateHostsFile(const std::string& path, const DnsMappings& mappings, bool* in_place) {
  absl::StatusOr<std::string> existing = ReadFile(path);
  if (!existing.ok() && !absl::IsNotFound(existing.status())) return existing.status();
  const std::string current = existing.ok() ? *existing : "";
  std::string next = RenderHostsFile(current, mappings);
  if (existing.ok() && next == current) return absl::OkStatus();
  if (existing.ok() && in_place != nullptr && *in_place) return WriteFileInPlace(path, next);
  absl::Status atomic = WriteFileAtomically(path, next, 0644);
  if (atomic.ok()) return atomic;
  if (!existing.ok()) return atomic;  // nothing to write into
  // In a pod this is the normal case: the rename over the kubelet's bind mount fails (EBUSY),
  // and it will every time, so later writes go in place at once.
  RETURN_IF_ERROR(WriteFileInPlace(path, next));
  DRA_INFO(
      "hosts file cannot be replaced atomically (a bind mount in a pod?); rewriting it in "
      "place from now on",
      "path", path, "err", atomic);
  if (in_place != nullptr) *in_place = true;
  return absl::OkStatus();
}

}  // namespace dra::cddaemon
