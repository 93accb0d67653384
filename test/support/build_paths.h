#pragma once

// Where tests and benches find the source tree (scripts, fixtures, the chart) and the build tree
// (the binaries they start). The two paths are compiled into build_paths.cc alone, so that every
// other translation unit is the same in every clone and its compiled object is shared through
// ccache (the absolute paths would otherwise be part of each compile command).

#include <string>

namespace dra::testing {

// The repository root the build was configured from, e.g. "/work/main".
std::string SourceDir();
// The CMake binary directory of this build, e.g. "/work/main/build/default".
std::string BinaryDir();

}  // namespace dra::testing
