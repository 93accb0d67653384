#pragma once

// The node-local record of prepared claims: `<dir>/checkpoint.json` (format in format.h), written
// atomically, read and modified under an flock on `<dir>/cp.lock` so that two plugin processes
// (an upgrade overlap) never interleave a read-modify-write.
//
// Boot ID: the file records the node's boot ID. Prepared state does not survive a reboot (MIG
// devices, MPS daemons, VFIO bindings are gone), so Open with a different current boot ID logs it
// and starts from an empty checkpoint carrying the new boot ID. A stored empty boot ID is adopted.
// What else the caller keeps per claim outside this file (its CDI specs) must not outlive the boot
// either: Options::on_reboot runs before the new boot ID is written, so that a crash or an error
// in it leaves the reboot to be found again by the next Open.
//
// Adoption of the public Go driver's checkpoint. A node switched from the Go driver has its
// checkpoint.json, and the claims in it are in use: their containers restart with the Go driver's
// CDI specs, and their time-slices and MPS daemons must be undone at unprepare. A file laid out as
// a Go checkpoint (go_format.h) is therefore adopted, not discarded:
//   A1. both Go checksums are verified; a mismatch makes the file corrupt (below), as it would
//       for the Go driver;
//   A2. each claim is converted: uid, state, namespace and name (when the Go file kept them), the
//       allocation from the saved status, and the device groups through
//       Options::convert_go_devices (the caller knows what a device is). A conversion error, or a
//       null convert_go_devices, makes the file corrupt (below);
//   A3. the file's bytes are copied unchanged to `checkpoint.json.go-driver-<unix seconds>` (".<n>"
//       appended when taken), for a rollback to the Go driver; the newest kMaxGoDriverCopies (3)
//       are kept;
//   A4. the converted claims are written atomically in our format, with the Go file's boot ID (so
//       the boot ID rule applies to them as to our own: a v1-only file has none and keeps them);
//   A5. an info log names the copy and the counts, and an AdoptionReport goes to
//       Options::on_adoption; the one found by Open is also kept in open_adoption().
// Like the corruption policy, this applies to every read.
//
// Corruption policy. A checkpoint that does not parse, has no valid version, fails its checksum or
// has the wrong shape must not crash-loop the plugin, and must not be lost either:
//   1. the file is renamed to `checkpoint.json.corrupt-<unix seconds>` (".<n>" appended when that
//      name is taken); only the newest kMaxCorruptFiles (3) such files are kept;
//   2. a warning names the path, where it went, and what differed (stored vs computed checksum,
//      or the parse error with its byte offset);
//   3. an empty checkpoint (current boot ID) is written and the operation goes on with it (what
//      can be rebuilt from elsewhere, such as the CDI specs on disk, is the caller's to rebuild:
//      lib/gpuplugin/prepare/rebuild.h);
//   4. a CorruptionReport goes to Options::on_corruption (for a Kubernetes Event and a metric),
//      and the one found by Open is also kept in open_corruption().
// This applies to every read (Open, Get, List, Update). A file with a *newer* format version is
// not corrupt: every operation refuses it with FailedPrecondition and leaves it untouched (a
// downgrade must not destroy the newer plugin's state). I/O errors (EACCES, EIO, ...) are returned
// as they are, never treated as corruption.
//
// Crash safety: WriteFileAtomically leaves either the old or the new file. A temporary file left
// by a crash between write and rename (".checkpoint.json.tmp.*") is never read and is removed by
// Open. Writes are not fsynced (neither the file nor the directory), on purpose: a process crash
// loses nothing, since the rename alone is atomic and the page cache survives the process; only
// a power loss or kernel crash can lose a write that has not reached the disk, and either is a
// reboot, after which the boot ID rule above discards every record anyway (MIG devices, MPS
// daemons and VFIO bindings are gone too). A file torn by the power loss is handled by the
// corruption policy below. The fsyncs would cost two journal commits per write (file and
// directory: 1.1 and 0.9 ms at p50, 6 and 5 ms at p99 on the bench machine's ext4, 26 Nov 2026)
// for no state that could be used. (The kubelet's own dra_manager_state fsyncs its
// temporary file before the rename, without a directory fsync, because it keeps its state across
// a reboot; ours does not.)
//
// Decoded copy: the contents this object last read or wrote are kept in memory with the file's
// identity (device, inode, size, modification and change times, from stat under the file lock).
// A read whose stat matches uses them instead of reading and decoding the file again; any write
// by another process replaces the file (a rename: a new inode) and is read as before. So a
// prepare reads the file once per change, not once per operation (docs/performance.md).
//
// Thread-safety: every method may be called from any thread; each operation takes the file lock,
// which excludes other threads and other processes alike. on_corruption is called without the
// lock held, on the thread of the operation that found the corruption.

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/checkpoint/format.h"
#include "lib/common/clock.h"

