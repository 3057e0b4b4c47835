#!/usr/bin/env python3
# Field tier, inside the Debian 13 guest under its systemd: a node moves between versions of the
# package while its containers run. The previous release's .deb (tests/field/previous-release.txt,
# built from this repository's history) is installed as an admin installs it, with its follower
# unit and its NRI unit running and containerd on NRI with kubelet's systemd cgroup driver. Pods of
# three groups run (tenant-a/web, tenant-a/db, tenant-b/web), podman containers (crun, through the
# package's hooks.d file) of tenant-a/web and of a podman-only group tenant-c/batch, and a process
# exec'd into a pod and one into a podman container stay. Then, each apt step while containers keep
# being created in those pods through CRI, and a podman container of each podman group after it:
#
#   A. skew: the new binary put in place by hand, the previous release's follower and NRI plugin
#      still running (a hook of the new version beside services of the old one)
#   1. `apt install ./new.deb`                         (the upgrade)
#   B. skew: the previous release's binary put in place by hand, the new version's services still
#      running (a hook of the old version beside services of the new one)
#   2. `apt install --allow-downgrades ./old.deb`      (the rollback)
#   3. `apt install ./new.deb`                         (the upgrade again)
#
# In a skew, a container is created in each pod and a podman container in tenant-c/batch, and
# processes are exec'd into a pod (CRI) and a podman container: each holds its group's cookie,
# `list` (the binary in place) shows no split group, the services still run with the same main
# pid and no restart (no crash loop), and the journal's lines of either side are printed (an error,
# or a warning asking the admin to act, fails).
#
# After each apt step (cookies read with util-linux `coresched`):
#   - every container that ran before keeps its cookie, and so does the exec'd process;
#   - every container created during and after the step has its group's cookie: no group splits;
#   - `list` shows every group with every container, and no group with two cookies;
#   - every running service of the package runs the installed binary (/proc/PID/exe is the
#     installed file, not a deleted one) and `--version` names the installed version;
#   - a probe exec'd into a container that ran before gets its group's cookie (printed: whether
#     it had it at its first instruction, i.e. from the pod's shim, or from the follower);
#   - no line of the package's at error level, and no warning that asks the admin to act.
#
#   upgrade.py GEN_DIR OLD_DEB OLD_VERSION NEW_DEB NEW_VERSION ROOTFS_TAR
#                   ROOTFS_TAR: the podman containers' root; prints TAP lines and a summary
"""Upgrade, rollback and upgrade again on a node with running containers: field tier."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cri as base  # noqa: E402  (the CRI client, coresched reader, TAP counters)
import systemd_cgroup as sd  # noqa: E402  (kubelet's systemd-driver CRI client)

from cri import G, bad, check, note, run, wait_for  # noqa: E402

HOOK = "/usr/bin/oci-coresched-hook"
PROBE = "/usr/bin/exec-window"
NRI_UNIT = "oci-coresched-hook-nri.service"
FOLLOW_UNIT = "oci-coresched-hook-reconcile.service"
SERVICES = (FOLLOW_UNIT, NRI_UNIT)
# pod key -> (namespace, group): two tenants naming the same group, and a second group of one.
PODS = {"a-web": ("tenant-a", "web"), "a-db": ("tenant-a", "db"), "b-web": ("tenant-b", "web")}
# podman container prefix -> (namespace, group): one group shared with a CRI pod, one of podman's own.
PODMAN = {"pm-a": ("tenant-a", "web"), "pm-c": ("tenant-c", "batch")}
PO = ["podman", "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--storage-driver", "vfs", "--runtime", "crun"]
ROOTFS = "/tmp/upgrade-rootfs"
# Containers created per step while apt runs, at most; then one more in each pod once it returned.
MAX_DURING = 6
# How long a container created during a step may take to hold its group's cookie: one started
# while the NRI plugin restarted gets no hook, and the plugin's catch-up gives it the cookie when
# it registers again.
SETTLE = 90
# Warnings that ask the admin to act (or say that something was thrown away, or that a container
# went without its cookie: a config the binary in place cannot read).
ACT = re.compile(r"moved|aside|newer|unusable|rebuild|split|failed to refill|restart every|invalid", re.I)


def cookie_of(pid):
    """coresched's reading alone (no `inspect`: the installed binary may be mid-replacement)."""
    r = run(["coresched", "get", "-s", str(pid)])
    m = base.COOKIE_LINE.match(r.stdout.strip())
    return m.group(2) if r.returncode == 0 and m else None


