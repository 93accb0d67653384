#include "lib/common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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

// Unlinks files handed to it on its own thread (started on first use, lives until exit).
class BackgroundUnlinker {
 public:
  static BackgroundUnlinker& Get() {
    static BackgroundUnlinker* u = new BackgroundUnlinker();  // never destroyed: see class comment
    return *u;
  }
  void Add(std::string path) {
    absl::MutexLock lock(&mu_);
    pending_.push_back(std::move(path));
  }
  void WaitIdle() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &BackgroundUnlinker::IdleLocked));
  }

 private:
  BackgroundUnlinker() {
    std::thread([this] {
      while (true) {
        std::vector<std::string> batch;
        {
          absl::MutexLock lock(&mu_);
          mu_.Await(absl::Condition(
              +[](std::vector<std::string>* p) { return !p->empty(); }, &pending_));
          batch.swap(pending_);
          busy_ = true;
        }
        for (const std::string& p : batch) ::unlink(p.c_str());
        absl::MutexLock lock(&mu_);
        busy_ = false;
      }
    }).detach();
  }
  bool IdleLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pending_.empty() && !busy_; }

  absl::Mutex mu_;
  std::vector<std::string> pending_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
};

absl::Status WriteTempAndRename(const std::string& path, absl::string_view contents,
                                const AtomicWriteOptions& options) {
  const mode_t mode = options.mode;
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
    if (options.durable && ::fsync(fd.Get()) != 0) return StepError(errno, "fsync", temp);
    if (fd.Close() != 0) return StepError(errno, "close", temp);
    std::string keep;
    if (options.release_replaced_in_background) {
      keep = temp + ".old";
      if (::link(path.c_str(), keep.c_str()) != 0) keep.clear();  // nothing to keep (ENOENT)
    }
    if (::rename(temp.c_str(), path.c_str()) != 0) {
      int err = errno;
      if (!keep.empty()) ::unlink(keep.c_str());
      return StepError(err, absl::StrCat("rename ", temp, " to"), path);
    }
    if (!keep.empty()) BackgroundUnlinker::Get().Add(std::move(keep));
    return absl::OkStatus();
  }();
  if (!status.ok()) {
    ::unlink(temp.c_str());
    return status;
  }

  if (!options.durable) return absl::OkStatus();
  ScopedFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.Get() < 0) return StepError(errno, "open directory", dir);
  if (::fsync(dir_fd.Get()) != 0) return StepError(errno, "fsync directory", dir);
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeDirectories(const std::string& dir, mode_t mode) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      return ErrnoToStatus(errno, absl::StrCat("create directory ", prefix));
    }
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return ErrnoToStatus(errno, absl::StrCat("stat ", dir));
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " is not a directory"));
  }
  return absl::OkStatus();
}

void WaitForBackgroundUnlinks() { BackgroundUnlinker::Get().WaitIdle(); }

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents, mode_t mode) {
  return WriteFileAtomically(path, contents, AtomicWriteOptions{.mode = mode});
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 const AtomicWriteOptions& options) {
  return Annotate(WriteTempAndRename(path, contents, options), absl::StrCat("write ", path));
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
