#!/usr/bin/env python3
# Field tier, inside the Debian 13 guest under its systemd: containerd 1.7 with NRI enabled and
# nothing else for the hook (no base_runtime_spec, no pod_annotations, no hook-injector): the
# packaged NRI unit, `oci-coresched-hook-nri.service`, enabled as the README says, is the only
# wiring. containerd is Debian's containerd.service. Pods run through CRI as in cri.py (whose
# client and readers this reuses); every cookie is read with util-linux `coresched`, cross-checked
# with the hook's `inspect`. The plugin's and containerd's logs are their journals.
#
# The unit is enabled and started before containerd (the socket is absent: one clear line), killed
# with `systemctl kill -s KILL` and kept down while a pod starts (caught up when it is back, also a
# container running as uid 1000), killed again and restarted by systemd itself (no cookie moves),
# and containerd is restarted under it (it reconnects).
#
#   nri.py GEN_DIR          prints TAP lines and a summary line
"""containerd NRI-only scenarios of the field tier."""

import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cri as base  # noqa: E402  (the CRI client, coresched reader, TAP counters)

from cri import G, P, cached, check, coresched, note, wait_for  # noqa: E402

NRI_UNIT = "oci-coresched-hook-nri.service"
NRI_SOCKET = "/var/run/nri/nri.sock"


def systemctl(*args):
    return base.run(["systemctl", *args])


class Unit:
    """A systemd service, driven with systemctl; its log is its journal."""

    def __init__(self, name):
        self.name = name

    def prop(self, key):
        return systemctl("show", "-p", key, "--value", self.name).stdout.strip()

    def start(self):
        r = systemctl("start", self.name)
        if r.returncode != 0:
            raise RuntimeError(f"systemctl start {self.name}: {r.stderr.strip()} {self.log()[-1500:]}")

    def restart(self):
        r = systemctl("restart", self.name)
        if r.returncode != 0:
            raise RuntimeError(f"systemctl restart {self.name}: {r.stderr.strip()} {self.log()[-1500:]}")

    def stop(self):
        """systemctl stop; returns how the main process ended ("exited 0", "killed 9", ...)."""
        systemctl("stop", self.name)
        return self.ended()

    def kill(self, sig="KILL"):
        systemctl("kill", "-s", sig, self.name)

    def ended(self):
        code = {"1": "exited", "2": "killed", "3": "dumped"}.get(self.prop("ExecMainCode"), self.prop("ExecMainCode"))
        return f"{code} {self.prop('ExecMainStatus')}"

    def alive(self):
        return self.prop("ActiveState") == "active"

    def pid(self):
        return int(self.prop("MainPID") or 0)

    def log(self):
        """The unit's journal of this boot (its output and systemd's lines about it)."""
        return base.run(["journalctl", "-b", "--no-pager", "-o", "cat", "-u", self.name]).stdout

    def run_log(self):
        """The journal of the unit's current (or last) run only."""
        return base.run(["journalctl", "--no-pager", "-o", "cat", f"_SYSTEMD_INVOCATION_ID={self.prop('InvocationID')}"]).stdout


def start_containerd(c, restart=False):
    """Start (or restart) containerd.service (Type=notify: it serves once systemctl returns)."""
    c.restart() if restart else c.start()
    if base.run(["ctr", "version"]).returncode != 0:
        raise RuntimeError(f"containerd does not answer: {c.log()[-2000:]}")
    failed = [l for l in c.run_log().splitlines() if "failed to load plugin io.containerd.grpc.v1.cri" in l]
    if failed:
        raise RuntimeError(f"containerd's CRI plugin did not load: {failed[-1]}")


def registered(plugin, since):
    """The plugin's journal, after its first `since` characters, says it registered."""
    return "registered as NRI plugin" in plugin.log()[since:]


