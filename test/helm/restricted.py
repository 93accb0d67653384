#!/usr/bin/env python3
"""Checks the pods of rendered manifests against the Pod Security Standards' `restricted` profile.

Reads `helm template` output (several YAML documents) on stdin. For every workload (Deployment,
DaemonSet, StatefulSet, ReplicaSet, Job, CronJob, Pod) whose pod template carries the label
dra-driver-nvidia-gpu-component with one of the components given by --components, it checks each
rule of the profile (https://kubernetes.io/docs/concepts/security/pod-security-standards/, the
baseline rules included) and what this chart adds (docs/helm.md "Pod Security"):

  baseline:   no hostNetwork, hostPID, hostIPC; no privileged container; no hostPath volume; no
              hostPort; capabilities added only from the baseline list; seccomp not Unconfined;
              no custom SELinux user/role; procMount Default; only safe sysctls
  restricted: volumes only configMap, csi, downwardAPI, emptyDir, ephemeral,
              persistentVolumeClaim, projected, secret; allowPrivilegeEscalation false; runAsNonRoot
              true (pod or every container, never false on a container); runAsUser not 0;
              seccompProfile RuntimeDefault or Localhost (pod or every container); capabilities
              drop ALL, add at most NET_BIND_SERVICE
  chart:      readOnlyRootFilesystem true; the webhook listens on a port >= 1024 and mounts no
              service-account token (it calls no API)

Prints one line per violation ("<kind>/<name> <container>: <rule>") and, last, one summary line
per checked workload. Exits 1 when there is a violation or when a component asked for with
--require was not found. Only PyYAML is needed (python3-yaml, which clang-tidy pulls in).
"""
import argparse
import sys

import yaml

COMPONENT_LABEL = "dra-driver-nvidia-gpu-component"
BASELINE_CAPS = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected",
    "secret",
}
SECCOMP_OK = {"RuntimeDefault", "Localhost"}


def pod_template(doc):
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "Pod":
        return doc.get("metadata") or {}, spec
    if kind == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    if kind in ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob"):
        t = spec.get("template") or {}
        return t.get("metadata") or {}, t.get("spec") or {}
    return None, None


def check_pod(component, spec):
    """Yields (container or "pod", rule) for each violation."""
    psc = spec.get("securityContext") or {}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            yield "pod", f"{key}: true (baseline: host namespaces)"
    for v in spec.get("volumes") or []:
        types = [k for k in v if k != "name"]
        for t in types:
            if t == "hostPath":
                yield "pod", f"volume {v.get('name')}: hostPath (baseline)"
            elif t not in RESTRICTED_VOLUMES:
                yield "pod", f"volume {v.get('name')}: type {t} (restricted: volume types)"
    for s in psc.get("sysctls") or []:
        if s.get("name") not in SAFE_SYSCTLS:
            yield "pod", f"sysctl {s.get('name')} (baseline: sysctls)"
    se = psc.get("seLinuxOptions") or {}
    if se.get("user") or se.get("role"):
        yield "pod", "seLinuxOptions.user/role (baseline: SELinux)"
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    if pod_seccomp == "Unconfined":
        yield "pod", "seccompProfile Unconfined (baseline: seccomp)"
    pod_non_root = psc.get("runAsNonRoot")
    if psc.get("runAsUser") == 0:
        yield "pod", "runAsUser: 0 (restricted: running as non-root user)"
    if component == "webhook" and spec.get("automountServiceAccountToken") is not False:
        yield "pod", "automountServiceAccountToken is not false (the webhook calls no API)"

    containers = [("container", c) for c in spec.get("containers") or []]
    containers += [("initContainer", c) for c in spec.get("initContainers") or []]
    containers += [("ephemeralContainer", c) for c in spec.get("ephemeralContainers") or []]
    if not containers:
        yield "pod", "no containers"
    for _, c in containers:
        name = c.get("name", "?")
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            yield name, "privileged: true (baseline: privileged containers)"
        if sc.get("procMount") not in (None, "Default"):
            yield name, f"procMount {sc.get('procMount')} (baseline: /proc mount type)"
        se = sc.get("seLinuxOptions") or {}
        if se.get("user") or se.get("role"):
            yield name, "seLinuxOptions.user/role (baseline: SELinux)"
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                yield name, f"hostPort {p.get('hostPort')} (baseline: host ports)"
            if component == "webhook" and int(p.get("containerPort", 0)) < 1024:
                yield name, f"containerPort {p.get('containerPort')} < 1024 (a non-root user cannot bind it)"
        if sc.get("allowPrivilegeEscalation") is not False:
            yield name, "allowPrivilegeEscalation is not false (restricted: privilege escalation)"
        non_root = sc.get("runAsNonRoot", pod_non_root)
        if sc.get("runAsNonRoot") is False or non_root is not True:
            yield name, "runAsNonRoot is not true at pod or container level (restricted: running as non-root)"
        if sc.get("runAsUser") == 0:
            yield name, "runAsUser: 0 (restricted: running as non-root user)"
        seccomp = (sc.get("seccompProfile") or {}).get("type") or pod_seccomp
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            yield name, "seccompProfile Unconfined (baseline: seccomp)"
        elif seccomp not in SECCOMP_OK:
            yield name, "seccompProfile is not RuntimeDefault or Localhost at pod or container level (restricted: seccomp)"
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            yield name, "capabilities.drop lacks ALL (restricted: capabilities)"
        for a in caps.get("add") or []:
            if a != "NET_BIND_SERVICE":
                where = "baseline" if a not in BASELINE_CAPS else "restricted"
                yield name, f"capabilities.add {a} ({where}: capabilities)"
        if sc.get("readOnlyRootFilesystem") is not True:
            yield name, "readOnlyRootFilesystem is not true (chart: docs/helm.md \"Pod Security\")"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--components", default="controller,webhook,uninstall-cleanup",
                    help="values of the label " + COMPONENT_LABEL + " to check")
    ap.add_argument("--require", default="",
                    help="components that must be present (comma-separated)")
    args = ap.parse_args()
    wanted = set(filter(None, args.components.split(",")))
    required = set(filter(None, args.require.split(",")))
    seen, violations, summary = set(), 0, []
    for doc in yaml.safe_load_all(sys.stdin):
        if not isinstance(doc, dict):
            continue
        meta, spec = pod_template(doc)
        if spec is None:
            continue
        component = ((meta.get("labels") or {}).get(COMPONENT_LABEL))
        if component not in wanted:
            continue
        seen.add(component)
        what = f"{doc['kind']}/{(doc.get('metadata') or {}).get('name')}"
        found = list(check_pod(component, spec))
        for where, rule in found:
            print(f"{what} {where}: {rule}")
        violations += len(found)
        n = len(spec.get("containers") or []) + len(spec.get("initContainers") or [])
        summary.append(f"{what} ({component}, {n} containers): "
                       + ("restricted" if not found else f"{len(found)} violations"))
    for line in summary:
        print("checked " + line)
    missing = required - seen
    if missing:
        print("not rendered: " + ", ".join(sorted(missing)))
    return 1 if violations or missing else 0


if __name__ == "__main__":
    sys.exit(main())
