#include "lib/checkpoint/checkpoint.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/checkpoint/go_format.h"
#include "lib/common/atomic_file.h"
#include "lib/common/file_lock.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/common/trace.h"

namespace dra::checkpoint {
namespace {

// WriteFileAtomically's temporary files for the checkpoint: ".checkpoint.json.tmp.XXXXXX".
constexpr absl::string_view kTempPrefix = ".checkpoint.json.tmp.";
constexpr absl::string_view kCorruptInfix = ".corrupt-";
constexpr absl::string_view kGoDriverInfix = ".go-driver-";

// Names in `dir` (not "." or ".."); errors name the directory.
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoToStatus(errno, absl::StrCat("list ", dir));
  std::vector<std::string> names;
  int read_errno = 0;
  while (true) {
    errno = 0;
    const dirent* entry = ::readdir(d);
    if (entry == nullptr) {
      read_errno = errno;
      break;
    }
    absl::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(d);
  if (read_errno != 0) return ErrnoToStatus(read_errno, absl::StrCat("list ", dir));
  return names;
}

// Parses "<seconds>[.<n>]" after "checkpoint.json.corrupt-" (or ".go-driver-"); false for
// other names.
bool ParseCorruptSuffix(absl::string_view suffix, std::pair<int64_t, int64_t>* key) {
  std::vector<absl::string_view> parts = absl::StrSplit(suffix, '.');
  if (parts.empty() || parts.size() > 2) return false;
  int64_t seconds = 0, n = 0;
  if (!absl::SimpleAtoi(parts[0], &seconds)) return false;
  if (parts.size() == 2 && !absl::SimpleAtoi(parts[1], &n)) return false;
  *key = {seconds, n};
  return true;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// "<base>", or "<base>.<n>" with the smallest n that is not taken.
std::string UnusedName(const std::string& base) {
  std::string target = base;
  for (int n = 1; Exists(target); ++n) target = absl::StrCat(base, ".", n);
  return target;
}

}  // namespace

Checkpoint::Checkpoint(std::string dir, std::string boot_id, Options options)
    : dir_(std::move(dir)),
      path_(absl::StrCat(dir_, "/", kCheckpointFileName)),
      lock_path_(absl::StrCat(dir_, "/", kLockFileName)),
      boot_id_(std::move(boot_id)),
      options_(std::move(options)),
      clock_(options_.clock ? options_.clock : RealClock::Get()) {}

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(std::string dir,
                                                             const std::string& boot_id_path,
                                                             Options options) {
  const std::string context = absl::StrCat("open checkpoint in ", dir);
  if (dir.empty()) return absl::InvalidArgumentError("checkpoint directory must not be empty");
  RETURN_IF_ERROR(Annotate(MakeDirectories(dir), context));
  absl::StatusOr<std::string> raw_boot_id = ReadFile(boot_id_path);
  if (!raw_boot_id.ok()) return Annotate(raw_boot_id.status(), "read node boot ID");
  std::string boot_id(absl::StripAsciiWhitespace(*raw_boot_id));
  if (boot_id.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("node boot ID in ", boot_id_path, " is empty"));
  }
  std::unique_ptr<Checkpoint> cp(
      new Checkpoint(std::move(dir), std::move(boot_id), std::move(options)));

  absl::StatusOr<FileLock> lock = FileLock::Acquire(cp->lock_path_, cp->options_.lock_timeout);
  if (!lock.ok()) return Annotate(lock.status(), context);

  // A crash between write and rename leaves a temporary file; nobody else writes while we hold
  // the lock, so every one of them is stale.
  absl::StatusOr<std::vector<std::string>> names = ListDir(cp->dir_);
  if (!names.ok()) return Annotate(names.status(), context);
  for (const std::string& name : *names) {
    if (!absl::StartsWith(name, kTempPrefix)) continue;
    const std::string stale = absl::StrCat(cp->dir_, "/", name);
    if (::unlink(stale.c_str()) == 0) {
      DRA_INFO("removed stale temporary checkpoint file", "path", stale);
    } else if (errno != ENOENT) {
      DRA_WARNING("could not remove stale temporary checkpoint file", "path", stale, "err",
                  dra::ErrnoToStatus(errno, ""));
    }
  }

