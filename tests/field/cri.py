#!/usr/bin/env python3
# Field tier, inside the Debian 13 guest: pods run through containerd's CRI socket the way kubelet
# runs them (pod metadata, pod and container annotations, the kubelet's QoS cgroup parents,
# host-network pods so no CNI is needed), with the hook wired as packaging/containerd/ documents.
# Every cookie is read with util-linux `coresched get -s PID` and cross-checked against the hook's
# own `inspect`; a disagreement is a failure.
#
# CRI's api.proto comes from Debian's golang-github-kubernetes-cri-api-dev and is compiled here, at
# test time (its gogoproto lines are Go-only options and are dropped from the compiled copy).
#
#   cri.py GEN_DIR          prints TAP lines ("ok - ...", "not ok - ...") and a summary line
"""CRI client and containerd scenarios of the field tier."""

import json
import os
import re
import subprocess
import sys
import time

PROTO = "/usr/share/gocode/src/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto"
SOCKET = "unix:///run/containerd/containerd.sock"
IMAGE = "docker.io/local/field:1"
HOOK = "/usr/bin/oci-coresched-hook"
CONFIG = "/etc/oci-coresched-hook/config.toml"
STATE_DIR = "/run/oci-coresched-hook"
LOGS = "/run/xchg/cri-logs"

PASS = 0
FAIL = 0


def ok(what):
    global PASS
    PASS += 1
    print(f"ok - {what}", flush=True)


def bad(what, detail=""):
    global FAIL
    FAIL += 1
    print(f"not ok - {what}", flush=True)
    for line in str(detail).splitlines()[-15:]:
        print(f"#   {line}", flush=True)


def check(what, cond, detail=""):
    (ok if cond else lambda w: bad(w, detail))(what)
    return cond


def note(msg):
    print(f"# {msg}", flush=True)


def compile_proto(gen):
    """Compile CRI's api.proto into GEN_DIR and import it."""
    os.makedirs(gen, exist_ok=True)
    with open(PROTO) as src, open(os.path.join(gen, "api.proto"), "w") as out:
        out.writelines(line for line in src if "gogo" not in line)
    from grpc_tools import protoc

    if protoc.main(["protoc", "-I" + gen, "--python_out=" + gen, "api.proto"]) != 0:
        raise SystemExit(f"cri.py: failed to compile {PROTO}")
    sys.path.insert(0, gen)
    import api_pb2

    return api_pb2


