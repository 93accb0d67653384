#include "lib/cdplugin/slices.h"

namespace dra::cdplugin {

kubeletplugin::DriverResources PublishedResources(const std::string& node_name, bool with_daemon) {
  kubeletplugin::SliceContent slice;
  for (const char* type : {"channel", "daemon"}) {
    if (!with_daemon && std::string(type) == "daemon") continue;
    k8s::Device d;
    d.name = std::string(type) + "-0";
    d.attributes["type"] = k8s::DeviceAttribute::String(type);
    d.attributes["id"] = k8s::DeviceAttribute::Int(0);
    slice.devices.push_back(std::move(d));
  }
  kubeletplugin::DriverResources resources;
  resources.pools[node_name].slices.push_back(std::move(slice));
  return resources;
}

}  // namespace dra::cdplugin
