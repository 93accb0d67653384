#pragma once

// Fuzz targets of lib/cddaemon: the IMEX files the daemon renders from what it reads (imex_files.h,
// hosts_file.h). Each takes any bytes, checks invariants and aborts on a violation (a crash is what
// a fuzzer reports); none may throw. Replayed with lib/cddaemon/fuzz_corpus/<target>/ by
// cddaemon_fuzz_replay_test, and built into a libFuzzer binary by the check preset through
// test/support/fuzz_main.cc:
//   build/check/lib/cddaemon/cddaemon_imex_files_fuzzer lib/cddaemon/fuzz_corpus/imex_files

#include <cstddef>
#include <cstdint>

namespace dra::cddaemon::fuzz {

// Bytes as the imexd.cfg template (RenderImexConfig), as the existing /etc/hosts
// (RenderHostsFile, with and without mappings), and, when they are a ComputeDomainClique, as the
// clique whose daemons become the hosts mappings (BuildDnsMappings). Rendering must leave no
// placeholder, and rewriting the hosts file must be idempotent and keep every other line.
void ImexFiles(const uint8_t* data, size_t size);

}  // namespace dra::cddaemon::fuzz
