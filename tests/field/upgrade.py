#!/usr/bin/env python3
# Field tier, inside the Debian 13 guest under its systemd: a node moves between versions of the
# package while its containers run. The previous release's .deb (tests/field/previous-release.txt,
# built from this repository's history) is installed as an admin installs it, with its follower
# unit and its NRI unit running and containerd on NRI with kubelet's systemd cgroup driver. Pods of
# three groups run (tenant-a/web, tenant-a/db, tenant-b/web), and a process exec'd into one of them
# stays. Then, each while containers keep being created in those pods through CRI:
#
#   1. `apt install ./new.deb`                         (the upgrade)
#   2. `apt install --allow-downgrades ./old.deb`      (the rollback)
#   3. `apt install ./new.deb`                         (the upgrade again)
#
# After each step (cookies read with util-linux `coresched`):
#   - every container that ran before keeps its cookie, and so does the exec'd process;
#   - every container created during and after the step has its group's cookie: no group splits;
#   - `list` shows every group with every container, and no group with two cookies;
#   - every running service of the package runs the installed binary (/proc/PID/exe is the
#     installed file, not a deleted one) and `--version` names the installed version;
#   - a probe exec'd into a container that ran before gets its group's cookie (printed: whether
#     it had it at its first instruction, i.e. from the pod's shim, or from the follower);
#   - no line of the package's at error level, and no warning that asks the admin to act.
#
#   upgrade.py GEN_DIR OLD_DEB OLD_VERSION NEW_DEB NEW_VERSION      prints TAP lines and a summary
"""Upgrade, rollback and upgrade again on a node with running containers: field tier."""

import json
import os
import re
import subprocess
import sys
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
# Containers created per step while apt runs, at most; then one more in each pod once it returned.
MAX_DURING = 6
# How long a container created during a step may take to hold its group's cookie: one started
# while the NRI plugin restarted gets no hook, and the plugin's catch-up gives it the cookie when
# it registers again.
SETTLE = 90
# Warnings that ask the admin to act (or say that something was thrown away).
ACT = re.compile(r"moved|aside|newer|unusable|rebuild|split|failed to refill|restart every", re.I)


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


class Node:
    def __init__(self, cri):
        self.cri = cri
        self.pods = {}  # pod key -> (pod id, sandbox config)
        self.ctrs = {}  # "pod/name" -> container id
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

    def pid(self, key):
        return self.cri.pid(self.ctrs[key])


def services_run(version):
    """Each running service's main process runs the installed binary, which is `version`."""
    problems = []
    inst = os.stat(HOOK)
    for unit in SERVICES:
        pid = int(sd.show(unit, "MainPID").get("MainPID", "0") or 0)
        if pid <= 0:
            problems.append(f"{unit} does not run")
            continue
        exe = os.readlink(f"/proc/{pid}/exe")
        st = os.stat(f"/proc/{pid}/exe")
        if exe != HOOK or (st.st_dev, st.st_ino) != (inst.st_dev, inst.st_ino):
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


def scenarios(node, old_deb, old_version, new_deb, new_version):
    cri = node.cri
    before = {}  # "pod/name" -> cookie, as recorded before the steps
    group_cookie = {}  # pod key -> its group's cookie

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
        group_cookie[key] = cookie_of(node.pid(f"{key}/c1"))
    cookies = list(group_cookie.values())
    check("under the previous release, three groups hold three cookies (two tenants naming one group differ)",
          None not in cookies and "0x0" not in cookies and len(set(cookies)) == 3, group_cookie)
    # A process exec'd into tenant-a/web that stays: the follower gives it the group's cookie.
    rc, out, err = cri.exec_sync(node.ctrs["a-web/c1"], ["/bin/sh", "-c", f"{PROBE} --sleep 3600 >/dev/null 2>&1 &"])
    exec_pid = None

    def find_exec():
        nonlocal exec_pid
        cg = sd.proc_cgroup(node.pid("a-web/c1"))
        for p in sd.read(f"{sd.CGROOT}{cg}/cgroup.procs").split():
            if sd.read(f"/proc/{p}/comm") == "exec-window":
                exec_pid = int(p)
        return exec_pid is not None and cookie_of(exec_pid) == group_cookie["a-web"]

    check("a process exec'd into tenant-a/web under the previous release has its group's cookie",
          wait_for(find_exec, 30), f"exec {rc} {out} {err}; pid {exec_pid}: {exec_pid and cookie_of(exec_pid)}")
    for key in node.ctrs:
        before[key] = cookie_of(node.pid(key))

    steps = [
        ("the upgrade", [new_deb], new_version),
        ("the rollback", ["--allow-downgrades", old_deb], old_version),
        ("the upgrade again", [new_deb], new_version),
    ]
    for n, (label, args, version) in enumerate(steps, 1):
        step(node, n, label, args, version, before, group_cookie, exec_pid)


