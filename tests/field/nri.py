#!/usr/bin/env python3
# Field tier, inside the Debian 13 guest: containerd 1.7 with NRI enabled and nothing else for the
# hook (no base_runtime_spec, no pod_annotations, no hook-injector): the packaged NRI plugin
# service (`oci-coresched-hook nri`, started with the ExecStart of the installed systemd unit) is
# the only wiring. Pods run through CRI as in cri.py (whose client and readers this reuses); every
# cookie is read with util-linux `coresched`, cross-checked with the hook's `inspect`.
#
# The plugin is started before containerd (the socket is absent: one clear line), killed and
# restarted between pods (a pod started meanwhile gets its cookie at catch-up), and containerd is
# restarted under it (it reconnects).
#
#   nri.py GEN_DIR          prints TAP lines and a summary line
"""containerd NRI-only scenarios of the field tier."""

import os
import re
import shlex
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cri as base  # noqa: E402  (the CRI client, coresched reader, TAP counters)

from cri import G, P, bad, cached, check, coresched, note, wait_for  # noqa: E402

UNIT = "/lib/systemd/system/oci-coresched-hook-nri.service"
X = "/run/xchg"
PLUGIN_LOG = f"{X}/nri-plugin.log"
CONTAINERD_LOG = f"{X}/containerd-nri.log"
NRI_SOCKET = "/var/run/nri/nri.sock"


def unit_exec_start():
    """The plugin's command line, as the installed unit runs it."""
    with open(UNIT) as f:
        for line in f:
            if line.startswith("ExecStart="):
                return shlex.split(line[len("ExecStart=") :].strip())
    raise RuntimeError(f"{UNIT} has no ExecStart")


class Proc:
    """A service run the way systemd would (own log, restartable)."""

    def __init__(self, name, argv, log):
        self.name, self.argv, self.log, self.p = name, argv, log, None

    def start(self):
        self.p = subprocess.Popen(self.argv, stdout=open(self.log, "a"), stderr=subprocess.STDOUT)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.p is None:
            return None
        self.p.send_signal(sig)
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        self.p = None
        return rc

    def alive(self):
        return self.p is not None and self.p.poll() is None


def log_text(path):
    return open(path, errors="replace").read() if os.path.exists(path) else ""


def start_containerd(c):
    c.start()
    ok_ = wait_for(
        lambda: not c.alive() or (os.path.exists("/run/containerd/containerd.sock") and base.run(["ctr", "version"]).returncode == 0),
        120,
    )
    if not ok_ or not c.alive():
        raise RuntimeError(f"containerd did not come up: {log_text(CONTAINERD_LOG)[-2000:]}")
    failed = [l for l in log_text(CONTAINERD_LOG).splitlines() if "failed to load plugin io.containerd.grpc.v1.cri" in l]
    if failed:
        raise RuntimeError(f"containerd's CRI plugin did not load: {failed[-1]}")


def plugin_connected(since):
    """The plugin's log, after offset `since`, says it registered with the runtime."""
    text = log_text(PLUGIN_LOG)[since:]
    return "registered as NRI plugin" in text


