// AddPluginHostFlags (plugin_host.h): the flags both kubelet plugins have, defined once.

#include "lib/common/flags.h"
#include "lib/kubeletplugin/plugin_host.h"

namespace dra::kubeletplugin {

void AddPluginHostFlags(Flags& flags, PluginHostConfig* c, const PluginHostFlagHelp& help) {
  flags
      .AddString("node-name", "NODE_NAME", &c->node_name,
                 "Node to work on; also the ResourceSlice pool name.")
      .Required();
  flags.AddString("namespace", "NAMESPACE", &c->namespace_name, help.namespace_name);
  flags.AddString("daemonset-name", "DAEMONSET_NAME", &c->daemonset_name,
                  "This plugin's DaemonSet in --namespace. When it is deleted (helm uninstall), "
                  "the plugin removes its files at shutdown: its CDI specs and its plugin "
                  "directory, unless a claim is still prepared. Empty: it never does.");
  flags.AddString("pod-uid", "POD_UID", &c->pod_uid,
                  "This pod's UID (downward API). When set, sockets carry it so that an old and "
                  "a new plugin pod can serve side by side during a rolling update (kubelet "
                  ">= 1.33).");
  flags.AddString("cdi-root", "CDI_ROOT", &c->cdi_root, help.cdi_root);
  flags
      .AddString("nvidia-driver-root", "NVIDIA_DRIVER_ROOT", &c->nvidia_driver_root,
                 "Host path of the NVIDIA driver installation (/ or /run/nvidia/driver); the "
                 "host-side paths in CDI specs.")
      .Alias("host-driver-root")
      .Env("HOST_DRIVER_ROOT");
  flags.AddString("container-driver-root", "DRIVER_ROOT_CTR_PATH", &c->container_driver_root,
                  help.container_driver_root);
  flags.AddString("dev-root", "DEV_ROOT", &c->dev_root,
                  "Where /dev is found; empty: the driver root if it has a /dev, else /.");
  flags.AddString("proc-root", "PROC_ROOT", &c->proc_root, help.proc_root);
  flags.AddString("alt-proc-devices-path", "ALT_PROC_DEVICES_PATH", &c->alt_proc_devices,
                  help.alt_proc_devices);
  flags.AddString("nvidia-cdi-hook-path", "NVIDIA_CDI_HOOK_PATH", &c->nvidia_cdi_hook_path,
                  "Accepted for compatibility with the Go driver's chart; unused (the CDI specs "
                  "need no hook).");
  flags.AddString("kubelet-registrar-directory-path", "KUBELET_REGISTRAR_DIRECTORY_PATH",
                  &c->kubelet_registrar_dir, "Kubelet plugin registration directory.");
  flags.AddString("kubelet-plugins-directory-path", "KUBELET_PLUGINS_DIRECTORY_PATH",
                  &c->kubelet_plugins_dir, help.kubelet_plugins_dir);
  flags.AddInt("healthcheck-port", "HEALTHCHECK_PORT", &c->healthcheck_port,
               "gRPC health service port: >0 that port, 0 any free port, <0 disabled.");
  flags.AddMetricsServerFlags(&c->http_endpoint, &c->metrics_path);
  flags.AddKubeClientFlags(&c->kubeconfig, &c->kube_api_qps, &c->kube_api_burst);
  flags.AddDuration("cleanup-interval", "CLEANUP_INTERVAL", &c->cleanup_interval,
                    help.cleanup_interval);
}

}  // namespace dra::kubeletplugin