def step(node, n, label, apt_args, version, before, group_cookie, exec_pid):
    cri = node.cri
    deb = apt_args[-1]
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
    note(f"step {n}, {label}: apt-get install {' '.join(os.path.basename(a) for a in apt_args)} took {apt_secs:.0f} s; "
         f"{len(made)} containers created meanwhile and after ({during} begun before apt returned)")
    if not check(f"step {n}, {label}: apt-get install succeeds", r.returncode == 0, r.stdout + r.stderr):
        return
    check(f"step {n}, {label}: every container of the churn was created", not errors and not loop.is_alive(), errors)
    late = {k for k, _, a in made if a}
    check(f"step {n}, {label}: each group got a new container after apt returned", late == set(PODS), sorted(late))

    # No group splits: every container, old or new, ends with its group's cookie.
    def split():
        wrong = {}
        for key in list(node.ctrs):
            pod = key.split("/")[0]
            c = cookie_of(node.pid(key))
            if c != group_cookie[pod]:
                wrong[key] = f"{c} (group's {group_cookie[pod]})"
        return wrong

    settled = wait_for(lambda: not split(), SETTLE, 2)
    check(f"step {n}, {label}: every container created during and after it holds its group's cookie",
          settled, split())
    kept = {k: (c, cookie_of(node.pid(k))) for k, c in before.items()}
    check(f"step {n}, {label}: every container that ran before keeps its cookie",
          all(a == b for a, b in kept.values()), {k: v for k, v in kept.items() if v[0] != v[1]})
    check(f"step {n}, {label}: the process exec'd before keeps its group's cookie",
          exec_pid is not None and cookie_of(exec_pid) == group_cookie["a-web"], exec_pid and cookie_of(exec_pid))

    # The cache: every group with every container, one cookie each.
    r = run([HOOK, "list", "--json"])
    listed = {}
    multi = []
    if r.returncode == 0:
        for g in json.loads(r.stdout):
            for m in g["members"]:
                listed[m["id"]] = g["group"]
            if g.get("live_cookies", 0) > 1:
                multi.append(g["group"])
    want = {cid: f"{PODS[k.split('/')[0]][0]}/{PODS[k.split('/')[0]][1]}" for k, cid in node.ctrs.items()}
    missing = {cid[:12]: g for cid, g in want.items() if listed.get(cid) != g}
    check(f"step {n}, {label}: list shows every container in its group", r.returncode == 0 and not missing,
          f"{r.stderr[-500:]} missing or elsewhere: {missing}")
    check(f"step {n}, {label}: list shows no group with more than one cookie", r.returncode == 0 and not multi, multi)

    # The services run what is installed.
    problems = services_run(version)
    check(f"step {n}, {label}: every running service runs the installed binary ({version})", not problems, problems)

    # A probe exec'd into a container that ran before the step.
    cid = node.ctrs["a-web/c1"]
    rc, out, err = cri.exec_sync(cid, [PROBE])
    m = re.search(r"first=(\d) cookie=(0x[0-9a-f]+)", out)
    shim = cookie_of(base.shim_of(node.pid("a-web/c1")))
    got = m.group(2) if m else None
    note(f"step {n}, {label}: CRI ExecSync {PROBE} in tenant-a/web: {out or err} (its pod's shim holds {shim}: "
         f"{'the shim carries the cookie to it' if m and m.group(1) == '1' else 'the follower gave it'})")
    check(f"step {n}, {label}: a process exec'd into a container that ran before gets its group's cookie",
          rc == 0 and got == group_cookie["a-web"], f"exit {rc}: {out} {err}")

    # Nothing in the journal the admin must act on.
    lines = journal_since(since)
    for prio, msg in lines:
        note(f"step {n}, {label}: journal ({'error' if prio <= 3 else 'warning'}): {msg[:300]}")
    act = [msg for prio, msg in lines if prio <= 3 or ACT.search(msg)]
    check(f"step {n}, {label}: no line of the package's journal asks the admin to act", not act, act)


def main():
    gen, old_deb, old_version, new_deb, new_version = sys.argv[1:6]
    pb = sd.load_pb(gen)
    cri = sd.SystemdCri(pb)
    node = Node(cri)
    try:
        scenarios(node, old_deb, old_version, new_deb, new_version)
    except Exception as e:  # a crash is a failure with its cause, never a silent pass
        import traceback

        bad(f"upgrade scenarios aborted: {type(e).__name__}", traceback.format_exc())
    finally:
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