namespace dra::checkpoint {

inline constexpr char kCheckpointFileName[] = "checkpoint.json";
inline constexpr char kLockFileName[] = "cp.lock";
inline constexpr char kDefaultBootIdPath[] = "/proc/sys/kernel/random/boot_id";
inline constexpr int kMaxCorruptFiles = 3;
inline constexpr int kMaxGoDriverCopies = 3;

struct CorruptionReport {
  std::string path;      // the checkpoint file
  std::string moved_to;  // where the corrupt file now is
  std::string reason;    // e.g. "checksum mismatch: stored fnv1a64:..., computed fnv1a64:..."
  std::string stored_checksum;               // empty when the file did not parse
  std::string computed_checksum;             // empty when the file did not parse
  std::optional<size_t> parse_error_offset;  // set for malformed JSON
  size_t size_bytes = 0;                     // size of the corrupt file
  absl::Time detected_at;
};

// A Go driver's checkpoint that was adopted (steps A1-A5 above).
struct AdoptionReport {
  std::string path;     // the checkpoint file, now in our format
  std::string kept_at;  // the Go file's bytes: checkpoint.json.go-driver-<unix seconds>
  std::string layout;   // "v2", or "v1" for a file without "v2"
  size_t claims = 0;    // claims adopted, PrepareStarted ones included
  size_t started = 0;   // of which PrepareStarted
  absl::Time detected_at;
};

// Converts one Go claim's device groups (GoClaim::prepared_devices, not null) into the caller's
// prepared-device JSON. `allocation` is the claim's status.allocation as the Go driver saved it
// (null when absent). An error makes the whole file corrupt.
using GoDevicesConverter = std::function<absl::StatusOr<nlohmann::json>(
    const std::string& claim_uid, const nlohmann::json& go_devices,
    const nlohmann::json& allocation)>;

struct CheckpointOptions {
  absl::Duration lock_timeout = absl::Seconds(10);
  Clock* clock = nullptr;  // for corrupt-file names and report times; RealClock when null
  std::function<void(const CorruptionReport&)> on_corruption;
  // Null: a Go driver's checkpoint is treated as corrupt.
  GoDevicesConverter convert_go_devices;
  // Called like on_corruption, after an adoption.
  std::function<void(const AdoptionReport&)> on_adoption;
  // Called by Open when the checkpoint was written in an earlier boot (a stored boot ID that is
  // not empty and differs from the current one), with the claims it drops, under the file lock
  // and before the checkpoint with the current boot ID is written. For what must go with the
  // records: the claims' CDI specs, which would otherwise be taken for claims still prepared
  // (lib/gpuplugin/prepare/rebuild.h). An error fails Open and leaves the file as it was, so that
  // the next Open finds the reboot again.
  std::function<absl::Status(const ClaimMap& dropped)> on_reboot;
};

class Checkpoint {
 public:
  using Options = CheckpointOptions;

  // Creates `dir` (0755) when missing, reads the boot ID from `boot_id_path` (an error when it is
  // missing or empty: misconfiguration, fail fast), removes stale temporary files, and loads the
  // checkpoint (creating an empty one when there is none), applying the boot ID rule and the
  // corruption policy above. FailedPrecondition for a newer format version.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(
      std::string dir, const std::string& boot_id_path = kDefaultBootIdPath, Options options = {});

