#pragma once

// Shared by flags.cc and flags_parse.cc; not for other users.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "lib/common/flags.h"

namespace dra {

struct Flags::Flag {
  std::string name;
  std::vector<std::string> aliases;
  std::vector<std::string> envs;
  std::string type_name;
  std::string default_text;
  std::string help;
  std::function<std::string()> extra_help;  // appended to help at Help() time
  bool required = false;
  bool hidden = false;
  bool is_bool = false;
  bool is_list = false;
  std::function<absl::Status(absl::string_view)> parse;
  // Filled by Parse.
  FlagSource source = FlagSource::kDefault;
  std::string source_env;
  std::string value_text;
};

namespace flags_internal {

// "\"text\"".
std::string Quoted(absl::string_view s);

}  // namespace flags_internal
}  // namespace dra