def apt(*args):
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    return subprocess.run(["apt-get", "install", "-y", "-q", *args], capture_output=True, text=True, env=env, timeout=900)


def make_dirs(deb):
    """The package's directories, made before dpkg unpacks it: the guest's root is an overlay on
    which dpkg's rename of a directory it unpacked fails (EXDEV), as guest.sh says."""
    listing = run(["dpkg-deb", "-c", deb]).stdout
    for line in listing.splitlines():
        f = line.split()
        if f and f[0].startswith("d"):
            os.makedirs("/" + f[5].lstrip("./"), exist_ok=True)


def group_of(key):
    """"namespace/group" of a container key: "pod/name" (CRI) or "pm-x/name" (podman)."""
    prefix = key.split("/")[0]
    return "/".join(PODS.get(prefix) or PODMAN[prefix])


class Node:
    def __init__(self, cri):
        self.cri = cri
        self.pods = {}  # pod key -> (pod id, sandbox config)
        self.ctrs = {}  # "pod/name" or "pm-x/name" -> container id
        self.podman = set()  # the keys of podman containers
        self.lock = threading.Lock()

    def pod(self, key):
        namespace, group = PODS[key]
        t0 = time.monotonic()
        sb = self.cri.sandbox_config(f"up-{key}", namespace, {G: group}, "burstable")
        self.pods[key] = (self.cri.run_pod(sb, "runc"), sb)
        note(f"pod {namespace}/up-{key} (group {group}) running ({time.monotonic() - t0:.1f} s)")

    def container(self, pod_key, name):
        pod_id, sb = self.pods[pod_key]
        cid = self.cri.create(pod_id, sb, name, ["/bin/sleep", "3600"], resources=sd.RESOURCES["burstable"])
        self.cri.start(cid)
        with self.lock:
            self.ctrs[f"{pod_key}/{name}"] = cid
        return cid

    def podman_run(self, prefix, name):
        """`podman run -d` (crun, the package's hooks.d file) of a container of PODMAN[prefix];
        its key, or None after a failed check."""
        namespace, group = PODMAN[prefix]
        key = f"{prefix}/{name}"
        t0 = time.monotonic()
        r = run(PO + ["run", "-d", "--name", f"up-{prefix}-{name}", "--network", "none", "--annotation", f"{G}={group}",
                      "--annotation", f"io.kubernetes.pod.namespace={namespace}", "--rootfs", ROOTFS, "/bin/sleep", "3600"],
                timeout=300)
        if not check(f"podman run -d up-{prefix}-{name} ({namespace}/{group}, crun, hooks.d) "
                     f"in {time.monotonic() - t0:.0f} s", r.returncode == 0, r.stdout + r.stderr):
            return None
        with self.lock:
            self.ctrs[key] = r.stdout.strip().splitlines()[-1]
            self.podman.add(key)
        return key

    def pid(self, key):
        if key in self.podman:
            return int(run(PO + ["inspect", "-f", "{{.State.Pid}}", self.ctrs[key]]).stdout.strip() or 0)
        return self.cri.pid(self.ctrs[key])

    def split(self, group_cookie):
        """The containers that do not hold their group's cookie: key -> what they hold."""
        wrong = {}
        for key in list(self.ctrs):
            c = cookie_of(self.pid(key))
            if c != group_cookie[group_of(key)]:
                wrong[key] = f"{c} (group's {group_cookie[group_of(key)]})"
        return wrong

    def listed(self, what, unrecorded=()):
        """`list --json` of the binary in place shows every container in its group and no group
        with more than one cookie. A container of `unrecorded` that is missing is printed, not
        failed (the previous release's plugin leaves such a container out of the cache; the next
        step checks that this release records it)."""
        r = run([HOOK, "list", "--json"])
        listed, multi = {}, []
        if r.returncode == 0:
            for g in json.loads(r.stdout):
                for m in g["members"]:
                    listed[m["id"]] = g["group"]
                if g.get("live_cookies", 0) > 1:
                    multi.append(g["group"])
        missing = {f"{k} ({cid[:12]})": group_of(k) for k, cid in self.ctrs.items()
                   if listed.get(cid) != group_of(k) and not (k in unrecorded and cid not in listed)}
        for k in sorted(unrecorded):
            if k in self.ctrs and self.ctrs[k] not in listed:
                note(f"{what}: {k} ({self.ctrs[k][:12]}), created while the previous release's NRI plugin restarted, "
                     "holds its group's cookie (its pod's shim had it) but that release's plugin left it out of the cache")
        check(f"{what}: list shows every container (CRI and podman) in its group", r.returncode == 0 and not missing,
              f"{r.stderr[-500:]} missing or elsewhere: {missing}")
        check(f"{what}: list shows no group with more than one cookie", r.returncode == 0 and not multi, multi)

    def exec_windows(self, key, known=()):
        """The exec'd probes (`exec-window`) in the cgroup of container `key`, but `known`."""
        cg = sd.proc_cgroup(self.pid(key))
        return [int(p) for p in sd.read(f"{sd.CGROOT}{cg}/cgroup.procs").split()
                if sd.read(f"/proc/{p}/comm") == "exec-window" and int(p) not in known]

    def exec_podman(self, key, known=()):
        """A process exec'd into a podman container that stays (`podman exec -d`): its pid."""
        r = run(PO + ["exec", "-d", self.ctrs[key], PROBE, "--sleep", "3600"], timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"podman exec -d {key}: {r.stdout}{r.stderr}")
        if not wait_for(lambda: self.exec_windows(key, known), 30):
            raise RuntimeError(f"the process exec'd into {key} never appeared in its cgroup")
        return self.exec_windows(key, known)[0]

    def remove_podman(self):
        for key in sorted(self.podman):
            r = run(PO + ["rm", "-f", "-t", "0", self.ctrs[key]], timeout=300)
            if r.returncode != 0:
                note(f"teardown: podman rm {key}: {r.stderr.strip()[-300:]}")


