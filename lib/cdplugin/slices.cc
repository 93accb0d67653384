#include "lib/cdplugin/slices.h"

#include "lib/k8s/objects_compute_domain.h"

namespace dra::cdplugin {

kubeletplugin::DriverResources PublishedResources(const std::string& node_name, bool with_daemon,
                                                  bool binding_conditions) {
  kubeletplugin::SliceContent slice;
  for (const char* type : {"channel", "daemon"}) {
    if (!with_daemon && std::string(type) == "daemon") continue;
    k8s::Device d;
    d.name = std::string(type) + "-0";
    d.attributes["type"] = k8s::DeviceAttribute::String(type);
    d.attributes["id"] = k8s::DeviceAttribute::Int(0);
    if (binding_conditions && std::string(type) == "channel") {
      d.binding_conditions = {std::string(k8s::kChannelBindingCondition)};
      d.binding_failure_conditions = {std::string(k8s::kChannelBindingFailureCondition)};
    }
    slice.devices.push_back(std::move(d));
  }
  kubeletplugin::DriverResources resources;
  resources.pools[node_name].slices.push_back(std::move(slice));
  return resources;
}

}  // namespace dra::cdplugin
