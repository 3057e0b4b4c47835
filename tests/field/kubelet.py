#!/usr/bin/env python3
# Field tier: the project's own stand-in for kubelet. Kubelet and an API server are not available
# here (Debian packages neither), so this module turns a pod template of a Kubernetes manifest
# into the CRI calls kubelet makes for it, and makes them through cri.py's client. It translates
# what packaging/kubernetes/daemonset.yaml uses, and refuses (Unsupported) any field it does not
# translate, so that an edit to the manifest is either run or reported, never silently dropped.
#
# What it does as kubelet does (kubelet's cgroupfs driver, no CNI: host-network pods only):
#   * the sandbox: the pod's metadata, labels (+ io.kubernetes.pod.{name,namespace,uid}) and
#     annotations (+ kubernetes.io/config.{seen,source}), log directory /var/log/pods/NS_NAME_UID,
#     cgroup parent /kubepods[/burstable|/besteffort]/pod<uid> by the pod's QoS class, hostPID /
#     hostNetwork / hostIPC as CRI NamespaceOption;
#   * volumes: hostPath (its type checked, DirectoryOrCreate / FileOrCreate created first, 0755 /
#     0644), configMap (the keys written as files under /var/lib/kubelet/pods/UID/volumes/
#     kubernetes.io~configmap/NAME with kubelet's ..data symlink layout, mode defaultMode);
#   * containers: command -> CRI command, args -> CRI args, env, volumeMounts (readOnly,
#     mountPropagation), securityContext (runAsUser/Group, capabilities add/drop,
#     readOnlyRootFilesystem, privileged, allowPrivilegeEscalation: false -> no_new_privs,
#     seLinuxOptions), resources (cpu_shares from the request, quota from the limit, memory limit,
#     oom_score_adj by QoS class), kubelet's container labels and annotations, log path
#     NAME/ATTEMPT.log; init containers run one after the other to completion (exit 0 required)
#     before the containers start; a restart is a new container of the next attempt in the same
#     sandbox; a pod is deleted with StopContainer(terminationGracePeriodSeconds), StopPodSandbox,
#     RemovePodSandbox.
# Left out, as they change nothing the tests look at: kubelet's /etc/hosts and termination-log file
# mounts, the DNS config, the DaemonSet controller's node affinity, probes (the manifest has none:
# a probe would be refused), seccomp (kubelet's default, Unconfined, is containerd's too) and the
# default masked / read-only /proc paths (containerd applies the same list when none is given).
"""A pod template → the CRI calls kubelet makes, and a CRI exec client for streaming exec."""

import base64
import copy
import datetime
import hashlib
import json
import os
import re
import socket
import stat
import subprocess
import sys
import time
import uuid
from fractions import Fraction
from urllib.parse import urlsplit

KUBELET_PODS = "/var/lib/kubelet/pods"
POD_LOGS = "/var/log/pods"
# kubelet's values (pkg/kubelet/qos, pkg/kubelet/cm): min cpu.shares, the CFS period, the OOM scores
MIN_SHARES = 2
CFS_PERIOD_US = 100000
OOM_GUARANTEED, OOM_BESTEFFORT = -997, 1000


class Unsupported(Exception):
    """The manifest uses something this stand-in does not translate."""


def only(obj, where, allowed):
    """Refuses keys of `obj` outside `allowed` (an edit the stand-in would otherwise ignore)."""
    extra = sorted(set(obj or {}) - set(allowed))
    if extra:
        raise Unsupported(f"{where}: the kubelet stand-in (tests/field/kubelet.py) does not translate {', '.join(extra)}")


# --- quantities and QoS ------------------------------------------------------------------------

_SUFFIX = {
    "": 1, "m": Fraction(1, 1000), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
}


def quantity(text):
    """A Kubernetes quantity ("10m", "64Mi", "0.5", 2) as an exact Fraction."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?", str(text).strip())
    if not m:
        raise Unsupported(f"quantity {text!r} is not one the stand-in reads")
    return Fraction(m.group(1)) * _SUFFIX[m.group(2) or ""]


def _ceil(f):
    return -((-f.numerator) // f.denominator)


def requests_limits(c):
    """(requests, limits) of a container, requests defaulted to limits as the API server does."""
    res = c.get("resources") or {}
    only(res, f"container {c['name']}: resources", ["requests", "limits"])
    lim = {k: quantity(v) for k, v in (res.get("limits") or {}).items()}
    req = {k: quantity(v) for k, v in (res.get("requests") or {}).items()}
    for k, v in lim.items():
        req.setdefault(k, v)
    for k in set(req) | set(lim):
        if k not in ("cpu", "memory"):
            raise Unsupported(f"container {c['name']}: resource {k}")
    return req, lim


def qos_class(spec):
    """The pod's QoS class from all its containers (init containers included), as kubelet does."""
    every = list(spec.get("initContainers") or []) + list(spec["containers"])
    pairs = [requests_limits(c) for c in every]
    if all(not r and not lim for r, lim in pairs):
        return "BestEffort"
    guaranteed = all(set(lim) == {"cpu", "memory"} and r == lim for r, lim in pairs)
    return "Guaranteed" if guaranteed else "Burstable"