def runs_installed(pid):
    """(the executable `pid` names, whether it is the very file installed at HOOK now)."""
    st, inst = os.stat(f"/proc/{pid}/exe"), os.stat(HOOK)
    return os.readlink(f"/proc/{pid}/exe"), (st.st_dev, st.st_ino) == (inst.st_dev, inst.st_ino)


def services_run(version):
    """Each running service's main process runs the installed binary, which is `version`."""
    problems = []
    for unit in SERVICES:
        pid = int(sd.show(unit, "MainPID").get("MainPID", "0") or 0)
        if pid <= 0:
            problems.append(f"{unit} does not run")
            continue
        exe, same = runs_installed(pid)
        if exe != HOOK or not same:
            problems.append(f"{unit} (pid {pid}) runs {exe!r}, not the installed {HOOK}")
    out = run([HOOK, "--version"]).stdout.strip()
    if version not in out.split():
        problems.append(f"{HOOK} --version says {out!r}, not {version}")
    return problems


def journal_since(since):
    """The package's lines at warning level or worse since the unix time `since`: (priority, text).
    The hook, the commands and the services all log as `oci-coresched-hook`."""
    r = run(["journalctl", "--no-pager", "-o", "json", "--output-fields=PRIORITY,MESSAGE", "-p", "warning",
             "--since", f"@{since}", "-t", "oci-coresched-hook"])
    out = []
    for line in r.stdout.splitlines():
        e = json.loads(line)
        msg = e.get("MESSAGE", "")
        if isinstance(msg, list):  # not UTF-8: journald gives the bytes
            msg = bytes(msg).decode(errors="replace")
        out.append((int(e.get("PRIORITY", 6)), msg))
    return out


class State:
    """What the steps check against: each group's cookie, the exec'd processes, the cookies of the
    containers that ran before the first step."""

    def __init__(self):
        self.group_cookie = {}  # "namespace/group" -> cookie
        self.execs = {}  # what -> (pid, "namespace/group")
        self.before = {}  # container key -> cookie