  // The claim with this uid, or nullopt when there is none.
  absl::StatusOr<std::optional<PreparedClaim>> Get(absl::string_view uid) const;
  // Every claim, keyed by uid.
  absl::StatusOr<ClaimMap> List() const;

  // Applies `mutate` atomically: lock, read, mutate, write. `mutate` may add, change and erase
  // entries; an added entry's empty uid is set from its key (a different non-empty uid is an
  // error). When `mutate` returns an error nothing is written and that error is returned.
  // `on_commit`, when set, is called with the claims as written once the new file is in place,
  // still under the lock: side effects of a change (counts, what the plugin publishes) follow
  // the committed state, never one a failed write left uncommitted. It is not called when
  // `mutate` or the write fails.
  // REQUIRES: neither `mutate` nor `on_commit` calls back into this Checkpoint (the lock is not
  // reentrant).
  absl::Status Update(const std::function<absl::Status(ClaimMap& claims)>& mutate,
                      const std::function<void(const ClaimMap& committed)>& on_commit = nullptr);

  const std::string& path() const { return path_; }
  const std::string& boot_id() const { return boot_id_; }
  // The corruption Open found and recovered from, if any.
  const std::optional<CorruptionReport>& open_corruption() const { return open_corruption_; }
  // The Go driver's checkpoint Open found and adopted, if any.
  const std::optional<AdoptionReport>& open_adoption() const { return open_adoption_; }
  // Claims dropped by Open because the checkpoint was written in an earlier boot (0 otherwise).
  size_t claims_invalidated_by_reboot() const { return claims_invalidated_by_reboot_; }

 private:
  Checkpoint(std::string dir, std::string boot_id, Options options);

  // What a read found besides the contents, reported after the lock is released.
  struct LoadReports {
    std::optional<CorruptionReport> corruption;
    std::optional<AdoptionReport> adoption;
  };

  // Reads and decodes the file. REQUIRES: the file lock is held. Applies the adoption and the
  // corruption policies (writing the converted or an empty checkpoint) and fills *reports.
  absl::StatusOr<Contents> LoadLocked(LoadReports* reports) const;
  // LoadLocked without the decoded copy: always reads the file.
  absl::StatusOr<Contents> LoadFileLocked(LoadReports* reports) const;
  // Steps A1-A4 for `text`, a file that looks like a Go checkpoint. DataLoss: corrupt.
  absl::StatusOr<Contents> AdoptGoLocked(const std::string& text, DecodeDiagnostics* diag,
                                         AdoptionReport* report) const;
  absl::StatusOr<CorruptionReport> QuarantineLocked(const std::string& text,
                                                    const absl::Status& error,
                                                    const DecodeDiagnostics& diag) const;
  absl::Status WriteLocked(const Contents& contents) const;
  void Notify(const LoadReports& reports) const;
  // Removes all but the newest `keep` files "checkpoint.json<infix><seconds>[.<n>]".
  void PruneCopies(absl::string_view infix, int keep) const;

  // What a stat of the checkpoint file says about which file it is.
  struct FileIdentity {
    uint64_t dev = 0, ino = 0;
    int64_t size = 0, mtime_ns = 0, ctime_ns = 0;
    friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
  };
  struct DecodedCopy {
    FileIdentity file;
    Contents contents;
  };
  // The file's identity now; nullopt when stat fails (the read then goes to the file).
  std::optional<FileIdentity> StatLocked() const;
  // Remembers `contents` as the decoded copy of the file as it is now. REQUIRES: the file lock.
  void KeepLocked(const Contents& contents) const;

  const std::string dir_;
  const std::string path_;
  const std::string lock_path_;
  const std::string boot_id_;
  const Options options_;
  Clock* const clock_;
  std::optional<CorruptionReport> open_corruption_;
  std::optional<AdoptionReport> open_adoption_;
  size_t claims_invalidated_by_reboot_ = 0;
  // Guarded by the file lock (which excludes this process's other threads too) and by copy_mu_.
  mutable absl::Mutex copy_mu_;
  mutable std::optional<DecodedCopy> copy_ ABSL_GUARDED_BY(copy_mu_);
};

}  // namespace dra::checkpoint
