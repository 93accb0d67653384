#pragma once

// The webhook's serving certificate: a TLS server context (TLS 1.2 and later, ALPN http/1.1)
// built from a certificate chain file (leaf first, intermediates/CA after it) and a private key
// file, reloaded when either file changes on disk.
//
// Changes are noticed by Current(), at most once per check interval: each file's device, inode,
// size and mtime are compared with those of the pair in use (stat follows symlinks, so the
// "..data" symlink swap of a Kubernetes secret volume counts as a change). A pair that fails to
// load (missing file, bad PEM, key not matching the certificate, a half-written file) keeps the
// old context, logs a warning once per distinct file state, and is retried when the files change
// again. Connections keep the context they started with.
//
// Thread-safety: all methods may be called from any thread.

#include <sys/stat.h>

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/httpserver/tls_transport.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace dra::webhook {

struct TlsFiles {
  std::string cert_file;  // PEM chain, leaf first
  std::string key_file;   // PEM private key
  // How often Current() looks at the files; zero: on every call.
  absl::Duration check_interval = absl::Seconds(2);
};

class ServingCertificate {
 public:
  // Loads the pair once; errors name the file and what is wrong with it.
  static absl::StatusOr<std::unique_ptr<ServingCertificate>> Load(TlsFiles files);

  // The context for a new connection, after reloading the files if they changed.
  std::shared_ptr<SSL_CTX> Current() ABSL_LOCKS_EXCLUDED(mu_);

  // How many times a changed pair was loaded successfully (0 after Load).
  int reloads() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct FileStamp {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    int64_t mtime_ns = 0;
    bool exists = false;
    bool operator==(const FileStamp&) const = default;
  };
  struct PairStamp {
    FileStamp cert;
    FileStamp key;
    bool operator==(const PairStamp&) const = default;
  };

  ServingCertificate(TlsFiles files, std::shared_ptr<SSL_CTX> ctx, PairStamp stamp);
  PairStamp Stat() const;

  const TlsFiles files_;
  mutable absl::Mutex mu_;
  std::shared_ptr<SSL_CTX> ctx_ ABSL_GUARDED_BY(mu_);
  PairStamp loaded_ ABSL_GUARDED_BY(mu_);  // the files behind ctx_
  PairStamp failed_ ABSL_GUARDED_BY(mu_);  // the last state that failed to load
  absl::Time next_check_ ABSL_GUARDED_BY(mu_);
  int reloads_ ABSL_GUARDED_BY(mu_) = 0;
};

// The TLS 1.2 suites the server accepts (OpenSSL names): ECDHE key exchange with AES-GCM or
// ChaCha20-Poly1305 only (docs/webhook.md "TLS").
extern const char kTls12CipherList[];

// Builds a server context from the two files (exposed for tests and the benchmark).
absl::StatusOr<std::shared_ptr<SSL_CTX>> NewServerContext(const std::string& cert_file,
                                                          const std::string& key_file);

// The OpenSSL error queue as one string (lib/httpserver/tls_transport.h).
using httpserver::TakeOpenSslErrors;

}  // namespace dra::webhook