def scenarios(cri, plugin, containerd, without):
    pods, ctrs = {}, {}

    def pod(name, namespace, qos, annotations, handler=""):
        t0 = time.monotonic()
        sb = cri.sandbox_config(name, namespace, annotations, qos)
        pods[name] = (cri.run_pod(sb, handler), sb)
        note(f"pod {namespace}/{name} running ({time.monotonic() - t0:.1f} s, handler {handler or 'default'})")

    def container(pod_name, name, command=None, annotations=None):
        pod_id, sb = pods[pod_name]
        t0 = time.monotonic()
        cid = cri.create(pod_id, sb, name, command or ["/bin/sleep", "3600"], annotations)
        cri.start(cid)
        ctrs[f"{pod_name}/{name}"] = cid
        note(f"container {pod_name}/{name} started ({time.monotonic() - t0:.1f} s)")
        return cid

    def cookie(key):
        return coresched(cri.pid(ctrs[key]))

    # 0. The plugin starts before containerd: no socket yet. One clear line naming the setting,
    # then it keeps trying; it registers once containerd is up.
    plugin.start()
    time.sleep(3)
    text = log_text(PLUGIN_LOG)
    check("plugin started before the runtime: it keeps running", plugin.alive(), text[-1500:])
    lines = [l for l in text.splitlines() if "io.containerd.nri.v1.nri" in l]
    check(
        "no NRI socket: one clear line naming containerd's setting that enables NRI",
        len(lines) == 1 and "disable = false" in lines[0] and NRI_SOCKET in lines[0],
        text[-1500:],
    )
    start_containerd(containerd)
    check("the plugin registers once containerd is up", wait_for(lambda: plugin_connected(0), 90), log_text(PLUGIN_LOG)[-1500:])

    # 1. Pods through NRI only.
    pod("web1", "tenant-a", "burstable", {G: "web", "koordinator.sh/qosClass": "LS"})
    # "web" first: "first" exits at once, and a group's cookie lives as long as a member does.
    container("web1", "web")
    container("web1", "first", ["/usr/bin/coresched", "get"])
    container("web1", "none", annotations={P: "none"})
    pod("web2", "tenant-a", "burstable", {G: "web", "io.kubernetes.pod.namespace": "tenant-b"})
    container("web2", "web")
    container("web2", "solo", annotations={G: "solo"})
    pod("web3", "tenant-b", "burstable", {G: "web"})
    container("web3", "web")
    pod("be", "tenant-a", "besteffort", {})
    container("be", "c1")
    pod("crun1", "tenant-a", "burstable", {G: "web"}, handler="crun")
    container("crun1", "web")

    c = {k: cookie(k) for k in ctrs if k != "web1/first"}
    note("cookies (coresched): " + ", ".join(f"{k}={v}" for k, v in c.items()))
    cache = cached()
    web = c["web1/web"]
    check("NRI only: a pod's container has its group's cookie", web != "0x0", c)
    log = os.path.join(pods["web1"][1].log_directory, "first.log")
    wait_for(lambda: os.path.exists(log) and "cookie of pid" in open(log).read(), 60)
    first = log_text(log)
    m = re.search(r"stdout F cookie of pid \d+ is (0x[0-9a-f]+)", first)
    check(
        "NRI only: the container's first instruction already ran under its group's cookie",
        m is not None and m.group(1) == web,
        f"log of web1/first: {first!r}, web1/web has {web}",
    )
    check("two pods naming one group in one namespace share a cookie", c["web2/web"] == web, c)
    check(
        "the namespace comes from the pod's metadata: a pod annotation claiming tenant-b changes nothing",
        cache.get(ctrs["web2/web"]) == "tenant-a/web",
        cache,
    )
    check("the same group name in another namespace is another cookie", c["web3/web"] not in (web, "0x0"), c)
    check("a container annotation overrides the pod's group", c["web2/solo"] not in ("0x0", web, c["web3/web"]), c)
    check("policy none (container annotation): cookie 0", c["web1/none"] == "0x0", c)
    check("a pod under the crun handler joins the group's cookie", c["crun1/web"] == web, c)
    want = f"tenant-a/pod:{pods['be'][0]}:expeller"
    check("BestEffort (kubelet cgroup parent): the BE rule's expeller group", cache.get(ctrs["be/c1"]) == want, cache)
    cg = f"/sys/fs/cgroup/kubepods/besteffort/poduid-be/{ctrs['be/c1']}/cpu.idle"
    idle = open(cg).read().strip() if os.path.exists(cg) else f"missing {cg}"
    check("BestEffort: cpu.idle = 1", idle == "1", idle)
    sb = coresched(cri.sandbox_pid(pods["web1"][0]))
    check("the pod sandbox (pause) container gets no hook through NRI: cookie 0", sb == "0x0", sb)

    # 2. The plugin killed: a container started meanwhile runs without a cookie; once the plugin
    # is back, Synchronize catches it up; the running ones are untouched.
    rc = plugin.stop(signal.SIGKILL)
    note(f"plugin killed (status {rc})")
    pod("down", "tenant-a", "burstable", {G: "web"})
    mark = len(cri.timings)
    for name in ("web", "b", "c"):
        container("down", name)
    without.extend(secs for m, secs in cri.timings[mark:] if m == "CreateContainer")
    before = {k: cookie(f"down/{k}") for k in ("web", "b", "c")}
    check("plugin down: the containers start, without a cookie", set(before.values()) == {"0x0"}, before)
    since = len(log_text(PLUGIN_LOG))
    plugin.start()
    check("the restarted plugin registers", wait_for(lambda: plugin_connected(since), 90), log_text(PLUGIN_LOG)[since:][-1500:])
    caught = wait_for(lambda: all(cookie(f"down/{k}") == web for k in ("web", "b", "c")), 60)
    after = {k: cookie(f"down/{k}") for k in ("web", "b", "c")}
    check("catch-up: the containers started while the plugin was down have their group's cookie", caught, after)
    check("the plugin's restart left running containers' cookies alone", cookie("web1/web") == web and cookie("web3/web") == c["web3/web"])

    # 3. containerd restarted under the plugin: it reconnects, new pods are covered.
    since = len(log_text(PLUGIN_LOG))
    rc = containerd.stop()
    note(f"containerd stopped (status {rc})")
    start_containerd(containerd)
    check("containerd restarted: the plugin reconnects", wait_for(lambda: plugin_connected(since), 120), log_text(PLUGIN_LOG)[since:][-1500:])
    check("the plugin survived containerd's restart", plugin.alive())
    pod("after", "tenant-b", "burstable", {G: "web"})
    container("after", "web")
    check("after containerd's restart a new pod joins its group's cookie", cookie("after/web") == c["web3/web"], cookie("after/web"))

    # 4. Teardown as kubelet does: poststop (injected by the plugin) forgets every container.
    for pod_id, _ in pods.values():
        cri.call("StopPodSandbox", cri.pb.StopPodSandboxRequest(pod_sandbox_id=pod_id), cri.pb.StopPodSandboxResponse)
        cri.call("RemovePodSandbox", cri.pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id), cri.pb.RemovePodSandboxResponse)
    # The containers caught up at Synchronize had no injected poststop: it stays cached until
    # `gc` (the packaged timer) sees its init gone.
    down = {ctrs[f"down/{k}"] for k in ("web", "b", "c")}
    wait_for(lambda: set(cached()) <= down, 60)
    left = cached()
    check("every pod removed: the cache holds no container but the caught-up ones", set(left) <= down, left)
    gc = base.run([base.HOOK, "gc"])
    check("gc drops the caught-up containers once they are gone", gc.returncode == 0 and not cached(), f"{gc.stdout}{gc.stderr}{cached()}")
    errors = [l for l in log_text(PLUGIN_LOG).splitlines() if re.search(r"\b(panick|panic)", l)]
    check("the plugin never panicked", not errors, errors)
    rc = plugin.stop()
    check("SIGTERM: the plugin exits 0", rc == 0, f"exit status {rc}")


