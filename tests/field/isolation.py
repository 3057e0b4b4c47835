#!/usr/bin/env python3
# Field tier, inside the Debian 13 guest under its systemd (tests/field/guest.sh): isolation itself
# through the routes users wire, not cookie values. Each side of a pair is the co-run recorder
# (examples/corun.rs, /usr/bin/corun in the image, /tmp/corun on the node), pinned to one of the
# two SMT siblings, waiting on a named pipe under /run/och-iso (mounted as /x in every container);
# both sides get one start time, spin for OCH_ISO_SECONDS (default 2) and write when they ran, and
# `corun overlap` says for how much of the shorter run time both ran at once.
#
# A container's side is its own process: a shell loop that runs the recorder each time a start
# arrives, so a container serves several pairs (its children inherit its cookie at fork). An
# exec'd side is a recorder started by `podman exec` (given its cookie by the follower) or by CRI
# `ExecSync` (spawned by the pod's shim, which holds the cookie); it must report its container's
# cookie. Routes, each with three pairs (two tenants, one group, an exec'd process against another
# tenant):
#   podman through the packaged hooks.d file (crun), then again right after a follower restart;
#   rootless podman through the same file, run by an unprivileged user (the user's own cache; its
#   exec'd recorder covered by `reconcile` run by the user, as docs/wiring.md says);
#   containerd with kubelet's systemd cgroup driver through base_runtime_spec (the runc-spec
#   handler, the NRI plugin stopped), through the NRI plugin, then again right after a containerd
#   restart (with pods created after it);
#   the DaemonSet: tests/field/daemonset.py runs three_pairs() on its tenant pods (setup() there).
# Judged as tests/vm/isolation.sh judges (which runs the full set of pairs on runc and crun):
# every pair right after a control pair of two uncookied processes on the node; a verdict needs the
# control to have co-run (>= OCH_ISO_CONTROL_MIN, default 20%), else it is measured again (up to 3
# times) and then fails saying so; "together" is >= half the control's share, "apart" <= 1%.
# Prints TAP lines, one "# pair" line per measurement, and writes them to
# /run/xchg/isolation/table.txt (route|label|want|share|control|try).
#
#   isolation.py GEN_DIR CORUN
"""Co-run pairs of the field tier, through podman's hooks.d and containerd's two wirings."""

import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cri as base  # noqa: E402  (the CRI client, coresched reader, TAP counters)
import systemd_cgroup as sd  # noqa: E402  (kubelet's systemd driver over cri.py's client)

from cri import G, bad, check, coresched, note, run, wait_for  # noqa: E402

X = "/run/och-iso"  # node-local: named pipes cannot live on the exchange share (9p)
OUT = "/run/xchg/isolation"
IMG_CORUN = "/usr/bin/corun"
SECONDS = float(os.environ.get("OCH_ISO_SECONDS", "2"))
CONTROL_MIN = float(os.environ.get("OCH_ISO_CONTROL_MIN", "0.20"))
TRIES = 3
NS = "io.kubernetes.pod.namespace"
PODMAN = ["podman", "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--storage-driver", "vfs", "--runtime", "crun"]
ROOTFS = "/tmp/iso-rootfs"
FOLLOW_UNIT = sd.FOLLOW_UNIT
NRI_UNIT = sd.NRI_UNIT
SHARE = re.compile(r"share=([0-9.]+) a_cookie=(\S+) b_cookie=(\S+)")
CORUN = "/tmp/corun"  # the recorder on the node (setup)
CTL_A = CTL_B = None  # the control pair: two host processes on the two siblings (setup)


def once(name, cpu):
    """The shell command of one recorder run: waits on /x/NAME.go, its record lands as /x/NAME.txt
    once complete (written aside, then renamed)."""
    return (
        f"{IMG_CORUN} run --cpu {cpu} --seconds {SECONDS} --go /x/{name}.go --out /x/{name}.tmp"
        f" && mv /x/{name}.tmp /x/{name}.txt"
    )


def loop(name, cpu):
    """A container's command: a recorder run each time a start arrives."""
    return ["/bin/sh", "-c", f"while :; do {once(name, cpu)} || sleep 1; done"]


