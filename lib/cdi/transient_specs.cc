#include "lib/cdi/transient_specs.h"

#include <dirent.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "lib/cdi/validate.h"
#include "lib/cdi/version.h"
#include "lib/common/atomic_file.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/common/trace.h"

namespace dra::cdi {
namespace {

constexpr absl::string_view kJson = ".json";
constexpr absl::string_view kYaml = ".yaml";

absl::Status RemoveIfExists(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoToStatus(errno, absl::StrCat("remove CDI spec ", path));
  }
  return absl::OkStatus();
}

// True only when statfs says `dir` is on tmpfs; an error (logged) counts as "not tmpfs", the
// safe side.
bool OnTmpfs(const std::string& dir) {
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) != 0) {
    DRA_WARNING("statfs of the CDI spec directory failed; writes stay durable", "dir", dir, "err",
                ErrnoToStatus(errno, "statfs"));
    return false;
  }
  return static_cast<int64_t>(fs.f_type) == static_cast<int64_t>(TMPFS_MAGIC);
}

}  // namespace

std::string TransientSpecName(const Kind& kind, absl::string_view id) {
  return absl::StrCat(kind.vendor, "-", kind.class_name, "_",
                      absl::StrReplaceAll(id, {{"/", "_"}}));
}

absl::StatusOr<std::unique_ptr<TransientSpecDir>> TransientSpecDir::Create(std::string dir,
                                                                           absl::string_view kind) {
  if (dir.empty()) return absl::InvalidArgumentError("CDI spec directory must not be empty");
  ASSIGN_OR_RETURN(Kind parsed, ParseKind(kind));
  RETURN_IF_ERROR(MakeDirectories(dir));
  const bool durable = !OnTmpfs(dir);
  DRA_VLOG(2, "CDI spec directory", "dir", dir, "tmpfs", !durable);
  return std::unique_ptr<TransientSpecDir>(
      new TransientSpecDir(std::move(dir), std::move(parsed), durable));
}

std::string TransientSpecDir::PathFor(absl::string_view id) const {
  return absl::StrCat(dir_, "/", TransientSpecName(kind_, id), kJson);
}

absl::StatusOr<std::string> TransientSpecDir::Write(absl::string_view id, Spec spec) const {
  std::string path = PathFor(id);
  const std::string context = absl::StrCat("write CDI spec ", path);
  if (id.empty() || id.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": invalid spec ID"));
  }
  if (spec.kind != kind_.ToString()) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": kind \"", spec.kind,
                                                   "\" does not match \"", kind_.ToString(), "\""));
  }
  if (spec.version.empty()) spec.version = MinimumVersion(spec).version;
  RETURN_IF_ERROR(Annotate(ValidateSpec(spec), context));
  TraceStage stage("cdiWrite");
  RETURN_IF_ERROR(
      WriteFileAtomically(path, EncodeSpec(spec), AtomicWriteOptions{.durable = durable_}));
  const std::string legacy = absl::StrCat(dir_, "/", TransientSpecName(kind_, id), kYaml);
  if (absl::Status s = RemoveIfExists(legacy); !s.ok()) {
    DRA_WARNING("could not remove legacy CDI spec", "path", legacy, "err", s);
  }
  DRA_VLOG(4, "wrote CDI spec", "path", path, "devices", spec.devices.size());
  return path;
}

absl::Status TransientSpecDir::Remove(absl::string_view id) const {
  const std::string base = absl::StrCat(dir_, "/", TransientSpecName(kind_, id));
  RETURN_IF_ERROR(RemoveIfExists(base + std::string(kJson)));
  RETURN_IF_ERROR(RemoveIfExists(base + std::string(kYaml)));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TransientSpecFile>> TransientSpecDir::List() const {
  const std::string prefix = TransientSpecName(kind_, "");
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return ErrnoToStatus(errno, absl::StrCat("list CDI specs in ", dir_));
  std::vector<TransientSpecFile> out;
  int read_errno = 0;
  while (true) {
    errno = 0;
    const dirent* entry = ::readdir(d);
    if (entry == nullptr) {
      read_errno = errno;
      break;
    }
    absl::string_view name = entry->d_name;
    if (name.empty() || name.front() == '.' || !absl::StartsWith(name, prefix)) continue;
    absl::string_view id = name.substr(prefix.size());
    if (!absl::ConsumeSuffix(&id, kJson) && !absl::ConsumeSuffix(&id, kYaml)) continue;
    if (id.empty()) continue;
    std::string path = absl::StrCat(dir_, "/", name);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back({std::string(id), std::move(path)});
  }
  ::closedir(d);
  if (read_errno != 0) return ErrnoToStatus(read_errno, absl::StrCat("list CDI specs in ", dir_));
  std::sort(out.begin(), out.end(),
            [](const TransientSpecFile& a, const TransientSpecFile& b) { return a.path < b.path; });
  return out;
}

absl::StatusOr<int> TransientSpecDir::RemoveTemporaryFiles() const {
  // WriteFileAtomically names its temporary files ".<target name>.tmp.<random>".
  const std::string prefix = absl::StrCat(".", TransientSpecName(kind_, ""));
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return ErrnoToStatus(errno, absl::StrCat("list CDI specs in ", dir_));
  std::vector<std::string> stale;
  while (const dirent* entry = ::readdir(d)) {
    absl::string_view name = entry->d_name;
    if (absl::StartsWith(name, prefix) && absl::StrContains(name, ".tmp.")) {
      stale.push_back(absl::StrCat(dir_, "/", name));
    }
  }
  ::closedir(d);
  int removed = 0;
  for (const std::string& path : stale) {
    if (::unlink(path.c_str()) == 0) {
      ++removed;
    } else if (errno != ENOENT) {
      return ErrnoToStatus(errno, absl::StrCat("remove ", path));
    }
  }
  return removed;
}

}  // namespace dra::cdi