class Cri:
    """The CRI RuntimeService over containerd's socket."""

    def __init__(self, pb):
        import grpc

        self.pb = pb
        self.grpc = grpc
        self.channel = grpc.insecure_channel(SOCKET)
        self.timings = []

    def reconnect(self):
        """A new channel, for after containerd restarted: a channel that was connected to the
        process that went away can fail its next call with UNAVAILABLE ("Broken pipe") or wait out
        a reconnect backoff, where kubelet's client would have reconnected."""
        self.channel.close()
        self.channel = self.grpc.insecure_channel(SOCKET)

    def call(self, method, req, resp_cls, timeout=300):
        rpc = self.channel.unary_unary(
            "/runtime.v1.RuntimeService/" + method,
            request_serializer=req.SerializeToString,
            response_deserializer=resp_cls.FromString,
        )
        t0 = time.monotonic()
        try:
            return rpc(req, timeout=timeout)
        finally:
            self.timings.append((method, time.monotonic() - t0))

    def ns_options(self):
        return self.pb.NamespaceOption(network=self.pb.NODE)

    def pod_uid(self, name):
        return f"uid-{name}"

    def cgroup_parent(self, uid, qos):
        """kubelet's cgroupfs driver: /kubepods/<qos>/pod<uid> (Guaranteed: no qos level)."""
        return f"/kubepods/{qos}/pod{uid}" if qos else f"/kubepods/pod{uid}"

    def sandbox_config(self, name, namespace, annotations, qos):
        pb = self.pb
        uid = self.pod_uid(name)
        return pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace=namespace, attempt=0),
            log_directory=f"{LOGS}/{name}",
            annotations=annotations,
            labels={"io.kubernetes.pod.name": name},
            linux=pb.LinuxPodSandboxConfig(
                cgroup_parent=self.cgroup_parent(uid, qos),
                security_context=pb.LinuxSandboxSecurityContext(namespace_options=self.ns_options()),
            ),
        )

    def remove_all_pods(self):
        """Every pod on the node stopped and removed, as kubelet would after a drain: an aborted
        part leaves no pod whose name the next part's pods would collide with. Returns how many."""
        pb = self.pb
        items = self.call("ListPodSandbox", pb.ListPodSandboxRequest(), pb.ListPodSandboxResponse).items
        for p in items:
            self.call("StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=p.id), pb.StopPodSandboxResponse)
            self.call("RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=p.id), pb.RemovePodSandboxResponse)
        return len(items)

    def run_pod(self, config, handler=""):
        os.makedirs(config.log_directory, exist_ok=True)
        req = self.pb.RunPodSandboxRequest(config=config, runtime_handler=handler)
        r = self.call("RunPodSandbox", req, self.pb.RunPodSandboxResponse)
        return r.pod_sandbox_id

    def create(self, pod_id, sandbox, name, command, annotations=None, uid=None, mounts=(), resources=None):
        """A container of the pod; uid: the user its process runs as (kubelet's runAsUser); mounts:
        CRI Mounts (hostPath volumes); resources: LinuxContainerResources fields (kubelet's for the
        pod's QoS class), else none."""
        pb = self.pb
        sc = pb.LinuxContainerSecurityContext(namespace_options=self.ns_options())
        if uid is not None:
            sc.run_as_user.value = uid
        linux = pb.LinuxContainerConfig(security_context=sc)
        if resources is not None:
            linux.resources.CopyFrom(pb.LinuxContainerResources(**resources))
        c = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name, attempt=0),
            image=pb.ImageSpec(image=IMAGE),
            command=command,
            log_path=f"{name}.log",
            annotations=annotations or {},
            mounts=list(mounts),
            linux=linux,
        )
        req = pb.CreateContainerRequest(pod_sandbox_id=pod_id, config=c, sandbox_config=sandbox)
        return self.call("CreateContainer", req, pb.CreateContainerResponse).container_id

    def start(self, cid):
        self.call("StartContainer", self.pb.StartContainerRequest(container_id=cid), self.pb.StartContainerResponse)

    def status(self, cid):
        return self.call(
            "ContainerStatus",
            self.pb.ContainerStatusRequest(container_id=cid, verbose=True),
            self.pb.ContainerStatusResponse,
        )

    def pid(self, cid):
        info = json.loads(self.status(cid).info.get("info", "{}"))
        return int(info.get("pid", 0))

    def sandbox_pid(self, pod_id):
        r = self.call(
            "PodSandboxStatus",
            self.pb.PodSandboxStatusRequest(pod_sandbox_id=pod_id, verbose=True),
            self.pb.PodSandboxStatusResponse,
        )
        return int(json.loads(r.info.get("info", "{}")).get("pid", 0))

    def remove_pod(self, pod_id):
        """StopPodSandbox, RemovePodSandbox: the pod and its containers gone, as kubelet removes it."""
        pb = self.pb
        self.call("StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=pod_id), pb.StopPodSandboxResponse)
        self.call("RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id), pb.RemovePodSandboxResponse)

    def stop_remove(self, cid):
        self.call("StopContainer", self.pb.StopContainerRequest(container_id=cid, timeout=0), self.pb.StopContainerResponse)
        self.call("RemoveContainer", self.pb.RemoveContainerRequest(container_id=cid), self.pb.RemoveContainerResponse)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


COOKIE_LINE = re.compile(r"^cookie of pid (\d+) is (0x[0-9a-f]+)$")


def read_cookie(pid):
    """The cookie of PID as util-linux coresched reads it ('0x...'), and nothing else: it asks the
    hook nothing, so it reads on while the hook's commands cannot (the state lock held, an invalid
    config, no hook installed)."""
    r = run(["coresched", "get", "-s", str(pid)])
    m = COOKIE_LINE.match(r.stdout.strip())
    if r.returncode != 0 or not m or int(m.group(1)) != pid:
        raise RuntimeError(f"coresched get -s {pid}: exit {r.returncode}: {r.stdout}{r.stderr}")
    return m.group(2)


def coresched(pid):
    """The cookie of PID as util-linux coresched reads it ('0x...'), cross-checked with inspect."""
    cookie = read_cookie(pid)
    i = run([HOOK, "inspect", str(pid), "--json"])
    if i.returncode != 0:
        raise RuntimeError(f"inspect {pid}: exit {i.returncode}: {i.stderr}")
    theirs = json.loads(i.stdout)["cookie"]
    if int(theirs, 16) != int(cookie, 16):
        raise RuntimeError(f"pid {pid}: coresched says {cookie}, oci-coresched-hook inspect says {theirs}")
    return cookie


def shim_of(pid):
    """The pod's shim: the parent of a container's init, which must be a containerd-shim."""
    with open(f"/proc/{pid}/stat") as f:
        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
    with open(f"/proc/{ppid}/comm") as f:
        comm = f.read().strip()
    if not comm.startswith("containerd-shim"):
        raise RuntimeError(f"the parent of pid {pid} is {ppid} ({comm}), not a containerd shim")
    return ppid


def shim_rows():
    """The rows of the pods' shims in the hook's `list --json`: id -> (group, live)."""
    r = run([HOOK, "list", "--json"])
    if r.returncode != 0:
        raise RuntimeError(f"list --json: exit {r.returncode}: {r.stderr}")
    return {m["id"]: (g["group"], m.get("live")) for g in json.loads(r.stdout) for m in g["members"] if m["id"].startswith("shim:")}


def cached():
    """Container id -> group, from the hook's `list --json` (containers only: not the rows of the
    pods' shims, `shim:<sandbox id>`, which stay until `gc` once their shim exits)."""
    r = run([HOOK, "list", "--json"])
    if r.returncode != 0:
        raise RuntimeError(f"list --json: exit {r.returncode}: {r.stderr}")
    return {m["id"]: g["group"] for g in json.loads(r.stdout) for m in g["members"] if not m["id"].startswith("shim:")}


def wait_for(pred, timeout, step=1.0):
    end = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() > end:
            return False
        time.sleep(step)


G = "oci-coresched-hook/group"
P = "oci-coresched-hook/policy"


def first_cookie(log_directory, name="first"):
    """The cookie a container whose process is `coresched get` printed as its first output (its
    CRI log `<log_directory>/<name>.log`, waited for up to 60 s): (cookie or None, the log)."""
    log = os.path.join(log_directory, f"{name}.log")
    wait_for(lambda: os.path.exists(log) and "cookie of pid" in open(log).read(), 60)
    text = open(log).read() if os.path.exists(log) else ""
    m = re.search(r"stdout F cookie of pid \d+ is (0x[0-9a-f]+)", text)
    return (m.group(1) if m else None), text


def scenarios(cri):
    pods = {}

    def pod(name, namespace, qos, annotations, handler=""):
        t0 = time.monotonic()
        sb = cri.sandbox_config(name, namespace, annotations, qos)
        pods[name] = (cri.run_pod(sb, handler), sb)
        note(f"pod {namespace}/{name} running ({time.monotonic() - t0:.1f} s, handler {handler or 'default'})")

    ctrs = {}

    def container(pod_name, name, command=None, annotations=None, start=True):
        pod_id, sb = pods[pod_name]
        t0 = time.monotonic()
        cid = cri.create(pod_id, sb, name, command or ["/bin/sleep", "3600"], annotations)
        ctrs[f"{pod_name}/{name}"] = cid
        if start:
            cri.start(cid)
            note(f"container {pod_name}/{name} started ({time.monotonic() - t0:.1f} s)")
        return cid

    def cookie(key):
        return coresched(cri.pid(ctrs[key]))

    # BestEffort pod, no group annotation: the pod is the group; BE rule of the config
    # (core_expeller, sched_idle). "first" joins c2: its process is coresched itself, which reads
    # its own cookie as its first action and exits.
    pod("be", "tenant-a", "besteffort", {"other.example/pod": "x"})
    container("be", "c2")
    container("be", "first", ["/usr/bin/coresched", "get"])
    # Named group in the pod's annotations; container-level policy annotations.
    pod("web1", "tenant-a", "burstable", {G: "web", "koordinator.sh/qosClass": "LS"})
    container("web1", "web")
    container("web1", "none", annotations={P: "none"})
    container("web1", "excl", annotations={P: "exclusive"})
    # No pod-level group: one container names the group itself, the other takes the pod default.
    pod("web2", "tenant-a", "burstable", {"other.example/pod": "y"})
    container("web2", "web", annotations={G: "web"})
    container("web2", "dflt")
    # The same group name in another namespace; a container annotation overriding the pod's.
    pod("web3", "tenant-b", "burstable", {G: "web"})
    container("web3", "web")
    container("web3", "solo", annotations={G: "solo"})
    # The same group through the crun runtime handler.
    pod("crun1", "tenant-a", "burstable", {G: "web"}, handler="crun")
    container("crun1", "web")

    c = {k: cookie(k) for k in ctrs if k != "be/first"}
    note("cookies (coresched): " + ", ".join(f"{k}={v}" for k, v in c.items()))
    cache = cached()
    note("cached groups: " + ", ".join(f"{k[:12]}={v}" for k, v in sorted(cache.items(), key=lambda kv: kv[1])))

    # The pods' shims (one containerd-shim-runc-v2 per pod spawns its exec'd processes).
    shim = {p: coresched(shim_of(cri.pid(ctrs[k]))) for p, k in
            (("be", "be/c2"), ("web1", "web1/web"), ("web2", "web2/web"), ("web3", "web3/web"), ("crun1", "crun1/web"))}
    note("pod shims' cookies (coresched): " + ", ".join(f"{k}={v}" for k, v in shim.items()))
    check("a pod whose containers agree: its shim holds their group's cookie (runc)", shim["be"] == c["be/c2"], shim)
    check("a pod whose containers agree: its shim holds their group's cookie (crun)", shim["crun1"] == c["crun1/web"], shim)
    check("a pod with a policy-none container: its shim is at cookie 0", shim["web1"] == "0x0", shim)
    own = [(p, keys) for p, keys in (("web2", ("web2/web", "web2/dflt")), ("web3", ("web3/web", "web3/solo")))]
    check("a pod whose containers are in two groups: its shim has a cookie of its own",
          all(shim[p] != "0x0" and shim[p] not in [c[k] for k in keys] and shim[p] not in set(shim.values()) - {shim[p]}
              for p, keys in own), shim)
    rows = shim_rows()
    check("the cache records each pod's shim (shim:<sandbox id>) in the group whose cookie it holds",
          rows.get(f"shim:{pods['be'][0]}", ("-",))[0] == cache.get(ctrs["be/c2"])
          and rows.get(f"shim:{pods['web1'][0]}", ("-",))[0] == f"shim:{pods['web1'][0]}:cleared"
          and rows.get(f"shim:{pods['web2'][0]}", ("-",))[0] == f"shim:{pods['web2'][0]}", rows)

    be = c["be/c2"]
    check("BestEffort pod: its container has a cookie", be != "0x0")
    got, first = first_cookie(pods["be"][1].log_directory)
    check(
        "the container's first instruction already ran under its cookie (its process is coresched get)",
        got == be,
        f"log of be/first: {first!r}, be/c2 has {be}",
    )
    check("two containers of one pod share the pod's cookie (pod default group)", got == be, f"be/first {got}, be/c2 {be}")
    group = cache.get(ctrs["be/c2"], "")
    want = f"tenant-a/pod:{pods['be'][0]}:expeller"
    check("BestEffort: the BE rule's core_expeller puts the pod in its expeller group", group == want, f"{group} != {want}")
    cg = f"/sys/fs/cgroup/kubepods/besteffort/poduid-be/{ctrs['be/c2']}/cpu.idle"
    idle = open(cg).read().strip() if os.path.exists(cg) else f"missing {cg}"
    check("BestEffort: sched_idle wrote cpu.idle = 1 into the container's cgroup", idle == "1", idle)
    # Something resets it (systemd re-applying a unit, a runtime's update): the follower, the
    # installed reconcile unit under its sandbox, writes 1 again.
    reset = os.path.exists(cg)
    if reset:
        with open(cg, "w") as f:
            f.write("0")
    back = reset and wait_for(lambda: open(cg).read().strip() == "1", 30, 0.5)
    check(
        "cpu.idle reset to 0: the follower (oci-coresched-hook-reconcile.service) writes 1 again",
        back,
        open(cg).read().strip() if reset else f"missing {cg}",
    )
    sb_pid = cri.sandbox_pid(pods["be"][0])
    sb_cookie = coresched(sb_pid)
    check(
        "the pod sandbox (pause) container gets no hook from base_runtime_spec: cookie 0",
        sb_cookie == "0x0",
        f"sandbox pid {sb_pid} has {sb_cookie}",
    )

    web = c["web1/web"]
    check("named group: a container has a cookie", web != "0x0")
    check("two pods naming one group in one namespace share a cookie", c["web2/web"] == web, c)
    check("a pod under the crun handler joins the group's cookie", c["crun1/web"] == web, c)
    check("the same group name in another namespace is another cookie", c["web3/web"] not in (web, "0x0"), c)
    check("a second pod's default group is another cookie", c["web2/dflt"] not in ("0x0", be, web), c)
    check("a container annotation overrides the pod's group annotation", c["web3/solo"] not in ("0x0", c["web3/web"]), c)
    check("policy none (container annotation): cookie 0", c["web1/none"] == "0x0", c)
    others = {v for k, v in c.items() if k != "web1/excl"}
    check("policy exclusive (container annotation): a cookie of its own", c["web1/excl"] not in others | {"0x0"}, c)
    check(
        "the cache keys groups by namespace (tenant-a/web, tenant-b/web)",
        cache.get(ctrs["web1/web"]) == "tenant-a/web" and cache.get(ctrs["web3/web"]) == "tenant-b/web",
        cache,
    )

    # stop + remove: poststop under containerd forgets the container; the group keeps its cookie.
    gone = ctrs["web2/web"]
    cri.stop_remove(gone)
    check("stop + remove: poststop made the cache forget the container", wait_for(lambda: gone not in cached(), 60), cached())
    check("the group's other member keeps the cookie", cookie("web1/web") == web)
    crun_web = ctrs["crun1/web"]
    cri.stop_remove(crun_web)
    check("stop + remove under crun: poststop made the cache forget it", wait_for(lambda: crun_web not in cached(), 60), cached())
    container("web2", "web-again", annotations={G: "web"})
    check("a container started later joins the surviving member's cookie", cookie("web2/web-again") == web)

    # fail_closed with an unusable state dir: StartContainer fails with the hook's reason, and
    # the container never runs.
    with open(CONFIG) as f:
        saved = f.read()
    os.rename(STATE_DIR, STATE_DIR + ".saved")
    try:
        with open(STATE_DIR, "w") as f:
            f.write("not a directory\n")
        if "fail_closed = false" not in saved:
            raise RuntimeError(f"{CONFIG} has no 'fail_closed = false' line to turn on")
        with open(CONFIG, "w") as f:
            f.write(saved.replace("fail_closed = false", "fail_closed = true"))
        cid = container("web1", "closed", start=False)
        err = None
        try:
            cri.start(cid)
        except cri.grpc.RpcError as e:
            err = e.details()
        check("fail_closed + unusable state dir: StartContainer fails", err is not None)
        note(f"StartContainer error: {err}")
        check("the CRI error carries the hook's reason (the state dir)", err is not None and "state dir" in err, err)
        st = cri.status(cid).status
        check(
            "the refused container is not running and has no process",
            st.state != cri.pb.CONTAINER_RUNNING and cri.pid(cid) == 0,
            f"state {st.state}, pid {cri.pid(cid)}",
        )
        cri.call("RemoveContainer", cri.pb.RemoveContainerRequest(container_id=cid), cri.pb.RemoveContainerResponse)
    finally:
        os.unlink(STATE_DIR)
        os.rename(STATE_DIR + ".saved", STATE_DIR)
        with open(CONFIG, "w") as f:
            f.write(saved)
    check("the cache survived the refused start", ctrs["web1/web"] in cached())

    # Tear down as kubelet does: every pod stopped and removed; poststop forgets every container.
    for pod_id, _ in pods.values():
        cri.call("StopPodSandbox", cri.pb.StopPodSandboxRequest(pod_sandbox_id=pod_id), cri.pb.StopPodSandboxResponse)
        cri.call("RemovePodSandbox", cri.pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id), cri.pb.RemovePodSandboxResponse)
    check("every pod stopped and removed: the cache holds no container", wait_for(lambda: not cached(), 60), cached())
    gc = run([HOOK, "gc"])
    check("gc drops the rows of the pods' shims, which exited with their pods",
          gc.returncode == 0 and not shim_rows(), f"{gc.stdout}{gc.stderr}{shim_rows()}")


def guarded(what, cri, body):
    """Runs body(): a crash is a failure with its cause, never a silent pass, and the pods it
    left on the node are stopped and removed."""
    try:
        body()
    except Exception as e:
        import traceback

        bad(f"{what} aborted: {type(e).__name__}", traceback.format_exc())
        try:
            note(f"after the abort: {cri.remove_all_pods()} pods left on the node stopped and removed")
        except Exception as e2:  # noqa: BLE001 - the abort above is the failure; this only says why cleanup failed too
            note(f"after the abort: failed to remove the pods left on the node: {e2}")


def main():
    gen = sys.argv[1]
    t0 = time.monotonic()
    pb = compile_proto(gen)
    note(f"compiled CRI api.proto in {time.monotonic() - t0:.1f} s")
    cri = Cri(pb)
    guarded("containerd scenarios", cri, lambda: scenarios(cri))
    per = {}
    for method, secs in cri.timings:
        per.setdefault(method, []).append(secs)
    note("CRI call times (s): " + ", ".join(f"{m} n={len(v)} max={max(v):.1f}" for m, v in per.items()))
    print(f"cri: {PASS} passed, {FAIL} failed", flush=True)
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