def corun_pids(name):
    """Pids of recorders waiting on or running for NAME (comm corun, its pipe in the arguments)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/comm") as f:
                if f.read().strip() != "corun":
                    continue
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if f"/{name}.go".encode() in f.read():
                    pids.append(int(d))
        except OSError:
            continue
    return pids


class Side:
    """One side of a pair: NAME's pipe and record, on CPU. start(): make a recorder wait (a
    container's loop already does)."""

    def __init__(self, name, cpu, desc):
        self.name, self.cpu, self.desc = name, cpu, desc
        path = f"{X}/{name}.go"
        if not os.path.exists(path):
            os.mkfifo(path)

    def start(self):
        pass


class Host(Side):
    """A plain process of the node (cookie 0), started for each measurement."""

    def start(self):
        cmd = once(self.name, self.cpu).replace("/x/", f"{X}/").replace(IMG_CORUN, CORUN)
        subprocess.Popen(["/bin/sh", "-c", cmd], stdin=subprocess.DEVNULL)


class Exec(Side):
    """A recorder exec'd into a running container by SPAWN(argv) for each measurement; THEN, if
    given, runs once the recorder is there (before its start)."""

    def __init__(self, name, cpu, desc, spawn, then=None):
        super().__init__(name, cpu, desc)
        self.spawn, self.then = spawn, then

    def start(self):
        self.spawn(["/bin/sh", "-c", once(self.name, self.cpu)])
        if not wait_for(lambda: corun_pids(self.name), 60, 0.2):
            raise RuntimeError(f"{self.desc}: no exec'd recorder appeared in 60 s")
        if self.then:
            self.then()


def send_start(name, t, timeout=60):
    """Writes the start time into NAME's pipe once a recorder has it open for reading."""
    end = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(f"{X}/{name}.go", os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as e:  # ENXIO: no reader yet
            if time.monotonic() > end:
                raise RuntimeError(f"no recorder read {X}/{name}.go in {timeout} s: {e}") from e
            time.sleep(0.05)
    try:
        os.write(fd, f"{t}\n".encode())
    finally:
        os.close(fd)


def measure(a, b):
    """Both sides run from one start time; (share, A's cookie, B's cookie)."""
    for s in (a, b):
        for ext in ("txt", "tmp"):
            if os.path.exists(f"{X}/{s.name}.{ext}"):
                os.unlink(f"{X}/{s.name}.{ext}")
    for s in (a, b):
        s.start()
    t = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 600_000_000
    for s in (a, b):
        send_start(s.name, t)
    # No polling while they run: a poll on a sibling takes it away from a recorder.
    time.sleep(SECONDS + 0.8)
    if not wait_for(lambda: all(os.path.exists(f"{X}/{s.name}.txt") for s in (a, b)), 60, 0.5):
        raise RuntimeError(f"no record from {a.desc} or {b.desc} within 60 s of the end")
    r = run([CORUN, "overlap", f"{X}/{a.name}.txt", f"{X}/{b.name}.txt"])
    m = SHARE.search(r.stdout)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"corun overlap: exit {r.returncode}: {r.stdout}{r.stderr}")
    return float(m.group(1)), m.group(2), m.group(3)


def pct(x):
    return f"{x * 100:.2f}%"


def pair(route, label, want, a, b):
    """A control pair, then A (CPU 0) and B (CPU 1), judged by WANT ("together" or "apart").
    Returns the cookies the two sides reported."""
    s = c = 0.0
    ca = cb = None
    judged = False
    for attempt in range(1, TRIES + 1):
        c, _, _ = measure(CTL_A, CTL_B)
        s, ca, cb = measure(a, b)
        print(f"# pair {route} | {label} | both ran {pct(s)} | control {pct(c)} | try {attempt} | cookies {ca} {cb}", flush=True)
        with open(f"{OUT}/table.txt", "a") as f:
            f.write(f"{route}|{label}|{want}|{s}|{c}|{attempt}\n")
        if c >= CONTROL_MIN:
            judged = True
            break
        note(f"{route}: {label}: the control co-ran {pct(c)} only (under {pct(CONTROL_MIN)}): the host held a vCPU off; measuring again")
    if not judged:
        bad(f"{route}: {label}: no verdict: the control pair never co-ran (last {pct(c)}); the host was too busy")
    elif want == "together":
        check(f"{route}: {label}: both ran {pct(s)} of the time, >= 50% of the control's {pct(c)}", s >= c / 2)
    else:
        check(f"{route}: {label}: both ran {pct(s)} of the time (<= 1%; control {pct(c)})", s <= 0.01)
    return ca, cb