def scenarios(node, old_deb, old_version, new_deb, new_version):
    cri = node.cri
    st = State()

    # --- the node as the previous release left it ------------------------------------------------
    make_dirs(old_deb)
    r = apt(old_deb)
    if not check(f"apt install ./{os.path.basename(old_deb)} (the previous release)", r.returncode == 0, r.stdout + r.stderr):
        return
    r = run(["systemctl", "enable", "--now", NRI_UNIT])
    check(f"systemctl enable --now {NRI_UNIT}", r.returncode == 0, r.stderr)
    sd.sh("systemctl", "restart", sd.CONTAINERD)
    check("the previous release's NRI plugin registers",
          wait_for(lambda: "registered as NRI plugin" in sd.unit_log(NRI_UNIT), 120), sd.unit_log(NRI_UNIT)[-1500:])
    check(f"the previous release's services run it ({old_version})", not services_run(old_version), services_run(old_version))
    for key in PODS:
        node.pod(key)
        node.container(key, "c1")
    for key in PODS:
        st.group_cookie[group_of(key)] = cookie_of(node.pid(f"{key}/c1"))
    cookies = list(st.group_cookie.values())
    check("under the previous release, three groups hold three cookies (two tenants naming one group differ)",
          None not in cookies and "0x0" not in cookies and len(set(cookies)) == 3, st.group_cookie)
    for prefix in PODMAN:
        node.podman_run(prefix, "c1")
    pm = {p: cookie_of(node.pid(f"{p}/c1")) if f"{p}/c1" in node.ctrs else None for p in PODMAN}
    check("under the previous release, a podman container of tenant-a/web shares the CRI pods' cookie",
          pm["pm-a"] == st.group_cookie["tenant-a/web"], pm)
    check("under the previous release, podman's own group tenant-c/batch has a cookie of its own",
          pm["pm-c"] not in (None, "0x0") and pm["pm-c"] not in cookies, pm)
    st.group_cookie["tenant-c/batch"] = pm["pm-c"]
    # A process exec'd into tenant-a/web that stays: the follower gives it the group's cookie.
    rc, out, err = cri.exec_sync(node.ctrs["a-web/c1"], ["/bin/sh", "-c", f"{PROBE} --sleep 3600 >/dev/null 2>&1 &"])
    exec_pid = None

    def find_exec():
        nonlocal exec_pid
        exec_pid = (node.exec_windows("a-web/c1") or [exec_pid])[-1]
        return exec_pid is not None and cookie_of(exec_pid) == st.group_cookie["tenant-a/web"]

    check("a process exec'd into tenant-a/web under the previous release has its group's cookie",
          wait_for(find_exec, 30), f"exec {rc} {out} {err}; pid {exec_pid}: {exec_pid and cookie_of(exec_pid)}")
    if exec_pid is not None:
        st.execs["exec'd into CRI pod tenant-a/web"] = (exec_pid, "tenant-a/web")
    pm_exec = node.exec_podman("pm-c/c1")
    check("a process exec'd into podman's tenant-c/batch under the previous release has its group's cookie",
          wait_for(lambda: cookie_of(pm_exec) == st.group_cookie["tenant-c/batch"], 30), cookie_of(pm_exec))
    st.execs["exec'd into podman's tenant-c/batch"] = (pm_exec, "tenant-c/batch")
    for key in node.ctrs:
        st.before[key] = cookie_of(node.pid(key))

    skew(node, st, "A", "the new binary beside the previous release's services", new_deb, new_version, old_version)
    step(node, st, 1, "the upgrade", [new_deb], new_version)
    skew(node, st, "B", "the previous release's binary beside the new services", old_deb, old_version, new_version)
    step(node, st, 2, "the rollback", ["--allow-downgrades", old_deb], old_version, previous=True)
    step(node, st, 3, "the upgrade again", [new_deb], new_version)


def units_state():
    """unit -> (main pid, automatic restarts, active state)."""
    got = {}
    for unit in SERVICES:
        p = sd.show(unit, "MainPID", "NRestarts", "ActiveState")
        got[unit] = (p.get("MainPID"), p.get("NRestarts"), p.get("ActiveState"))
    return got


