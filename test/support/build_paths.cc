#include "test/support/build_paths.h"

namespace dra::testing {

std::string SourceDir() { return DRA_SOURCE_DIR; }
std::string BinaryDir() { return DRA_BINARY_DIR; }

}  // namespace dra::testing