def exec_pair(route, exec_a, b, want):
    """EXEC_A, a recorder exec'd into a tenant-a/web container (CPU 0), against B of tenant-b/web
    (CPU 1); the exec'd recorder must also report WANT, its container's cookie."""
    got, _ = pair(route, "an exec'd process against another tenant (tenant-a/web exec'd, tenant-b/web)", "apart", exec_a, b)
    check(f"{route}: the exec'd recorder ran under its container's cookie {want} (it reported {got})",
          got is not None and int(got, 16) == int(want, 16) and int(want, 16) != 0)


def three_pairs(route, a1, a2, b1, exec_a, want):
    """The three pairs of a route: A1 (CPU 0) and A2 (CPU 1) of one group, B1 (CPU 1) of another
    tenant's group of the same name, EXEC_A a recorder exec'd into A's container on CPU 0 (which
    must report WANT, the cookie of that container)."""
    pair(route, "two tenants naming the same group (tenant-a/web, tenant-b/web)", "apart", a1, b1)
    pair(route, "one group's containers (tenant-a/web, tenant-a/web)", "together", a1, a2)
    exec_pair(route, exec_a, b1, want)


# --- podman -----------------------------------------------------------------------------------------
# A podman runner: podman(args, cgroup) runs `podman ARGS` (with PODMAN's options) and returns the
# completed process; CGROUP names the cgroup to start it from where the runner chooses one.


def start_podman(podman, rootfs, prefix, what):
    """Three containers of the route, each a recorder's loop: PREFIX-a1 (tenant-a/web, CPU 0),
    PREFIX-a2 (tenant-a/web, CPU 1), PREFIX-b1 (tenant-b/web, CPU 1), named iso-<key>; sides by
    key. Each is started from a cgroup of its own (c-<key>)."""
    sides = {}
    for key, ns, cpu in ((f"{prefix}a1", "tenant-a", 0), (f"{prefix}a2", "tenant-a", 1), (f"{prefix}b1", "tenant-b", 1)):
        t0 = time.monotonic()
        r = podman(["run", "-d", "--name", f"iso-{key}", "--network", "none", "-v", f"{X}:/x", "--annotation", f"{G}=web",
                    "--annotation", f"{NS}={ns}", "--rootfs", rootfs, *loop(key, cpu)], f"c-{key}")
        if r.returncode != 0:
            raise RuntimeError(f"{what} run iso-{key}: {r.stderr.strip()[-600:]}")
        sides[key] = Side(key, cpu, f"{what} iso-{key} ({ns}/web)")
        note(f"{what} container iso-{key} ({ns}/web, CPU {cpu}) up in {time.monotonic() - t0:.1f} s")
    return sides


def podman_pid(podman, key):
    """The pid of container iso-KEY's process."""
    return int(podman(["inspect", "-f", "{{.State.Pid}}", f"iso-{key}"], "ctl").stdout.strip())


def podman_exec_side(podman, key, what, then=None):
    """A recorder exec'd by `podman exec -d` into iso-KEY on CPU 0; THEN as Exec says."""

    def spawn(argv):
        r = podman(["exec", "-d", f"iso-{key}", *argv], "ctl")
        if r.returncode != 0:
            raise RuntimeError(f"{what} exec -d iso-{key}: {r.stderr.strip()[-400:]}")

    return Exec(f"pe{key}{int(time.monotonic())}", 0, f"a recorder exec'd into iso-{key}", spawn, then)