def kept(node, st, what, unrecorded=()):
    """The checks every step and skew ends with: no split group, the containers and processes of
    before keep their cookies, `list` agrees, a new exec into a container of before is covered."""
    settled = wait_for(lambda: not node.split(st.group_cookie), SETTLE, 2)
    check(f"{what}: every container, old and new, CRI and podman, holds its group's cookie",
          settled, node.split(st.group_cookie))
    moved = {k: (c, cookie_of(node.pid(k))) for k, c in st.before.items()}
    check(f"{what}: every container that ran before keeps its cookie",
          all(a == b for a, b in moved.values()), {k: v for k, v in moved.items() if v[0] != v[1]})
    for label, (pid, group) in st.execs.items():
        check(f"{what}: the process {label} keeps its group's cookie",
              cookie_of(pid) == st.group_cookie[group], cookie_of(pid))
    node.listed(what, unrecorded)
    # A probe exec'd into a container that ran before.
    cid = node.ctrs["a-web/c1"]
    rc, out, err = node.cri.exec_sync(cid, [PROBE])
    m = re.search(r"first=(\d) cookie=(0x[0-9a-f]+)", out)
    shim = cookie_of(base.shim_of(node.pid("a-web/c1")))
    got = m.group(2) if m else None
    note(f"{what}: CRI ExecSync {PROBE} in tenant-a/web: {out or err} (its pod's shim holds {shim}: "
         f"{'the shim carries the cookie to it' if m and m.group(1) == '1' else 'the follower gave it'})")
    check(f"{what}: a process exec'd into a container that ran before gets its group's cookie",
          rc == 0 and got == st.group_cookie["tenant-a/web"], f"exit {rc}: {out} {err}")


def journal_checked(what, since):
    """Nothing in the journal the admin must act on; every line at warning or worse printed."""
    lines = journal_since(since)
    for prio, msg in lines:
        note(f"{what}: journal ({'error' if prio <= 3 else 'warning'}): {msg[:300]}")
    act = [msg for prio, msg in lines if prio <= 3 or ACT.search(msg)]
    check(f"{what}: no line of the package's journal asks the admin to act", not act, act)


def place(deb):
    """The binary of `deb` renamed into place at HOOK by hand, as dpkg's unpack puts it, without
    the package's scripts: the running services keep the binary they started."""
    tmp = tempfile.mkdtemp(prefix="och-skew.")
    try:
        r = run(["dpkg-deb", "-x", deb, tmp])
        if r.returncode != 0:
            raise RuntimeError(f"dpkg-deb -x {deb}: {r.stderr}")
        shutil.copy2(f"{tmp}{HOOK}", f"{HOOK}.och-skew")
        os.rename(f"{HOOK}.och-skew", HOOK)
    finally:
        shutil.rmtree(tmp)


def skew(node, st, n, label, deb, hook_version, services_version):
    """A hook of one version beside a follower and NRI plugin of the other, both still running."""
    what = f"skew {n}, {label}"
    since = int(time.time())
    units = units_state()
    place(deb)
    out = run([HOOK, "--version"]).stdout.strip()
    check(f"{what}: {HOOK} is {hook_version} ({out})", hook_version in out.split(), out)
    exes = {unit: runs_installed(pid) if pid not in (None, "", "0") else ("not running", True)
            for unit, (pid, _, _) in units.items()}
    check(f"{what}: the services still run the {services_version} binary they started with, not {HOOK}",
          not any(same for _, same in exes.values()), exes)
    t0 = time.monotonic()
    for key in PODS:
        node.container(key, f"k{n}")
    node.podman_run("pm-c", f"k{n}")
    pid = node.exec_podman("pm-a/c1", {p for p, _ in st.execs.values()})
    check(f"{what}: a process exec'd into podman's tenant-a/web gets its group's cookie",
          wait_for(lambda: cookie_of(pid) == st.group_cookie["tenant-a/web"], 30), cookie_of(pid))
    st.execs[f"exec'd into podman's tenant-a/web in skew {n}"] = (pid, "tenant-a/web")
    note(f"{what}: a container in each pod, one podman container and one podman exec in {time.monotonic() - t0:.0f} s")
    kept(node, st, what)
    after = units_state()
    check(f"{what}: the services kept running, same main pids, no restart (no crash loop)", after == units,
          f"before {units}, after {after}")
    journal_checked(what, since)


