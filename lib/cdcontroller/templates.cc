// The templates of the objects the controller creates per ComputeDomain (render.h). JSON, with
// {{KEY}} placeholders that take JSON values.

#include "absl/strings/string_view.h"
#include "lib/cdcontroller/render.h"

namespace dra::cdcontroller {

absl::string_view DaemonSetTemplate() {
  return R"json({
  "apiVersion": "apps/v1",
  "kind": "DaemonSet",
  "metadata": {
    "name": {{NAME}},
    "namespace": {{NAMESPACE}},
    "labels": {"resource.nvidia.com/computeDomain": {{CD_UID}}},
    "finalizers": ["resource.nvidia.com/computeDomain"]
  },
  "spec": {
    "selector": {"matchLabels": {"resource.nvidia.com/computeDomain": {{CD_UID}}}},
    "template": {
      "metadata": {"labels": {"resource.nvidia.com/computeDomain": {{CD_UID}}}},
      "spec": {
        "serviceAccountName": "compute-domain-daemon-service-account",
        "imagePullSecrets": {{IMAGE_PULL_SECRETS}},
        "nodeSelector": {"resource.nvidia.com/computeDomain": {{CD_UID}}},
        "tolerations": [
          {"operator": "Exists", "effect": "NoSchedule"},
          {"operator": "Exists", "effect": "NoExecute"},
          {"operator": "Exists", "effect": "PreferNoSchedule"}
        ],
        "resourceClaims": [
          {"name": "compute-domain-daemon", "resourceClaimTemplateName": {{NAME}}}
        ],
        "containers": [{
          "name": "compute-domain-daemon",
          "image": {{IMAGE}},
          "imagePullPolicy": {{IMAGE_PULL_POLICY}},
          "command": ["compute-domain-daemon", "-v", "$(LOG_VERBOSITY)", "run"],
          "resources": {"claims": [{"name": "compute-domain-daemon"}]},
          "env": [
            {"name": "LOG_VERBOSITY", "value": {{LOG_VERBOSITY}}},
            {"name": "MAX_NODES_PER_IMEX_DOMAIN", "value": {{MAX_NODES}}},
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE",
             "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
            {"name": "FEATURE_GATES", "value": {{FEATURE_GATES}}}
          ],
          "startupProbe": {
            "exec": {"command": ["compute-domain-daemon", "-v", "$(LOG_VERBOSITY)", "check"]},
            "initialDelaySeconds": 0,
            "periodSeconds": 1,
            "timeoutSeconds": 10,
            "failureThreshold": 1200,
            "successThreshold": 1
          },
          "livenessProbe": {
            "exec": {"command": ["compute-domain-daemon", "-v", "$(LOG_VERBOSITY)", "check"]},
            "periodSeconds": 60,
            "timeoutSeconds": 10,
            "failureThreshold": 20,
            "successThreshold": 1
          },
          "readinessProbe": {
            "exec": {"command": ["compute-domain-daemon", "-v", "$(LOG_VERBOSITY)", "check"]},
            "periodSeconds": {{READINESS_PERIOD_SECONDS}},
            "timeoutSeconds": 10,
            "failureThreshold": 1,
            "successThreshold": 1
          }
        }]
      }
    }
  }
})json";
}

absl::string_view DaemonClaimTemplateTemplate() {
  return R"json({
  "apiVersion": "resource.k8s.io/v1",
  "kind": "ResourceClaimTemplate",
  "metadata": {
    "name": {{NAME}},
    "namespace": {{NAMESPACE}},
    "labels": {
      "resource.nvidia.com/computeDomain": {{CD_UID}},
      "resource.nvidia.com/computeDomainTarget": "Daemon"
    },
    "finalizers": ["resource.nvidia.com/computeDomain"]
  },
  "spec": {
    "spec": {
      "devices": {
        "requests": [
          {"name": "daemon", "exactly": {"deviceClassName": "compute-domain-daemon.nvidia.com"}}
        ],
        "config": [{
          "requests": ["daemon"],
          "opaque": {
            "driver": "compute-domain.nvidia.com",
            "parameters": {
              "apiVersion": "resource.nvidia.com/v1beta1",
              "kind": "ComputeDomainDaemonConfig",
              "domainID": {{CD_UID}}
            }
          }
        }]
      }
    }
  }
})json";
}

absl::string_view WorkloadClaimTemplateTemplate() {
  return R"json({
  "apiVersion": "resource.k8s.io/v1",
  "kind": "ResourceClaimTemplate",
  "metadata": {
    "name": {{NAME}},
    "namespace": {{NAMESPACE}},
    "labels": {
      "resource.nvidia.com/computeDomain": {{CD_UID}},
      "resource.nvidia.com/computeDomainTarget": "Workload"
    },
    "finalizers": ["resource.nvidia.com/computeDomain"]
  },
  "spec": {
    "spec": {
      "devices": {
        "requests": [
          {
            "name": "channel",
            "exactly": {"deviceClassName": "compute-domain-default-channel.nvidia.com"}
          }
        ],
        "config": [{
          "requests": ["channel"],
          "opaque": {
            "driver": "compute-domain.nvidia.com",
            "parameters": {
              "apiVersion": "resource.nvidia.com/v1beta1",
              "kind": "ComputeDomainChannelConfig",
              "domainID": {{CD_UID}},
              "allocationMode": {{ALLOCATION_MODE}}
            }
          }
        }]
      }
    }
  }
})json";
}

}  // namespace dra::cdcontroller