def podman_route():
    if run(["sh", "-c", f"rm -rf {ROOTFS} && mkdir -p {ROOTFS} && tar -xf /run/xchg/in/rootfs.tar -C {ROOTFS}"]).returncode != 0:
        bad("podman: cannot unpack the rootfs")
        return

    def podman(args, _cgroup):
        return run([*PODMAN, *args])

    try:
        sides = start_podman(podman, ROOTFS, "p", "podman")
        want = coresched(podman_pid(podman, "pa1"))
        for route in ("podman (hooks.d, crun)", "podman (hooks.d, crun), after a follower restart"):
            if "restart" in route:
                r = run(["systemctl", "restart", FOLLOW_UNIT])
                check(f"systemctl restart {FOLLOW_UNIT}", r.returncode == 0, r.stderr)
            ex = podman_exec_side(podman, "pa1", "podman")
            three_pairs(route, sides["pa1"], sides["pa2"], sides["pb1"], ex, want)
    finally:
        podman(["rm", "-f", "-t", "0", *(f"iso-{k}" for k in ("pa1", "pa2", "pb1"))], "ctl")


# --- rootless podman -----------------------------------------------------------------------------


RL_USER = "och-rootless"
RL_CG = "/sys/fs/cgroup/och-rootless"  # delegated to the user, as a systemd user session's would be