  LoadReports reports;
  absl::StatusOr<Contents> contents = cp->LoadLocked(&reports);
  cp->open_corruption_ = reports.corruption;
  cp->open_adoption_ = reports.adoption;
  if (!contents.ok()) return Annotate(contents.status(), context);
  if (contents->node_boot_id != cp->boot_id_) {
    if (!contents->node_boot_id.empty()) {
      cp->claims_invalidated_by_reboot_ = contents->claims.size();
      DRA_INFO("invalidating checkpoint: node rebooted since it was written", "path", cp->path_,
               "storedBootID", contents->node_boot_id, "currentBootID", cp->boot_id_,
               "droppedClaims", contents->claims.size());
      if (cp->options_.on_reboot) {
        RETURN_IF_ERROR(Annotate(cp->options_.on_reboot(contents->claims),
                                 absl::StrCat(context, ": node rebooted since it was written")));
      }
      contents->claims.clear();
    }
    contents->node_boot_id = cp->boot_id_;
    RETURN_IF_ERROR(Annotate(cp->WriteLocked(*contents), context));
  }
  lock->Release();
  cp->Notify(reports);
  DRA_VLOG(2, "opened checkpoint", "path", cp->path_, "claims", contents->claims.size());
  return cp;
}

absl::StatusOr<std::optional<PreparedClaim>> Checkpoint::Get(absl::string_view uid) const {
  ASSIGN_OR_RETURN(ClaimMap claims, List());
  auto it = claims.find(std::string(uid));
  if (it == claims.end()) return std::optional<PreparedClaim>();
  return std::optional<PreparedClaim>(std::move(it->second));
}

absl::StatusOr<ClaimMap> Checkpoint::List() const {
  TraceStage stage("checkpointRead");
  const std::string context = absl::StrCat("read checkpoint ", path_);
  LoadReports reports;
  absl::StatusOr<Contents> contents;
  {
    absl::StatusOr<FileLock> lock = FileLock::Acquire(lock_path_, options_.lock_timeout);
    if (!lock.ok()) return Annotate(lock.status(), context);
    contents = LoadLocked(&reports);
  }
  Notify(reports);
  if (!contents.ok()) return Annotate(contents.status(), context);
  return std::move(contents->claims);
}

absl::Status Checkpoint::Update(const std::function<absl::Status(ClaimMap& claims)>& mutate,
                                const std::function<void(const ClaimMap& committed)>& on_commit) {
  TraceStage stage("checkpointWrite");
  const std::string context = absl::StrCat("update checkpoint ", path_);
  LoadReports reports;
  absl::Status status = [&]() -> absl::Status {
    absl::StatusOr<FileLock> lock = FileLock::Acquire(lock_path_, options_.lock_timeout);
    if (!lock.ok()) return Annotate(lock.status(), context);
    absl::StatusOr<Contents> contents;
    {
      TraceStage load("checkpointLoad");
      contents = LoadLocked(&reports);
    }
    if (!contents.ok()) return Annotate(contents.status(), context);
    RETURN_IF_ERROR(mutate(contents->claims));
    for (auto& [uid, claim] : contents->claims) {
      if (claim.uid.empty()) claim.uid = uid;
    }
    if (absl::Status written = WriteLocked(*contents); !written.ok()) {
      return Annotate(written, context);
    }
    if (on_commit) {
      TraceStage committed("checkpointOnCommit");
      on_commit(contents->claims);
    }
    return absl::OkStatus();
  }();
  Notify(reports);
  return status;
}

std::optional<Checkpoint::FileIdentity> Checkpoint::StatLocked() const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return std::nullopt;
  return FileIdentity{.dev = static_cast<uint64_t>(st.st_dev),
                      .ino = static_cast<uint64_t>(st.st_ino),
                      .size = static_cast<int64_t>(st.st_size),
                      .mtime_ns = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec,
                      .ctime_ns = st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec};
}