def cgroup_parent(qos, uid):
    """kubelet's cgroupfs driver: the pod's cgroup below its QoS class's."""
    return {"Guaranteed": f"/kubepods/pod{uid}", "Burstable": f"/kubepods/burstable/pod{uid}",
            "BestEffort": f"/kubepods/besteffort/pod{uid}"}[qos]


def mem_total():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


def linux_resources(c, qos, capacity):
    """CRI LinuxContainerResources of a container, as kubelet computes them."""
    req, lim = requests_limits(c)
    out = {}
    cpu_req = req.get("cpu", Fraction(0))
    out["cpu_shares"] = max(MIN_SHARES, int(cpu_req * 1024)) if cpu_req else MIN_SHARES
    if "cpu" in lim:
        out["cpu_quota"] = max(1000, int(lim["cpu"] * CFS_PERIOD_US))
        out["cpu_period"] = CFS_PERIOD_US
    if "memory" in lim:
        out["memory_limit_in_bytes"] = _ceil(lim["memory"])
    if qos == "Guaranteed":
        out["oom_score_adj"] = OOM_GUARANTEED
    elif qos == "BestEffort":
        out["oom_score_adj"] = OOM_BESTEFFORT
    else:
        adj = 1000 - (1000 * _ceil(req.get("memory", Fraction(0)))) // capacity
        out["oom_score_adj"] = min(max(adj, 1000 + OOM_GUARANTEED), OOM_BESTEFFORT - 1)
    return out


# --- the manifest ------------------------------------------------------------------------------


class Manifest:
    """The objects of a manifest file: its DaemonSet (exactly one) and its ConfigMaps."""

    def __init__(self, path=None, objects=None):
        if objects is None:
            import yaml

            with open(path) as f:
                objects = [d for d in yaml.safe_load_all(f) if d]
        self.objects = objects
        sets = [d for d in objects if d.get("kind") == "DaemonSet"]
        if len(sets) != 1:
            raise Unsupported(f"{path}: expected one DaemonSet, found {len(sets)}")
        self.daemonset = sets[0]
        self.configmaps = {
            (d["metadata"].get("namespace", "default"), d["metadata"]["name"]): d.get("data") or {}
            for d in objects
            if d.get("kind") == "ConfigMap"
        }

    @property
    def namespace(self):
        return self.daemonset["metadata"].get("namespace", "default")

    @property
    def name(self):
        return self.daemonset["metadata"]["name"]

    @property
    def template(self):
        return self.daemonset["spec"]["template"]

    def patched(self, ops):
        """A copy whose DaemonSet has the JSON patch `ops` applied (`kubectl patch --type=json`)."""
        objects = [json_patch(d, ops) if d is self.daemonset else copy.deepcopy(d) for d in self.objects]
        return Manifest(objects=objects)

    def revision(self):
        """The controller-revision-hash of the template (any stable digest of it will do)."""
        return hashlib.sha256(json.dumps(self.template, sort_keys=True).encode()).hexdigest()[:10]