def scenarios(cri, plugin, containerd, without):
    pods, ctrs = {}, {}

    def pod(name, namespace, qos, annotations, handler=""):
        t0 = time.monotonic()
        sb = cri.sandbox_config(name, namespace, annotations, qos)
        pods[name] = (cri.run_pod(sb, handler), sb)
        note(f"pod {namespace}/{name} running ({time.monotonic() - t0:.1f} s, handler {handler or 'default'})")

    def container(pod_name, name, command=None, annotations=None, uid=None):
        pod_id, sb = pods[pod_name]
        t0 = time.monotonic()
        cid = cri.create(pod_id, sb, name, command or ["/bin/sleep", "3600"], annotations, uid)
        cri.start(cid)
        ctrs[f"{pod_name}/{name}"] = cid
        note(f"container {pod_name}/{name} started ({time.monotonic() - t0:.1f} s)")
        return cid

    def cookie(key):
        return coresched(cri.pid(ctrs[key]))

    # 0. The unit is enabled and started as the README says, before containerd: no socket yet.
    # One clear line naming the setting, then it keeps trying; it registers once containerd is up.
    r = systemctl("enable", "--now", NRI_UNIT)
    check(f"systemctl enable --now {NRI_UNIT}", r.returncode == 0, r.stderr)
    time.sleep(3)
    text = plugin.run_log()
    check("plugin started before the runtime: the unit keeps running", plugin.alive(), text[-1500:])
    lines = [l for l in text.splitlines() if "io.containerd.nri.v1.nri" in l]
    check(
        "no NRI socket: one clear line naming containerd's setting that enables NRI",
        len(lines) == 1 and "disable = false" in lines[0] and NRI_SOCKET in lines[0],
        text[-1500:],
    )
    start_containerd(containerd)
    check("the plugin registers once containerd is up", wait_for(lambda: registered(plugin, 0), 90), plugin.log()[-1500:])

    # 1. Pods through NRI only.
    pod("web1", "tenant-a", "burstable", {G: "web", "koordinator.sh/qosClass": "LS"})
    # "web" first: "first" exits at once, and a group's cookie lives as long as a member does.
    container("web1", "web")
    container("web1", "first", ["/usr/bin/coresched", "get"])
    container("web1", "none", annotations={P: "none"})
    # A container annotation claiming another namespace: NRI hands it to the plugin, whose
    # injected hook and catch-up both decide from the pod's metadata.
    container("web1", "forged", annotations={"io.kubernetes.pod.namespace": "tenant-b"})
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
    got, first = base.first_cookie(pods["web1"][1].log_directory)
    check(
        "NRI only: the container's first instruction already ran under its group's cookie",
        got == web,
        f"log of web1/first: {first!r}, web1/web has {web}",
    )
    check("two pods naming one group in one namespace share a cookie", c["web2/web"] == web, c)
    check(
        "a container annotation io.kubernetes.pod.namespace: tenant-b on a tenant-a container changes nothing",
        c["web1/forged"] == web and cache.get(ctrs["web1/forged"]) == "tenant-a/web",
        f"{c['web1/forged']} (web {web}), cached in {cache.get(ctrs['web1/forged'])}",
    )
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
    check("BestEffort: cpu.idle = 1 (written by the unit's plugin through the hook it injected)", idle == "1", idle)
    sb = coresched(cri.sandbox_pid(pods["web1"][0]))
    check("the pod sandbox (pause) container gets no hook through NRI: cookie 0", sb == "0x0", sb)

    # 2. The plugin killed (systemctl kill -s KILL) and kept down (systemctl stop, within the
    # unit's RestartSec): containers started meanwhile run without a cookie; once the unit is
    # started again, Synchronize catches them up, also one running as uid 1000 (prctl on another
    # user's process under the unit's sandbox); the running ones are untouched.
    plugin.kill("KILL")
    rc = plugin.stop()
    note(f"plugin killed and kept down (its main process: {rc})")
    pod("down", "tenant-a", "burstable", {G: "web"})
    mark = len(cri.timings)
    container("down", "web")
    container("down", "b")
    container("down", "c", uid=1000)
    without.extend(secs for m, secs in cri.timings[mark:] if m == "CreateContainer")
    down = ("web", "b", "c")
    before = {k: cookie(f"down/{k}") for k in down}
    check("plugin down: the containers start, without a cookie", set(before.values()) == {"0x0"}, before)
    since = len(plugin.log())
    plugin.start()
    check("the unit started again: the plugin registers", wait_for(lambda: registered(plugin, since), 90), plugin.log()[since:][-1500:])
    caught = wait_for(lambda: all(cookie(f"down/{k}") == web for k in down), 60)
    after = {k: cookie(f"down/{k}") for k in down}
    check("catch-up: the containers started while the plugin was down have their group's cookie", caught, after)
    uid = base.run(["stat", "-c", "%u", f"/proc/{cri.pid(ctrs['down/c'])}"]).stdout.strip()
    check(
        "catch-up under the unit's sandbox: the container running as uid 1000 got the cookie too",
        uid == "1000" and after["c"] == web,
        f"uid {uid}, cookie {after['c']}",
    )
    check("the plugin's restart left running containers' cookies alone", cookie("web1/web") == web and cookie("web3/web") == c["web3/web"])
    cache = cached()
    disagree = [l for l in plugin.log()[since:].splitlines() if "disagree" in l]
    check(
        "catch-up: the container carrying another namespace's annotation stays in its pod's group",
        cookie("web1/forged") == web and cache.get(ctrs["web1/forged"]) == "tenant-a/web" and not disagree,
        f"{cookie('web1/forged')} (web {web}), cached in {cache.get(ctrs['web1/forged'])}, {disagree}",
    )

    # 3. systemctl kill -s KILL, left to systemd: Restart=always brings the plugin back, it
    # registers again, and no cookie moves.
    pid0, n0 = plugin.pid(), int(plugin.prop("NRestarts") or 0)
    since = len(plugin.log())
    t0 = time.monotonic()
    plugin.kill("KILL")
    back = wait_for(lambda: int(plugin.prop("NRestarts") or 0) == n0 + 1 and plugin.alive() and plugin.pid() not in (0, pid0), 60)
    check(
        f"systemctl kill -s KILL {NRI_UNIT}: systemd restarted it (NRestarts {n0} -> {plugin.prop('NRestarts')}, "
        f"{time.monotonic() - t0:.0f} s)",
        back,
        plugin.ended(),
    )
    check("the plugin restarted by systemd registers again", wait_for(lambda: registered(plugin, since), 90), plugin.log()[since:][-1500:])
    keys = ["web1/web", "web1/forged", "web2/web", "web3/web", "crun1/web", "be/c1"] + [f"down/{k}" for k in down]
    want_after = {k: c.get(k, web) for k in keys}
    now = {k: cookie(k) for k in keys}
    check("through the kill and systemd's restart of the plugin every container keeps its cookie", now == want_after, f"{now} != {want_after}")

    # 4. containerd restarted under the plugin: containerd serves pods at once, so the plugin must
    # be back before the first one; it watches the socket and does not sleep out its backoff. A
    # pod created right after the restart (no wait for the plugin) gets the hook: its container's
    # first instruction already has its group's cookie.
    since = len(plugin.log())
    pid = plugin.pid()
    start_containerd(containerd, restart=True)
    cri.reconnect()
    t_up = time.monotonic()
    note("containerd restarted (systemctl restart containerd); a pod is created at once")
    pod("after", "tenant-b", "burstable", {G: "web"})
    container("after", "web")
    container("after", "first", ["/usr/bin/coresched", "get"])
    check("containerd restarted: the plugin reconnects", wait_for(lambda: registered(plugin, since), 120), plugin.log()[since:][-1500:])
    anew = "is there anew; reconnecting now" in plugin.log()[since:]
    note(f"the plugin registered again by {time.monotonic() - t_up:.1f} s after containerd answered (socket watch line: {anew})")
    check("the plugin survived containerd's restart (same process)", plugin.alive() and plugin.pid() == pid, f"{pid} -> {plugin.pid()}")
    check("after containerd's restart a new pod joins its group's cookie", cookie("after/web") == c["web3/web"], cookie("after/web"))
    got, first = base.first_cookie(pods["after"][1].log_directory)
    check(
        "a pod created right after containerd's restart: its first instruction already ran under its group's cookie",
        got == c["web3/web"],
        f"log of after/first: {first!r}, tenant-b/web has {c['web3/web']}",
    )

    # 5. Teardown as kubelet does: poststop (injected by the plugin) forgets every container.
    for pod_id, _ in pods.values():
        cri.call("StopPodSandbox", cri.pb.StopPodSandboxRequest(pod_sandbox_id=pod_id), cri.pb.StopPodSandboxResponse)
        cri.call("RemovePodSandbox", cri.pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id), cri.pb.RemovePodSandboxResponse)
    # The containers caught up at Synchronize had no injected poststop: they stay cached until
    # `gc` (the packaged timer) sees their init gone.
    caught_up = {ctrs[f"down/{k}"] for k in down}
    wait_for(lambda: set(cached()) <= caught_up, 60)
    left = cached()
    check("every pod removed: the cache holds no container but the caught-up ones", set(left) <= caught_up, left)
    gc = base.run([base.HOOK, "gc"])
    check("gc drops the caught-up containers once they are gone", gc.returncode == 0 and not cached(), f"{gc.stdout}{gc.stderr}{cached()}")
    errors = [l for l in plugin.log().splitlines() if re.search(r"\b(panick|panic)", l)]
    check("the plugin never panicked", not errors, errors)
    rc = plugin.stop()
    check(f"systemctl stop (SIGTERM): the plugin exits 0 ({rc})", rc == "exited 0", rc)


