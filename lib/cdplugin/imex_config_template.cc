#include "lib/cdplugin/imex_config_template.h"

namespace dra::cdplugin {

absl::string_view ImexConfigTemplate() {
  // Keys and values of the IMEX config for driver-managed compute domains; nvidia-imex reads the
  // file once at startup, so a change needs a restart of the daemon.
  static constexpr absl::string_view kTemplate =
      R"(# IMEX daemon configuration of one compute domain, written by the compute-domain kubelet
# plugin and rendered by the compute-domain daemon. nvidia-imex reads it only when it starts.
LOG_LEVEL=4
LOG_FILE_NAME=
STATS_FILE_NAME=/var/log/nvidia-imex-stats.log
LOG_APPEND_TO_LOG=0
LOG_FILE_MAX_SIZE=1024
LOG_MAX_ROTATE_COUNT=10
LOG_USE_SYSLOG=0
DAEMONIZE=0
BIND_INTERFACE_IP=
SERVER_PORT=50000
IMEX_NODE_CONFIG_FILE={{ .IMEXDaemonNodesConfigPath }}
NETWORK_INTERFACE=
IMEX_WAIT_FOR_QUORUM=RECOVERY
IMEX_ENABLE_AUTH_ENCRYPTION=0
IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS
IMEX_AUTH_SOURCE=
IMEX_SERVER_KEY=
IMEX_SERVER_CERT=
IMEX_SERVER_CERT_AUTH=
IMEX_CLIENT_KEY=
IMEX_CLIENT_CERT=
IMEX_CLIENT_CERT_AUTH=
IMEX_SECURITY_TARGET_OVERRIDE=
IMEX_GSS_SERVICE_NAME=host
IMEX_GSS_TIMEOUT_SEC=30
IMEX_GSS_RETRY_INTERVAL_SEC=5
IMEX_GSS_SEC_CONTEXT_LIFETIME_SEC=-1
IMEX_GSS_SHUTDOWN_ON_FAILURE=0
IMEX_CMD_ENABLED=1
IMEX_CMD_BIND_INTERFACE_IP={{ .IMEXCmdBindInterfaceIP }}
IMEX_CMD_PORT=50005
IMEX_CMD_UNIX_DOMAIN_PATH=
IMEX_NODE_DISCONNECTED_GRACE_TIME=-1
)";
  return kTemplate;
}

}  // namespace dra::cdplugin