void Checkpoint::KeepLocked(const Contents& contents) const {
  std::optional<FileIdentity> file = StatLocked();
  absl::MutexLock lock(&copy_mu_);
  if (file) {
    copy_ = DecodedCopy{.file = *file, .contents = contents};
  } else {
    copy_.reset();
  }
}

absl::StatusOr<Contents> Checkpoint::LoadLocked(LoadReports* reports) const {
  if (std::optional<FileIdentity> file = StatLocked()) {
    absl::MutexLock lock(&copy_mu_);
    if (copy_ && copy_->file == *file) return copy_->contents;
  }
  absl::StatusOr<Contents> loaded = LoadFileLocked(reports);
  // Only a file that decoded as it is: adoption and corruption wrote a new one (kept by
  // WriteLocked already).
  if (loaded.ok() && !reports->adoption && !reports->corruption) KeepLocked(*loaded);
  return loaded;
}

absl::StatusOr<Contents> Checkpoint::LoadFileLocked(LoadReports* reports) const {
  absl::StatusOr<std::string> text = ReadFile(path_);
  if (absl::IsNotFound(text.status())) {
    Contents empty{.node_boot_id = boot_id_};
    RETURN_IF_ERROR(WriteLocked(empty));
    return empty;
  }
  if (!text.ok()) return text.status();
  DecodeDiagnostics diag;
  absl::StatusOr<Contents> contents = DecodeCheckpoint(*text, &diag);
  if (contents.ok()) return contents;
  if (!absl::IsDataLoss(contents.status())) {
    return absl::Status(
        contents.status().code(),
        absl::StrCat(path_, ": ", contents.status().message(),
                     "; refusing to use or modify it (was the plugin downgraded?)"));
  }
  if (LooksLikeGoCheckpoint(*text)) {
    diag = {};
    AdoptionReport adoption;
    contents = AdoptGoLocked(*text, &diag, &adoption);
    if (contents.ok()) {
      reports->adoption = std::move(adoption);
      return contents;
    }
    if (!absl::IsDataLoss(contents.status())) return contents.status();
  }
  ASSIGN_OR_RETURN(CorruptionReport r, QuarantineLocked(*text, contents.status(), diag));
  reports->corruption = std::move(r);
  Contents empty{.node_boot_id = boot_id_};
  RETURN_IF_ERROR(WriteLocked(empty));
  return empty;
}

absl::StatusOr<Contents> Checkpoint::AdoptGoLocked(const std::string& text, DecodeDiagnostics* diag,
                                                   AdoptionReport* report) const {
  ASSIGN_OR_RETURN(GoCheckpoint go, DecodeGoCheckpoint(text, diag));
  if (!options_.convert_go_devices) {
    return absl::DataLossError(
        "a Go driver's checkpoint, and this reader cannot convert its devices");
  }
  Contents out{.node_boot_id = go.node_boot_id};
  for (auto& [uid, claim] : go.claims) {
    PreparedClaim c{.uid = uid,
                    .namespace_name = claim.namespace_name,
                    .name = claim.name,
                    .state = claim.state};
    if (claim.status.is_object()) c.allocation = claim.status.value("allocation", nlohmann::json());
    if (!claim.prepared_devices.is_null()) {
      absl::StatusOr<nlohmann::json> devices =
          options_.convert_go_devices(uid, claim.prepared_devices, c.allocation);
      if (!devices.ok()) {
        return absl::DataLossError(
            absl::StrCat("Go-format checkpoint: ", go.layout, ".preparedClaims[\"", uid,
                         "\"].preparedDevices: ", devices.status().message()));
      }
      c.prepared_devices = *std::move(devices);
    }
    if (c.state == ClaimState::kPrepareStarted) ++report->started;
    out.claims.emplace(uid, std::move(c));
  }
  report->path = path_;
  report->layout = go.layout;
  report->claims = out.claims.size();
  report->detected_at = clock_->Now();
  // The copy first: a crash after it leaves the Go file in place, adopted again at the next read.
  report->kept_at =
      UnusedName(absl::StrCat(path_, kGoDriverInfix, absl::ToUnixSeconds(report->detected_at)));
  RETURN_IF_ERROR(
      Annotate(WriteFileAtomically(report->kept_at, text, AtomicWriteOptions{.mode = 0644}),
               "keep the Go driver's checkpoint"));
  RETURN_IF_ERROR(WriteLocked(out));
  DRA_INFO("adopted the Go driver's checkpoint: its claims are now in this plugin's format", "path",
           path_, "goDriverCopy", report->kept_at, "layout", go.layout, "claims", report->claims,
           "prepareStarted", report->started, "nodeBootID", go.node_boot_id);
  PruneCopies(kGoDriverInfix, kMaxGoDriverCopies);
  return out;
}

