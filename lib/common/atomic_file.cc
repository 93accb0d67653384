#include "lib/common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/common/status.h"

namespace dra {
namespace {

// Closes the fd on scope exit unless released.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int Get() const { return fd_; }
  // Closes now and reports close's error (which may be a deferred write error).
  int Close() {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

absl::Status WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "");
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// Splits "a/b/c" into ("a/b", "c"); "c" into (".", "c"); "/c" into ("/", "c").
std::pair<std::string, std::string> SplitPath(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

absl::Status StepError(int errno_value, absl::string_view step, absl::string_view file) {
  return ErrnoToStatus(errno_value, absl::StrCat(step, " ", file));
}

absl::Status WriteTempAndRename(const std::string& path, absl::string_view contents, mode_t mode) {
  auto [dir, base] = SplitPath(path);
  if (base.empty()) return absl::InvalidArgumentError("path names a directory");
  std::string temp = absl::StrCat(dir, "/.", base, ".tmp.XXXXXX");
  std::vector<char> temp_buf(temp.begin(), temp.end());
  temp_buf.push_back('\0');
  ScopedFd fd(::mkostemp(temp_buf.data(), O_CLOEXEC));
  if (fd.Get() < 0) return StepError(errno, "create temporary file in", dir);
  temp.assign(temp_buf.data());

  absl::Status status = [&]() -> absl::Status {
    if (::fchmod(fd.Get(), mode) != 0) return StepError(errno, "chmod", temp);
    if (absl::Status s = WriteAll(fd.Get(), contents); !s.ok()) {
      return Annotate(s, absl::StrCat("write ", temp));
    }
    if (::fsync(fd.Get()) != 0) return StepError(errno, "fsync", temp);
    if (fd.Close() != 0) return StepError(errno, "close", temp);
    if (::rename(temp.c_str(), path.c_str()) != 0) {
      return StepError(errno, absl::StrCat("rename ", temp, " to"), path);
    }
    return absl::OkStatus();
  }();
  if (!status.ok()) {
    ::unlink(temp.c_str());
    return status;
  }

  ScopedFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.Get() < 0) return StepError(errno, "open directory", dir);
  if (::fsync(dir_fd.Get()) != 0) return StepError(errno, "fsync directory", dir);
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents, mode_t mode) {
  return Annotate(WriteTempAndRename(path, contents, mode), absl::StrCat("write ", path));
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const std::string context = absl::StrCat("read ", path);
  int raw_fd;
  do {
    raw_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (raw_fd < 0 && errno == EINTR);
  if (raw_fd < 0) return ErrnoToStatus(errno, context);
  ScopedFd fd(raw_fd);
  std::string out;
  char buf[64 * 1024];
  while (true) {
    ssize_t n = ::read(fd.Get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, context);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace dra