def main():
    gen = sys.argv[1]
    pb = base.compile_proto(gen)
    cri = base.Cri(pb)
    plugin = Proc("plugin", unit_exec_start(), PLUGIN_LOG)
    containerd = Proc("containerd", ["containerd"], CONTAINERD_LOG)
    note("plugin command (from the unit): " + " ".join(plugin.argv))
    without = []  # CreateContainer times with NRI on but no plugin connected
    try:
        scenarios(cri, plugin, containerd, without)
    except Exception as e:  # a crash is a failure with its cause, never a silent pass
        import traceback

        bad(f"containerd NRI scenarios aborted: {type(e).__name__}", traceback.format_exc())
    finally:
        plugin.stop()
        containerd.stop()
    def stats(v):
        v = sorted(v)
        return f"n={len(v)} median={v[len(v) // 2]:.2f} max={v[-1]:.2f}" if v else "n=0"

    creates = [secs for m, secs in cri.timings if m == "CreateContainer"]
    for secs in without:
        creates.remove(secs)
    note(f"CRI CreateContainer round trip (s), the NRI plugin connected: {stats(creates)}")
    note(f"CRI CreateContainer round trip (s), NRI on, no plugin connected: {stats(without)}")
    note(f"CRI RunPodSandbox (pod start, s): {stats([secs for m, secs in cri.timings if m == 'RunPodSandbox'])}")
    note(f"CRI StartContainer (the hook runs here, s): {stats([secs for m, secs in cri.timings if m == 'StartContainer'])}")
    print(f"nri: {base.PASS} passed, {base.FAIL} failed", flush=True)
    return 1 if base.FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