def json_patch(doc, ops):
    """`doc` with RFC 6902 operations applied (what `kubectl patch --type=json` does to an object):
    add, remove, replace, copy, test; paths are JSON pointers, `-` appends to a list."""
    doc = copy.deepcopy(doc)

    def walk(path):
        parts = [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        return parent, parts[-1]

    def get(path):
        parent, key = walk(path)
        return parent[int(key)] if isinstance(parent, list) else parent[key]

    for op in ops:
        kind, path = op["op"], op["path"]
        if kind == "test":
            if get(path) != op["value"]:
                raise Unsupported(f"patch test failed: {path} is {get(path)!r}, not {op['value']!r}")
            continue
        value = copy.deepcopy(get(op["from"])) if kind == "copy" else op.get("value")
        parent, key = walk(path)
        if kind == "remove":
            del parent[int(key) if isinstance(parent, list) else key]
        elif kind == "replace":
            get(path)  # must exist
            parent[int(key) if isinstance(parent, list) else key] = value
        elif kind in ("add", "copy"):
            if isinstance(parent, list):
                parent.insert(len(parent) if key == "-" else int(key), value)
            else:
                parent[key] = value
        else:
            raise Unsupported(f"JSON patch op {kind}")
    return doc


def container_named(template, name):
    for c in list(template["spec"].get("initContainers") or []) + list(template["spec"]["containers"]):
        if c["name"] == name:
            return c
    raise KeyError(f"no container {name} in the pod template")


# --- one pod of a template ---------------------------------------------------------------------

POD_SPEC_KEYS = [
    "nodeSelector", "tolerations", "hostPID", "hostNetwork", "hostIPC", "automountServiceAccountToken",
    "enableServiceLinks", "terminationGracePeriodSeconds", "initContainers", "containers", "volumes",
    "restartPolicy", "priorityClassName",
]
# The priority classes every cluster has; kubelet itself sends nothing of them over CRI (they order
# evictions and preemption), so the stand-in only checks the name exists.
PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
CONTAINER_KEYS = [
    "name", "image", "imagePullPolicy", "command", "args", "env", "securityContext", "resources",
    "volumeMounts", "workingDir", "ports", "livenessProbe", "readinessProbe",
]
PROBE_KEYS = ["httpGet", "initialDelaySeconds", "periodSeconds", "timeoutSeconds", "failureThreshold", "successThreshold"]
# The downward API's fields the stand-in fills (env valueFrom.fieldRef).
FIELD_REFS = ["metadata.name", "metadata.namespace", "spec.nodeName", "status.podIP", "status.hostIP"]
SECURITY_KEYS = [
    "runAsUser", "runAsGroup", "allowPrivilegeEscalation", "readOnlyRootFilesystem", "capabilities",
    "seLinuxOptions", "privileged", "runAsNonRoot",
]
PROPAGATION = {None: "PROPAGATION_PRIVATE", "None": "PROPAGATION_PRIVATE",
               "HostToContainer": "PROPAGATION_HOST_TO_CONTAINER", "Bidirectional": "PROPAGATION_BIDIRECTIONAL"}


class PodPlan:
    """One pod of a pod template, as kubelet runs it: CRI requests as plain dicts with CRI's field
    names (cri.py's compiled api_pb2 parses them), and the host side of its volumes."""

    def __init__(self, manifest, template, name, uid, node_labels, capacity, labels=None):
        self.manifest, self.template, self.name, self.uid = manifest, template, name, uid
        self.namespace = manifest.namespace
        meta = template.get("metadata") or {}
        only(meta, "pod template metadata", ["labels", "annotations"])
        self.spec = spec = template["spec"]
        only(spec, "pod spec", POD_SPEC_KEYS)
        if spec.get("restartPolicy", "Always") not in ("Always", "OnFailure", "Never"):
            raise Unsupported(f"restartPolicy {spec['restartPolicy']}")
        for key in ("automountServiceAccountToken", "enableServiceLinks"):
            if spec.get(key, True) is not False:
                raise Unsupported(f"{key} must be false: there is no API server here to give a token or services")
        for k, v in (spec.get("nodeSelector") or {}).items():
            if node_labels.get(k) != v:
                raise Unsupported(f"nodeSelector {k}={v} does not select this node (labels {node_labels})")
        self.qos = qos_class(spec)
        self.capacity = capacity
        self.labels = dict(meta.get("labels") or {}, **(labels or {}))
        self.annotations = dict(meta.get("annotations") or {})
        self.log_directory = f"{POD_LOGS}/{self.namespace}_{name}_{uid}"
        self.grace = int(spec.get("terminationGracePeriodSeconds", 30))
        pc = spec.get("priorityClassName")
        if pc is not None and pc not in PRIORITY_CLASSES:
            raise Unsupported(f"priorityClassName {pc}: not one of the built-in classes {sorted(PRIORITY_CLASSES)}")
        self.priority = PRIORITY_CLASSES.get(pc, 0)
        self.volumes = {v["name"]: v for v in spec.get("volumes") or []}

    def ns_options(self):
        s = self.spec
        return {
            "network": "NODE" if s.get("hostNetwork") else "POD",
            "pid": "NODE" if s.get("hostPID") else "CONTAINER",
            "ipc": "NODE" if s.get("hostIPC") else "POD",
        }

    def sandbox(self):
        """The PodSandboxConfig. No hostname: with hostNetwork containerd keeps the node's UTS."""
        if not self.spec.get("hostNetwork"):
            raise Unsupported("only hostNetwork pods: the field tier's guest has no CNI")
        seen = datetime.datetime.now(datetime.timezone.utc).isoformat()
        privileged = any(
            (c.get("securityContext") or {}).get("privileged", False)
            for c in list(self.spec.get("initContainers") or []) + list(self.spec["containers"])
        )
        return {
            "metadata": {"name": self.name, "uid": self.uid, "namespace": self.namespace, "attempt": 0},
            "log_directory": self.log_directory,
            "labels": dict(self.labels, **{
                "io.kubernetes.pod.name": self.name,
                "io.kubernetes.pod.namespace": self.namespace,
                "io.kubernetes.pod.uid": self.uid,
            }),
            "annotations": dict(self.annotations, **{"kubernetes.io/config.seen": seen, "kubernetes.io/config.source": "api"}),
            "linux": {
                "cgroup_parent": cgroup_parent(self.qos, self.uid),
                "security_context": {"namespace_options": self.ns_options(), "privileged": privileged},
            },
        }

    # volumes

    def volume_dir(self, kind, name):
        return f"{KUBELET_PODS}/{self.uid}/volumes/kubernetes.io~{kind}/{name}"

    def host_path(self, name):
        """The host path a volume is mounted from."""
        v = self.volumes.get(name)
        if v is None:
            raise Unsupported(f"volumeMount of an undefined volume {name}")
        if "hostPath" in v:
            return v["hostPath"]["path"]
        if "configMap" in v:
            return self.volume_dir("configmap", name)
        raise Unsupported(f"volume {name}: only hostPath and configMap volumes are translated")

    def volume_steps(self):
        """What kubelet does on the host before the pod's containers start, one (what, function)
        a volume, so that `print` can list it and `prepare` can do it."""
        steps = []
        for name, v in self.volumes.items():
            only(v, f"volume {name}", ["name", "hostPath", "configMap"])
            if "hostPath" in v:
                hp = v["hostPath"]
                only(hp, f"volume {name}: hostPath", ["path", "type"])
                steps.append((f"hostPath {hp['path']} ({hp.get('type') or 'no type check'})", _host_path_step(hp)))
            else:
                cm = v["configMap"]
                only(cm, f"volume {name}: configMap", ["name", "optional", "defaultMode"])
                data = self.manifest.configmaps.get((self.namespace, cm["name"]))
                if data is None and not cm.get("optional", False):
                    raise Unsupported(f"volume {name}: ConfigMap {cm['name']} is not in the manifest")
                d = self.volume_dir("configmap", name)
                mode = int(cm.get("defaultMode", 0o644))
                steps.append((f"configMap {cm['name']} -> {d} (keys {sorted(data or {})}, mode {mode:o})",
                              _configmap_step(d, data or {}, mode)))
        return steps

    def prepare(self):
        os.makedirs(self.log_directory, exist_ok=True)
        for _, step in self.volume_steps():
            step()

    # containers

    def container(self, c, attempt):
        """The ContainerConfig of container spec `c` at restart count `attempt`."""
        only(c, f"container {c.get('name')}", CONTAINER_KEYS)
        sc = c.get("securityContext") or {}
        only(sc, f"container {c['name']}: securityContext", SECURITY_KEYS)
        caps = sc.get("capabilities") or {}
        only(caps, f"container {c['name']}: capabilities", ["add", "drop"])
        security = {
            "namespace_options": self.ns_options(),
            "privileged": bool(sc.get("privileged", False)),
            "readonly_rootfs": bool(sc.get("readOnlyRootFilesystem", False)),
            # kubelet sets no_new_privs only when allowPrivilegeEscalation is false
            "no_new_privs": sc.get("allowPrivilegeEscalation") is False,
            "capabilities": {"add_capabilities": list(caps.get("add") or []), "drop_capabilities": list(caps.get("drop") or [])},
        }
        if sc.get("privileged") and sc.get("allowPrivilegeEscalation") is False:
            raise Unsupported(f"container {c['name']}: privileged with allowPrivilegeEscalation false is invalid")
        if "runAsUser" in sc:
            security["run_as_user"] = {"value": int(sc["runAsUser"])}
        if "runAsGroup" in sc:
            security["run_as_group"] = {"value": int(sc["runAsGroup"])}
        if sc.get("runAsNonRoot") and int(sc.get("runAsUser", 0)) == 0:
            raise Unsupported(f"container {c['name']}: runAsNonRoot with uid 0 would not start")
        if sc.get("seLinuxOptions"):
            only(sc["seLinuxOptions"], f"container {c['name']}: seLinuxOptions", ["user", "role", "type", "level"])
            security["selinux_options"] = dict(sc["seLinuxOptions"])
        env = self.env(c)
        envs = [{"key": k, "value": v} for k, v in env.items()]
        ports(c, self.spec)
        for kind in ("livenessProbe", "readinessProbe"):
            if kind in c:
                probe_spec(c, kind)
        mounts = []
        for vm in c.get("volumeMounts") or []:
            only(vm, f"container {c['name']}: volumeMount {vm.get('name')}", ["name", "mountPath", "readOnly", "mountPropagation"])
            if vm.get("mountPropagation") not in PROPAGATION:
                raise Unsupported(f"container {c['name']}: mountPropagation {vm['mountPropagation']}")
            mounts.append({
                "container_path": vm["mountPath"],
                "host_path": self.host_path(vm["name"]),
                "readonly": bool(vm.get("readOnly", False)),
                "propagation": PROPAGATION[vm.get("mountPropagation")],
            })
        if c.get("imagePullPolicy", "IfNotPresent") == "Always":
            raise Unsupported(f"container {c['name']}: imagePullPolicy Always needs a registry")
        hashed = json.dumps(c, sort_keys=True).encode()
        config = {
            "metadata": {"name": c["name"], "attempt": attempt},
            "image": {"image": c["image"]},
            "command": [expand(a, env) for a in c.get("command") or []],
            "args": [expand(a, env) for a in c.get("args") or []],
            "working_dir": c.get("workingDir", ""),
            "envs": envs,
            "mounts": mounts,
            "labels": {
                "io.kubernetes.container.name": c["name"],
                "io.kubernetes.pod.name": self.name,
                "io.kubernetes.pod.namespace": self.namespace,
                "io.kubernetes.pod.uid": self.uid,
            },
            "annotations": {
                "io.kubernetes.container.hash": hashlib.sha256(hashed).hexdigest()[:8],
                "io.kubernetes.container.restartCount": str(attempt),
                "io.kubernetes.container.terminationMessagePath": "/dev/termination-log",
                "io.kubernetes.container.terminationMessagePolicy": "File",
                "io.kubernetes.pod.terminationGracePeriod": str(self.grace),
            },
            "log_path": f"{c['name']}/{attempt}.log",
            "linux": {"resources": linux_resources(c, self.qos, self.capacity), "security_context": security},
        }
        return config

    def env(self, c):
        """The container's environment, in order, with the downward API's fields filled in."""
        fields = {"metadata.name": self.name, "metadata.namespace": self.namespace, "spec.nodeName": socket.gethostname(),
                  "status.podIP": node_ip(), "status.hostIP": node_ip()}
        out = {}
        for e in c.get("env") or []:
            where = f"container {c['name']}: env {e.get('name')}"
            only(e, where, ["name", "value", "valueFrom"])
            if "valueFrom" in e:
                only(e["valueFrom"], where, ["fieldRef"])
                ref = e["valueFrom"]["fieldRef"]
                only(ref, where, ["fieldPath", "apiVersion"])
                if ref["fieldPath"] not in FIELD_REFS:
                    raise Unsupported(f"{where}: fieldRef {ref['fieldPath']}")
                out[e["name"]] = fields[ref["fieldPath"]]
            else:
                out[e["name"]] = expand(str(e.get("value", "")), out)
        return out

    def probe_url(self, c, kind):
        """The URL kubelet's HTTP probe `kind` of container spec `c` GETs, and its timeout."""
        p = probe_spec(c, kind)
        get = p["httpGet"]
        port = get["port"]
        if isinstance(port, str):
            port = {q.get("name"): q["containerPort"] for q in c.get("ports") or []}[port]
        host = get.get("host") or node_ip()  # the pod's IP: with hostNetwork, the node's
        return f"http://{host}:{port}{get.get('path', '/')}", int(p.get("timeoutSeconds", 1))

    def requests(self):
        """Everything this pod would send, for `kubelet.py print`."""
        return {
            "qos": self.qos,
            "volumes": [what for what, _ in self.volume_steps()],
            "sandbox": self.sandbox(),
            "init_containers": [self.container(c, 0) for c in self.spec.get("initContainers") or []],
            "containers": [self.container(c, 0) for c in self.spec["containers"]],
        }


def expand(text, env):
    """kubelet's $(VAR) expansion of command, args and env values: a defined VAR is replaced,
    $$ is a literal $, anything else stays as written."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


def node_ip():
    """The node's address (what kubelet reports as the pod IP of a hostNetwork pod): its first
    global IPv4 address."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.search(r"inet ([0-9.]+)/", line)
        if m:
            return m.group(1)
    raise RuntimeError(f"the node has no global IPv4 address for status.podIP ({out!r})")


def ports(c, spec):
    """Container ports as the API server validates them; with hostNetwork each is a host port."""
    seen = set()
    for q in c.get("ports") or []:
        only(q, f"container {c['name']}: port", ["name", "containerPort", "hostPort", "protocol"])
        n = q.get("name")
        if n is not None and not re.fullmatch(r"(?=.*[a-z])[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?", n):
            raise Unsupported(f"container {c['name']}: port name {n!r} is not an IANA service name (1-15 [a-z0-9-])")
        if n in seen:
            raise Unsupported(f"container {c['name']}: port name {n} twice")
        seen.add(n)
        if not 0 < int(q["containerPort"]) < 65536 or q.get("protocol", "TCP") != "TCP":
            raise Unsupported(f"container {c['name']}: port {q}")
        if spec.get("hostNetwork") and q.get("hostPort", q["containerPort"]) != q["containerPort"]:
            raise Unsupported(f"container {c['name']}: with hostNetwork, hostPort must equal containerPort ({q})")


def probe_spec(c, kind):
    """Probe `kind` of container spec `c`, refused unless an HTTP GET the stand-in can run."""
    p = c[kind]
    only(p, f"container {c['name']}: {kind}", PROBE_KEYS)
    if "httpGet" not in p:
        raise Unsupported(f"container {c['name']}: {kind} without httpGet")
    get = p["httpGet"]
    only(get, f"container {c['name']}: {kind}.httpGet", ["path", "port", "host", "scheme"])
    if get.get("scheme", "HTTP") != "HTTP":
        raise Unsupported(f"container {c['name']}: {kind} scheme {get['scheme']}")
    if isinstance(get["port"], str) and get["port"] not in {q.get("name") for q in c.get("ports") or []}:
        raise Unsupported(f"container {c['name']}: {kind} names port {get['port']}, which the container does not declare")
    return p


def probe(plan, c, kind):
    """One probe as kubelet runs it: (succeeded, status, body). Success is a status of 200-399."""
    import urllib.error
    import urllib.request

    url, timeout = plan.probe_url(c, kind)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return 200 <= r.status < 400, r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return False, e.code, e.read().decode(errors="replace")
    except OSError as e:
        return False, 0, str(e)


def _host_path_step(hp):
    path, kind = hp["path"], hp.get("type", "") or ""

    def step():
        if kind == "DirectoryOrCreate" and not os.path.exists(path):
            os.makedirs(path, mode=0o755)
            os.chmod(path, 0o755)
        elif kind == "FileOrCreate" and not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a"):
                pass
            os.chmod(path, 0o644)
        want = {"Directory": stat.S_ISDIR, "DirectoryOrCreate": stat.S_ISDIR, "File": stat.S_ISREG,
                "FileOrCreate": stat.S_ISREG, "Socket": stat.S_ISSOCK, "CharDevice": stat.S_ISCHR,
                "BlockDevice": stat.S_ISBLK}
        if kind and kind not in want:
            raise Unsupported(f"hostPath type {kind}")
        if kind and not (os.path.exists(path) and want[kind](os.stat(path).st_mode)):
            raise RuntimeError(f"hostPath {path} is not a {kind}: kubelet would not start the pod")

    return step


def _configmap_step(d, data, mode):
    def step():
        # kubelet's layout: the files in a timestamped directory, ..data pointing at it, and one
        # symlink per key through ..data (a ConfigMap update swaps ..data atomically).
        stamp = "..{}".format(datetime.datetime.now().strftime("%Y_%m_%d_%H_%M_%S.%f"))
        os.makedirs(os.path.join(d, stamp))
        for key, text in data.items():
            with open(os.path.join(d, stamp, key), "w") as f:
                f.write(text)
            os.chmod(os.path.join(d, stamp, key), mode)
        os.symlink(stamp, os.path.join(d, "..data"))
        for key in data:
            os.symlink(os.path.join("..data", key), os.path.join(d, key))

    return step


def node_labels():
    return {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": socket.gethostname()}


def daemonset_pod(manifest, capacity=None):
    """A new pod of the DaemonSet's template: the controller's name, uid and labels."""
    suffix = uuid.uuid4().hex[:5]
    labels = {"controller-revision-hash": manifest.revision(), "pod-template-generation": "1"}
    return PodPlan(manifest, manifest.template, f"{manifest.name}-{suffix}", str(uuid.uuid4()), node_labels(),
                   capacity or mem_total(), labels)


# --- kubelet over CRI --------------------------------------------------------------------------


class Container:
    """A started container of a RunningPod."""

    def __init__(self, name, cid, attempt):
        self.name, self.id, self.attempt = name, cid, attempt


class RunningPod:
    def __init__(self, plan, sandbox_id, sandbox_config):
        self.plan, self.id, self.config = plan, sandbox_id, sandbox_config
        self.init = {}  # name -> Container (exited)
        self.containers = {}  # name -> Container (the current attempt)
        self.dead = []  # earlier attempts, kept as kubelet keeps the last one

    def log(self, name, attempt=None):
        c = self.containers.get(name) or self.init.get(name)
        a = c.attempt if attempt is None else attempt
        path = os.path.join(self.plan.log_directory, name, f"{a}.log")
        return open(path, errors="replace").read() if os.path.exists(path) else ""


class Kubelet:
    """The CRI calls kubelet makes for a pod's life (cri.Cri does the gRPC)."""

    def __init__(self, cri):
        from google.protobuf import json_format

        self.cri, self.pb, self.json_format = cri, cri.pb, json_format

    def parse(self, d, cls):
        return self.json_format.ParseDict(d, cls())

    def image_present(self, image):
        pb = self.pb
        req = pb.ImageStatusRequest(image=pb.ImageSpec(image=image))
        rpc = self.cri.channel.unary_unary(
            "/runtime.v1.ImageService/ImageStatus",
            request_serializer=req.SerializeToString,
            response_deserializer=pb.ImageStatusResponse.FromString,
        )
        return rpc(req, timeout=60).HasField("image")

    def state(self, cid):
        return self.cri.status(cid).status

    def wait_exited(self, cid, timeout):
        end = time.monotonic() + timeout
        while True:
            st = self.state(cid)
            if st.state == self.pb.CONTAINER_EXITED:
                return st
            if time.monotonic() > end:
                raise RuntimeError(f"container {cid} still not exited after {timeout} s (state {st.state})")
            time.sleep(1)

    def run_pod(self, plan, timeout=300):
        """prepare the volumes, RunPodSandbox, the init containers to completion, the containers."""
        for c in list(plan.spec.get("initContainers") or []) + list(plan.spec["containers"]):
            if not self.image_present(c["image"]):
                raise RuntimeError(f"image {c['image']} is not on the node (IfNotPresent, and no registry to pull from)")
        plan.prepare()
        sb = self.parse(plan.sandbox(), self.pb.PodSandboxConfig)
        r = self.cri.call("RunPodSandbox", self.pb.RunPodSandboxRequest(config=sb), self.pb.RunPodSandboxResponse)
        pod = RunningPod(plan, r.pod_sandbox_id, sb)
        for c in plan.spec.get("initContainers") or []:
            cid = self.create_start(pod, c, 0)
            st = self.wait_exited(cid, timeout)
            pod.init[c["name"]] = Container(c["name"], cid, 0)
            if st.exit_code != 0:
                raise RuntimeError(f"init container {c['name']} exited {st.exit_code}: {pod.log(c['name'])[-2000:]}")
        for c in plan.spec["containers"]:
            pod.containers[c["name"]] = Container(c["name"], self.create_start(pod, c, 0), 0)
        return pod

    def create_start(self, pod, spec, attempt):
        os.makedirs(os.path.join(pod.plan.log_directory, spec["name"]), exist_ok=True)
        cfg = self.parse(pod.plan.container(spec, attempt), self.pb.ContainerConfig)
        req = self.pb.CreateContainerRequest(pod_sandbox_id=pod.id, config=cfg, sandbox_config=pod.config)
        cid = self.cri.call("CreateContainer", req, self.pb.CreateContainerResponse).container_id
        self.cri.start(cid)
        return cid

    def restart(self, pod, name):
        """A container that exited comes back as kubelet restarts it: the next attempt, same sandbox."""
        old = pod.containers[name]
        pod.dead.append(old)
        spec = container_named(pod.plan.template, name)
        pod.containers[name] = Container(name, self.create_start(pod, spec, old.attempt + 1), old.attempt + 1)
        return pod.containers[name]

    def delete_pod(self, pod):
        """A pod deleted: its containers stopped with the grace period, then the sandbox."""
        pb = self.pb
        for c in pod.containers.values():
            self.cri.call("StopContainer", pb.StopContainerRequest(container_id=c.id, timeout=pod.plan.grace),
                          pb.StopContainerResponse, timeout=pod.plan.grace + 120)
        self.cri.call("StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=pod.id), pb.StopPodSandboxResponse)
        self.cri.call("RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=pod.id), pb.RemovePodSandboxResponse)


# --- CRI Exec (what `kubectl exec` reaches): the streaming URL over a WebSocket ----------------


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the streaming server closed the connection mid-frame")
        buf += chunk
    return buf


def stream_exec(cri, cid, cmd, timeout=60):
    """CRI Exec of `cmd` in container `cid` (stdout and stderr, no tty), read through the URL the
    runtime's streaming server returns, with the v4.channel.k8s.io WebSocket protocol kubelet
    speaks for `kubectl exec`: binary messages whose first byte is the channel (1 stdout, 2
    stderr, 3 the final status as JSON). Returns (exit code, stdout, stderr)."""
    pb = cri.pb
    r = cri.call("Exec", pb.ExecRequest(container_id=cid, cmd=cmd, stdout=True, stderr=True), pb.ExecResponse)
    url = urlsplit(r.url)
    sock = socket.create_connection((url.hostname, url.port or 80), timeout=timeout)
    try:
        key = base64.b64encode(os.urandom(16)).decode()
        path = url.path + (f"?{url.query}" if url.query else "")
        sock.sendall(
            (f"GET {path} HTTP/1.1\r\nHost: {url.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
             "Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n").encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(1)
            if not chunk:
                raise ConnectionError(f"no WebSocket handshake from {r.url}: {head!r}")
            head += chunk
        status_line = head.split(b"\r\n", 1)[0].decode()
        if " 101 " not in status_line + " ":
            raise ConnectionError(f"WebSocket handshake refused by {r.url}: {head.decode(errors='replace')}")
        out = {1: b"", 2: b"", 3: b""}
        message = b""
        while True:
            try:
                b0, b1 = _recv_exact(sock, 2)
            except ConnectionError:
                break
            n = b1 & 0x7F
            if n == 126:
                n = int.from_bytes(_recv_exact(sock, 2), "big")
            elif n == 127:
                n = int.from_bytes(_recv_exact(sock, 8), "big")
            mask = _recv_exact(sock, 4) if b1 & 0x80 else None
            payload = _recv_exact(sock, n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            opcode = b0 & 0x0F
            if opcode == 0x8:  # close
                break
            if opcode in (0x0, 0x1, 0x2):
                message += payload
                if b0 & 0x80 and message:  # FIN: one whole message
                    channel, data = message[0], message[1:]
                    out[channel] = out.get(channel, b"") + data
                    message = b""
    finally:
        sock.close()
    status = json.loads(out[3] or b"{}")
    if status.get("status", "Success") == "Success":
        code = 0
    else:
        causes = (status.get("details") or {}).get("causes") or []
        codes = [int(c["message"]) for c in causes if c.get("reason") == "ExitCode"]
        code = codes[0] if codes else -1
    return code, out[1].decode(errors="replace"), out[2].decode(errors="replace")


def main(argv):
    """kubelet.py print MANIFEST [GEN_DIR]: the CRI requests for a pod of the manifest's DaemonSet
    (JSON); with GEN_DIR, each is also parsed with CRI's api.proto compiled there (cri.py), so a
    field name CRI does not have is an error."""
    if len(argv) not in (3, 4) or argv[1] != "print":
        raise SystemExit("usage: kubelet.py print MANIFEST [GEN_DIR]")
    plan = daemonset_pod(Manifest(argv[2]), capacity=4 * 2**30)
    req = plan.requests()
    if len(argv) == 4:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import cri
        from google.protobuf import json_format

        pb = cri.compile_proto(argv[3])
        json_format.ParseDict(req["sandbox"], pb.PodSandboxConfig())
        for c in req["init_containers"] + req["containers"]:
            json_format.ParseDict(c, pb.ContainerConfig())
    print(json.dumps(req, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
