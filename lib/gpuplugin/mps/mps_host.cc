#include "lib/gpuplugin/mps/mps_host.h"

#include <sys/mount.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/common/status.h"

namespace dra::gpu {
namespace {

constexpr char kFallbackShmSize[] = "65536k";

bool IsOctal(char c) { return c >= '0' && c <= '7'; }

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string UnescapeMountField(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && IsOctal(s[i + 1]) && IsOctal(s[i + 2]) &&
        IsOctal(s[i + 3])) {
      out.push_back(
          static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

std::string MpsShmSize(const std::string& meminfo_path) {
  std::ifstream in(meminfo_path);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() < 3 || fields[0] != "MemTotal:") continue;
    uint64_t total = 0;
    if (!absl::SimpleAtoi(fields[1], &total) || total < 2 || !absl::ascii_isalpha(fields[2][0])) {
      break;
    }
    return absl::StrCat(total / 2, std::string(1, absl::ascii_tolower(fields[2][0])));
  }
  return kFallbackShmSize;
}

std::string MpsShmMountOptions(absl::string_view size) {
  return absl::StrCat("rw,nosuid,nodev,noexec,relatime,size=", size);
}

absl::StatusOr<bool> IsMountPoint(const std::string& path, const std::string& mountinfo_path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return dra::ErrnoToStatus(errno, absl::StrCat("resolve ", path));
  }
  std::ifstream in(mountinfo_path);
  if (!in) return absl::InternalError(absl::StrCat("read ", mountinfo_path, ": cannot open"));
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mount-point options ...
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    if (fields.size() > 4 && UnescapeMountField(fields[4]) == resolved) return true;
  }
  return false;
}

absl::Status MountTmpfs(const std::string& source, const std::string& target,
                        const std::string& options) {
  unsigned long flags = 0;
  std::vector<std::string> data;
  for (absl::string_view o : absl::StrSplit(options, ',', absl::SkipEmpty())) {
    if (o == "rw") {
    } else if (o == "nosuid") {
      flags |= MS_NOSUID;
    } else if (o == "nodev") {
      flags |= MS_NODEV;
    } else if (o == "noexec") {
      flags |= MS_NOEXEC;
    } else if (o == "relatime") {
      flags |= MS_RELATIME;
    } else {
      data.emplace_back(o);
    }
  }
  std::string data_text;
  for (const std::string& d : data) absl::StrAppend(&data_text, data_text.empty() ? "" : ",", d);
  if (::mount(source.c_str(), target.c_str(), "tmpfs", flags, data_text.c_str()) != 0) {
    return dra::ErrnoToStatus(
        errno, absl::StrCat("mount -t tmpfs -o ", options, " ", source, " ", target));
  }
  return absl::OkStatus();
}

absl::Status Unmount(const std::string& target) {
  if (::umount2(target.c_str(), 0) != 0) {
    return dra::ErrnoToStatus(errno, absl::StrCat("unmount ", target));
  }
  return absl::OkStatus();
}

}  // namespace dra::gpu
