#include "lib/driverroot/driver_root.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/cdi/root_transform.h"
#include "lib/common/status.h"

namespace dra::driverroot {

const std::vector<std::string> kLibraryDirs = {"/usr/lib64",
                                               "/usr/lib/x86_64-linux-gnu",
                                               "/usr/lib/aarch64-linux-gnu",
                                               "/lib64",
                                               "/lib/x86_64-linux-gnu",
                                               "/lib/aarch64-linux-gnu",
                                               "/usr/lib",
                                               "/lib"};
const std::vector<std::string> kBinaryDirs = {"/usr/bin", "/usr/sbin", "/bin", "/sbin",
                                              "/usr/local/bin"};

namespace {

constexpr int kMaxSymlinks = 40;  // as Linux's path walk

std::string Clean(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::string Join(absl::string_view root, absl::string_view in_root) {
  if (root == "/") return std::string(in_root);
  if (in_root == "/") return std::string(root);
  return absl::StrCat(root, in_root);
}

absl::Status CheckDir(absl::string_view what, const std::string& path) {
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be an absolute path, got \"", path, "\""));
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoToStatus(errno, absl::StrCat(what, " ", path));
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is not a directory"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DriverRoot>> DriverRoot::Create(Options options) {
  options.root = Clean(std::move(options.root));
  options.host_root = Clean(std::move(options.host_root));
  options.proc_root = Clean(std::move(options.proc_root));
  options.sys_root = Clean(std::move(options.sys_root));
  if (options.proc_devices.empty()) options.proc_devices = options.proc_root + "/devices";
  RETURN_IF_ERROR(CheckDir("driver root", options.root));
  for (auto [what, path] :
       {std::pair{"host driver root", &options.host_root},
        std::pair{"proc root", &options.proc_root}, std::pair{"sys root", &options.sys_root},
        std::pair{"proc devices file", &options.proc_devices}}) {
    if (path->empty() || path->front() != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " must be an absolute path, got \"", *path, "\""));
    }
  }
  if (options.dev_root.empty()) {
    struct stat st;
    const std::string dev = Join(options.root, "/dev");
    options.dev_root = ::stat(dev.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? options.root : "/";
  }
  options.dev_root = Clean(std::move(options.dev_root));
  RETURN_IF_ERROR(CheckDir("dev root", options.dev_root));
  return std::unique_ptr<DriverRoot>(new DriverRoot(std::move(options)));
}

std::string DriverRoot::Path(absl::string_view in_root) const { return Join(root(), in_root); }

std::string DriverRoot::DevPath(absl::string_view in_dev_root) const {
  return Join(dev_root(), in_dev_root);
}

absl::StatusOr<std::string> DriverRoot::Resolve(absl::string_view in_root) const {
  std::deque<std::string> pending;
  for (absl::string_view c : absl::StrSplit(in_root, '/', absl::SkipEmpty())) {
    pending.emplace_back(c);
  }
  std::vector<std::string> done;  // components of the resolved path
  int links = 0;
  while (!pending.empty()) {
    std::string c = std::move(pending.front());
    pending.pop_front();
    if (c == ".") continue;
    if (c == "..") {
      if (!done.empty()) done.pop_back();  // ".." at the root stays at the root
      continue;
    }
    const std::string candidate =
        absl::StrCat("/", absl::StrJoin(done, "/"), done.empty() ? "" : "/", c);
    const std::string full = Path(candidate);
    struct stat st;
    if (::lstat(full.c_str(), &st) != 0) {
      // ENOTDIR: an earlier component is a file, so this path does not exist either.
      return ErrnoToStatus(errno == ENOTDIR ? ENOENT : errno, absl::StrCat("resolve ", full));
    }
    if (!S_ISLNK(st.st_mode)) {
      done.push_back(std::move(c));
      continue;
    }
    if (++links > kMaxSymlinks) {
      return absl::InvalidArgumentError(
          absl::StrCat("resolve ", Path(in_root), ": too many levels of symbolic links"));
    }
    char buf[4096];
    const ssize_t n = ::readlink(full.c_str(), buf, sizeof(buf));
    if (n < 0) return ErrnoToStatus(errno, absl::StrCat("readlink ", full));
    const absl::string_view target(buf, static_cast<size_t>(n));
    if (!target.empty() && target.front() == '/') done.clear();  // re-rooted at the root
    std::vector<absl::string_view> parts = absl::StrSplit(target, '/', absl::SkipEmpty());
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) pending.emplace_front(*it);
  }
  return absl::StrCat("/", absl::StrJoin(done, "/"));
}

absl::StatusOr<std::string> DriverRoot::FindLibrary(absl::string_view name) const {
  std::vector<std::string> dirs = {"/"};
  dirs.insert(dirs.end(), kLibraryDirs.begin(), kLibraryDirs.end());
  for (const std::string& dir : dirs) {
    absl::StatusOr<std::string> resolved = Resolve(absl::StrCat(dir == "/" ? "" : dir, "/", name));
    if (!resolved.ok()) continue;
    struct stat st;
    std::string path = Path(*resolved);
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return path;
  }
  return absl::NotFoundError(absl::StrCat("find library ", name, ": not in / or ",
                                          absl::StrJoin(kLibraryDirs, ", "), " under ", root()));
}

absl::StatusOr<std::string> DriverRoot::FindBinary(absl::string_view name) const {
  std::vector<std::string> dirs = kBinaryDirs;
  dirs.push_back("/opt/bin");
  for (const std::string& dir : dirs) {
    absl::StatusOr<std::string> resolved = Resolve(absl::StrCat(dir, "/", name));
    if (!resolved.ok()) continue;
    struct stat st;
    if (::stat(Path(*resolved).c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        (st.st_mode & 0111) != 0) {
      return Path(*resolved);
    }
  }
  return absl::NotFoundError(absl::StrCat("find binary ", name, ": not in ",
                                          absl::StrJoin(dirs, ", "), " under ", root()));
}

std::string DriverRoot::ToHostPath(absl::string_view plugin_path) const {
  return cdi::RewritePathPrefix(plugin_path, root(), host_root())
      .value_or(std::string(plugin_path));
}

void DriverRoot::TransformSpec(cdi::Spec& spec) const {
  cdi::TransformRoot(spec, root(), host_root());
}

}  // namespace dra::driverroot