def doctor_with_plugin(plugin, containerd):
    """`doctor` on the node while the NRI unit serves containerd: containerd is wired through the
    plugin, which runs this build, and every route is covered."""
    import json
    import subprocess

    containerd.start()
    since = len(plugin.log())
    plugin.start()
    check("doctor's node: the NRI unit started again and registers", wait_for(lambda: registered(plugin, since), 90),
          plugin.log()[since:][-1500:])
    r = subprocess.run(["/usr/bin/oci-coresched-hook", "doctor", "--json"], capture_output=True, text=True, timeout=300)
    try:
        facts = {f["name"]: f for f in json.loads(r.stdout)["facts"]}
    except (ValueError, KeyError):
        check(f"doctor reports (exit {r.returncode})", False, (r.stdout[-500:], r.stderr[-500:]))
        return
    for f in facts.values():
        if f["level"] != "ok":
            note(f"doctor (NRI unit): {f['level']} {f['name']}: {f['summary']}")
    for name, want in (("containerd", "through the NRI plugin"), ("nri", "runs"), ("routes", "containerd (NRI plugin)")):
        fact = facts.get(name, {})
        check(f"doctor with the NRI unit running: {name} ok ({fact.get('summary')})",
              fact.get("level") == "ok" and want in fact.get("summary", ""), fact)


def main():
    gen = sys.argv[1]
    pb = base.compile_proto(gen)
    cri = base.Cri(pb)
    plugin, containerd = Unit(NRI_UNIT), Unit("containerd.service")
    note("plugin command (the unit's ExecStart): " + plugin.prop("ExecStart"))
    without = []  # CreateContainer times with NRI on but no plugin connected
    try:
        base.guarded("containerd NRI scenarios", cri, lambda: scenarios(cri, plugin, containerd, without))
        base.guarded("doctor with the NRI unit", cri, lambda: doctor_with_plugin(plugin, containerd))
    finally:
        # The node's state for the next parts: no NRI plugin, no containerd.
        systemctl("disable", "--now", NRI_UNIT)
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