def rootless_route():
    """Rootless podman (crun) through the same hooks.d file, run by an unprivileged user: the hook
    runs inside podman's user namespace and keeps the user's own cache in /run/user/<uid>. The user
    has no subordinate ids (podman maps the one uid) and no systemd user session: its podman
    commands start from cgroups under one the user owns, as in a delegated user session, where
    crun makes each container's cgroup. The system follower does not read a user's cache
    (docs/wiring.md): the exec'd recorder gets its cookie from `reconcile` run by the user, as
    documented."""
    route = "rootless podman (hooks.d, crun)"
    r = run(["sh", "-c", f"getent passwd {RL_USER} >/dev/null || useradd --system --create-home --home-dir /home/{RL_USER} --shell /bin/sh {RL_USER}"])
    if r.returncode != 0:
        raise RuntimeError(f"useradd {RL_USER}: {r.stderr.strip()}")
    uid = int(run(["id", "-u", RL_USER]).stdout)
    rt = f"/run/user/{uid}"
    home = f"/home/{RL_USER}"
    rootfs = f"{home}/rootfs"
    setup = (
        f"mkdir -p {rt} && chown {RL_USER}: {rt} && chmod 700 {rt} && chmod 1777 {X}"
        f" && mkdir -p {RL_CG} && chown -R {RL_USER}: {RL_CG}"
        f" && runuser -u {RL_USER} -- sh -c 'rm -rf {rootfs} && mkdir -p {rootfs} && tar -xf /run/xchg/in/rootfs.tar -C {rootfs}'"
    )
    r = run(["sh", "-c", setup])
    if r.returncode != 0:
        raise RuntimeError(f"rootless setup: {r.stderr.strip()[-400:]}")
    env = ["env", "-i", f"HOME={home}", f"XDG_RUNTIME_DIR={rt}", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"]

    def as_user(cgroup, argv):
        """ARGV run by the user from its cgroup CGROUP (made and given to the user if new)."""
        cg = f"{RL_CG}/{cgroup}"
        cmd = f'mkdir -p {cg} && chown -R {RL_USER}: {cg} && echo $$ > {cg}/cgroup.procs && exec "$@"'
        return run(["sh", "-c", cmd, "sh", "runuser", "-u", RL_USER, "--", *env, *argv])

    def podman(args, cgroup):
        return as_user(cgroup, [*PODMAN, *args])

    # podman's pause process (which holds its user namespace) starts with the user's first podman
    # command: from a cgroup of its own, never a container's.
    r = podman(["info", "--format", "{{.Host.CgroupManager}} {{.Host.CgroupsVersion}} rootless={{.Host.Security.Rootless}}"], "ctl")
    note(f"rootless podman: {r.stdout.strip()} {r.stderr.strip()[-300:]}")
    try:
        sides = start_podman(podman, rootfs, "r", "rootless podman")
        for key in sides:
            pid = podman_pid(podman, key)
            with open(f"/proc/{pid}/cgroup") as f:
                cgl = f.read().strip()
            with open(f"/proc/{pid}/uid_map") as f:
                umap = " ".join(f.read().split())
            note(f"rootless container iso-{key}: init {pid}, {cgl}, uid_map {umap}")
        lst = as_user("ctl", ["oci-coresched-hook", "list"])
        note(f"`list` run by {RL_USER}: " + " / ".join(lst.stdout.strip().splitlines()) + lst.stderr.strip()[-300:])
        check(f"{route}: the hook kept the user's cache in {rt}/oci-coresched-hook",
              os.path.exists(f"{rt}/oci-coresched-hook"), run(["ls", "-la", rt]).stdout)
        want = coresched(podman_pid(podman, "ra1"))

        def user_reconcile():
            r = as_user("ctl", ["oci-coresched-hook", "reconcile"])
            note(f"`reconcile` run by {RL_USER}: exit {r.returncode}: {(r.stdout + r.stderr).strip()[-300:]}")

        ex = podman_exec_side(podman, "ra1", "rootless podman", user_reconcile)
        three_pairs(route, sides["ra1"], sides["ra2"], sides["rb1"], ex, want)
    finally:
        podman(["rm", "-f", "-t", "0", *(f"iso-{k}" for k in ("ra1", "ra2", "rb1"))], "ctl")
        run(["sh", "-c", f"pkill -u {RL_USER}; sleep 1; pkill -9 -u {RL_USER}; true"])


# --- containerd ----------------------------------------------------------------------------------


def exec_sync_side(cri, cid, key, cpu):
    """A recorder exec'd by CRI ExecSync into container CID of pod KEY (a thread waits for it)."""
    pb = cri.pb

    def call(argv):
        cri.call("ExecSync", pb.ExecSyncRequest(container_id=cid, cmd=argv, timeout=60), pb.ExecSyncResponse, timeout=120)

    def spawn(argv):
        threading.Thread(target=call, args=(argv,), daemon=True).start()

    return Exec(f"ce{key}{int(time.monotonic())}", cpu, f"a recorder exec'd (ExecSync) into {key}", spawn)


def pod_mounts(pb):
    """The CRI mount of the pipes' directory, /x in the container (a hostPath volume)."""
    return [pb.Mount(container_path="/x", host_path=X)]


class Pods:
    """Pods of one container each, through kubelet's systemd driver; removed by close()."""

    def __init__(self, cri):
        self.cri, self.pods, self.cids = cri, [], {}

    def add(self, key, ns, handler, cpu):
        cri, pb = self.cri, self.cri.pb
        t0 = time.monotonic()
        sb = cri.sandbox_config(f"iso-{key}", ns, {G: "web"}, "burstable")
        pod_id = cri.run_pod(sb, handler)
        self.pods.append(pod_id)
        cid = cri.create(pod_id, sb, "corun", loop(key, cpu), mounts=pod_mounts(pb), resources=sd.RESOURCES["burstable"])
        cri.start(cid)
        self.cids[key] = cid
        note(f"pod {ns}/iso-{key} (handler {handler}, CPU {cpu}) up in {time.monotonic() - t0:.1f} s")
        return Side(key, cpu, f"pod {ns}/iso-{key}")

    def exec_side(self, key, cpu):
        return exec_sync_side(self.cri, self.cids[key], key, cpu)

    def cookie(self, key):
        return coresched(self.cri.pid(self.cids[key]))

    def close(self):
        for pod_id in self.pods:
            try:
                self.cri.remove_pod(pod_id)
            except Exception as e:  # noqa: BLE001 - teardown: said, not fatal
                note(f"teardown: removing pod {pod_id[:12]}: {e}")
        self.pods.clear()


def containerd_route(cri, route, handler, suffix):
    pods = Pods(cri)
    try:
        a1 = pods.add(f"a1{suffix}", "tenant-a", handler, 0)
        a2 = pods.add(f"a2{suffix}", "tenant-a", handler, 1)
        b1 = pods.add(f"b1{suffix}", "tenant-b", handler, 1)
        three_pairs(route, a1, a2, b1, pods.exec_side(f"a1{suffix}", 0), pods.cookie(f"a1{suffix}"))
        return pods
    except Exception:
        pods.close()
        raise


def restart_route(cri, old):
    """containerd restarted while the NRI pods run (its unit's KillMode=process leaves the shims):
    pods created after it, paired with the ones from before."""
    route = "containerd (NRI plugin), after a containerd restart"
    r = run(["systemctl", "restart", sd.CONTAINERD])
    check(f"{route}: systemctl restart containerd", r.returncode == 0, r.stderr)
    # The old channel's next call fails (its connection broke): a new client, once CRI answers.
    cri = sd.SystemdCri(cri.pb)
    old.cri = cri

    def serves():
        try:
            cri.call("Version", cri.pb.VersionRequest(), cri.pb.VersionResponse, timeout=10)
            return True
        except Exception:  # noqa: BLE001 - not serving yet
            return False

    check(f"{route}: CRI answers after the restart", wait_for(serves, 60))
    pods = Pods(cri)
    try:
        a3 = pods.add("a3n", "tenant-a", "runc", 0)
        b3 = pods.add("b3n", "tenant-b", "runc", 0)
        a2 = Side("a2n", 1, "pod tenant-a/iso-a2n")
        b1 = Side("b1n", 1, "pod tenant-b/iso-b1n")
        pair(route, "two tenants naming the same group (a new tenant-b/web pod, an old tenant-a/web)", "apart", b3, a2)
        pair(route, "one group's containers (a new tenant-a/web pod, an old one)", "together", a3, a2)
        exec_pair(route, old.exec_side("a1n", 0), b1, old.cookie("a1n"))
    finally:
        pods.close()


def setup(corun, fresh):
    """The pipes' directory, the recorder on the node and the control pair; FRESH: a new table."""
    global CORUN, CTL_A, CTL_B
    CORUN = corun
    os.makedirs(X, exist_ok=True)
    os.makedirs(OUT, exist_ok=True)
    if fresh:
        open(f"{OUT}/table.txt", "w").close()
    with open("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list") as f:
        note(f"co-run pairs: siblings {f.read().strip()}, {SECONDS} s per measurement")
    CTL_A, CTL_B = Host("ctl-a", 0, "control A"), Host("ctl-b", 1, "control B")


def main():
    gen = sys.argv[1]
    setup(sys.argv[2], True)
    was = {u: sd.show(u, "ActiveState")["ActiveState"] for u in (NRI_UNIT, FOLLOW_UNIT)}
    note("before this part: " + ", ".join(f"{u} {s}" for u, s in was.items()))
    cri = sd.SystemdCri(sd.load_pb(gen))
    pods = None
    try:
        run(["systemctl", "start", FOLLOW_UNIT])
        try:
            podman_route()
        except Exception as e:
            bad(f"podman route aborted: {e}")
        try:
            rootless_route()
        except Exception as e:
            bad(f"rootless podman route aborted: {e}")
        run(["systemctl", "stop", NRI_UNIT])
        try:
            containerd_route(cri, "containerd (base_runtime_spec, systemd cgroup driver)", "runc-spec", "s").close()
        except Exception as e:
            bad(f"base_runtime_spec route aborted: {e}")
        r = run(["systemctl", "start", NRI_UNIT])
        registered = wait_for(lambda: "registered as NRI plugin" in sd.unit_log(NRI_UNIT), 120)
        check(f"systemctl start {NRI_UNIT}: the plugin registers with containerd", r.returncode == 0 and registered)
        try:
            pods = containerd_route(cri, "containerd (NRI plugin, systemd cgroup driver)", "runc", "n")
            restart_route(cri, pods)
        except Exception as e:
            bad(f"NRI route aborted: {e}")
    finally:
        if pods:
            pods.close()
        run(["sh", "-c", "pkill -x corun"])
        for unit, state in was.items():  # as this part found them
            run(["systemctl", "start" if state == "active" else "stop", unit])
    print(f"isolation: {base.PASS} passed, {base.FAIL} failed", flush=True)
    return 1 if base.FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