def step(node, st, n, label, apt_args, version, previous=False):
    deb = apt_args[-1]
    what = f"step {n}, {label}"
    make_dirs(deb)
    since = int(time.time())
    t0 = time.monotonic()
    stop = threading.Event()
    begun = threading.Event()
    made = []  # (pod key, name, begun after apt returned)
    errors = []

    def create(key, i, after):
        name = f"s{n}-{i}"
        try:
            node.container(key, name)
            made.append((key, name, after))
        except Exception as e:  # noqa: BLE001 - reported below as a failure with its cause
            errors.append(f"{key}/{name}: {type(e).__name__}: {e}")

    def churn():
        keys = list(PODS)
        begun.set()
        i = 0
        while not stop.is_set() and i < MAX_DURING:
            create(keys[i % len(keys)], i, False)
            i += 1
        stop.wait()
        for key in keys:
            create(key, i, True)
            i += 1

    loop = threading.Thread(target=churn)
    loop.start()
    # The first container is on its way before apt starts.
    begun.wait(60)
    time.sleep(0.5)
    r = apt(*apt_args)
    apt_secs = time.monotonic() - t0
    stop.set()
    loop.join(timeout=900)
    during = sum(1 for _, _, a in made if not a)
    note(f"{what}: apt-get install {' '.join(os.path.basename(a) for a in apt_args)} took {apt_secs:.0f} s; "
         f"{len(made)} containers created meanwhile and after ({during} begun before apt returned)")
    if not check(f"{what}: apt-get install succeeds", r.returncode == 0, r.stdout + r.stderr):
        return
    check(f"{what}: every container of the churn was created", not errors and not loop.is_alive(), errors)
    late = {k for k, _, a in made if a}
    check(f"{what}: each group got a new container after apt returned", late == set(PODS), sorted(late))
    for prefix in PODMAN:
        node.podman_run(prefix, f"s{n}")
    # Installing the previous release, the outgoing postrm restarts the NRI plugin: a container
    # containerd created meanwhile got no hook, and 0.1.0's plugin, which does not act at
    # StartContainer, leaves it out of the cache; it holds its cookie from its pod's shim
    # (docs/upgrading.md). The next step's list must show it.
    kept(node, st, what, {f"{k}/{name}" for k, name, after in made if not after} if previous else ())
    problems = services_run(version)
    check(f"{what}: every running service runs the installed binary ({version})", not problems, problems)
    journal_checked(what, since)


def main():
    gen, old_deb, old_version, new_deb, new_version, rootfs_tar = sys.argv[1:7]
    if not os.path.isdir(f"{ROOTFS}/bin"):
        os.makedirs(ROOTFS, exist_ok=True)
        sd.sh("tar", "-xf", rootfs_tar, "-C", ROOTFS, timeout=600)
    pb = sd.load_pb(gen)
    cri = sd.SystemdCri(pb)
    node = Node(cri)
    try:
        scenarios(node, old_deb, old_version, new_deb, new_version)
    except Exception as e:  # a crash is a failure with its cause, never a silent pass
        import traceback

        bad(f"upgrade scenarios aborted: {type(e).__name__}", traceback.format_exc())
    finally:
        node.remove_podman()
        for pod_id, _ in node.pods.values():
            try:
                cri.remove_pod(pod_id)
            except Exception as e:  # noqa: BLE001
                note(f"teardown: removing pod {pod_id[:12]}: {e}")
        with open("/run/xchg/upgrade.journal", "w") as f:
            f.write(run(["journalctl", "-b", "--no-pager", "-u", sd.CONTAINERD, "-u", NRI_UNIT, "-u", FOLLOW_UNIT,
                         "-t", "oci-coresched-hook"]).stdout)
    per = {}
    for method, secs in cri.timings:
        per.setdefault(method, []).append(secs)
    note("CRI call times (s): " + ", ".join(f"{m} n={len(v)} max={max(v):.1f}" for m, v in per.items()))
    print(f"upgrade: {base.PASS} passed, {base.FAIL} failed", flush=True)
    return 1 if base.FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
