#include "lib/kubeletplugin/driver.h"

namespace dra::kubeletplugin {

std::string BaseRequestName(absl::string_view request_name) {
  const size_t slash = request_name.find('/');
  return std::string(request_name.substr(0, slash));
}

}  // namespace dra::kubeletplugin