absl::StatusOr<CorruptionReport> Checkpoint::QuarantineLocked(const std::string& text,
                                                              const absl::Status& error,
                                                              const DecodeDiagnostics& diag) const {
  CorruptionReport report;
  report.path = path_;
  report.reason = std::string(error.message());
  report.stored_checksum = diag.stored_checksum;
  report.computed_checksum = diag.computed_checksum;
  report.parse_error_offset = diag.parse_error_offset;
  report.size_bytes = text.size();
  report.detected_at = clock_->Now();

  const std::string target =
      UnusedName(absl::StrCat(path_, kCorruptInfix, absl::ToUnixSeconds(report.detected_at)));
  if (::rename(path_.c_str(), target.c_str()) != 0) {
    return ErrnoToStatus(errno, absl::StrCat("move corrupt checkpoint ", path_, " to ", target));
  }
  report.moved_to = target;
  DRA_WARNING("checkpoint is corrupt; moved it aside and starting with an empty one", "path", path_,
              "movedTo", target, "reason", report.reason, "storedChecksum", diag.stored_checksum,
              "computedChecksum", diag.computed_checksum, "bytes", text.size());
  PruneCopies(kCorruptInfix, kMaxCorruptFiles);
  return report;
}

void Checkpoint::PruneCopies(absl::string_view infix, int keep) const {
  const std::string prefix = absl::StrCat(kCheckpointFileName, infix);
  absl::StatusOr<std::vector<std::string>> names = ListDir(dir_);
  if (!names.ok()) {
    DRA_WARNING("could not list old checkpoint copies", "err", names.status());
    return;
  }
  std::vector<std::pair<std::pair<int64_t, int64_t>, std::string>> copies;
  for (const std::string& name : *names) {
    std::pair<int64_t, int64_t> key;
    if (absl::StartsWith(name, prefix) &&
        ParseCorruptSuffix(absl::string_view(name).substr(prefix.size()), &key)) {
      copies.emplace_back(key, name);
    }
  }
  std::sort(copies.begin(), copies.end());
  for (size_t i = 0; i + static_cast<size_t>(keep) < copies.size(); ++i) {
    const std::string old = absl::StrCat(dir_, "/", copies[i].second);
    if (::unlink(old.c_str()) == 0) {
      DRA_INFO("removed old checkpoint copy", "path", old);
    } else {
      DRA_WARNING("could not remove old checkpoint copy", "path", old, "err",
                  dra::ErrnoToStatus(errno, ""));
    }
  }
}

absl::Status Checkpoint::WriteLocked(const Contents& contents) const {
  absl::StatusOr<std::string> text;
  {
    TraceStage encode("checkpointEncode");
    text = EncodeCheckpoint(contents);
  }
  if (!text.ok()) return text.status();
  // Not durable on purpose: the checkpoint records the boot ID and a reboot (the only way to lose
  // the page cache) invalidates it, so fsyncs would buy nothing; a torn file after a power loss is
  // handled by the corruption policy. The replaced file's blocks are freed off the prepare path.
  {
    TraceStage replace("checkpointReplace");
    RETURN_IF_ERROR(WriteFileAtomically(
        path_, *text,
        AtomicWriteOptions{
            .mode = 0644, .release_replaced_in_background = true, .durable = false}));
  }
  KeepLocked(contents);
  return absl::OkStatus();
}

void Checkpoint::Notify(const LoadReports& reports) const {
  if (reports.adoption && options_.on_adoption) options_.on_adoption(*reports.adoption);
  if (reports.corruption && options_.on_corruption) options_.on_corruption(*reports.corruption);
}

}  // namespace dra::checkpoint
