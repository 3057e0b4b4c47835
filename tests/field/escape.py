#!/usr/bin/env python3
# Field tier, inside the Debian 13 guest under its systemd (tests/field/guest.sh): a container whose
# hook FAILED OPEN (fail_closed = false, the default) is seen, counted and healed, on each route
# users run. Here: podman 5 (crun) through the packaged hooks.d file, and containerd 1.7 with the
# packaged NRI unit under kubelet's systemd cgroup driver, the follower being the packaged
# oci-coresched-hook-reconcile.service; the DaemonSet route runs the same scenarios from
# tests/field/daemonset.py (Scenarios.escape), with its own follower container.
#
# Per route one container of another tenant (tenant-b, same group name) runs throughout, then two
# containers of tenant-a escape, the follower running all along, as deployed:
#   lock    the state lock (/run/oci-coresched-hook/lock, flock(2) exclusive, as the hook takes it)
#           held by util-linux `flock --no-fork LOCK sleep` through the container's createRuntime
#           and poststart (both hook runs wait lock_timeout_ms, 3000 here, and fail open) and on
#           through the audit and the count; its release is the cause's end.
#   config  /etc/oci-coresched-hook/config.toml made invalid (a key the hook does not know) while
#           the container starts: the hook fails open with reason config; the follower, which
#           reads the file again when it changes, heals nothing meanwhile and says so in one line;
#           the valid file renamed back into place is the cause's end.
# Checked for each (cookies read by util-linux `coresched get -s PID` alone: `inspect` waits for the
# lock and refuses an invalid config):
#   (a)(b) the container ran at cookie 0 (containerd: its pod's shim too); the hook logged
#          `failing open` naming it, the reason and (for the lock) its group;
#   (c)    `audit --json` names it, rule escaped, with its group, and exits 1;
#   (d)    `metrics`: oci_coresched_hook_fail_open_total{reason} rose for that reason only (every
#          reason present);
#   (e)    once the cause is gone the follower heals it: its init and a process exec'd afterwards
#          (podman exec; CRI ExecSync, spawned by the pod's shim, which must hold the cookie too)
#          have the group's cookie, the one the cache records (the second escaped container's
#          must be the first's); the follower's page counts the heal; the time from the cause's
#          end to the healed init is RECORDED (escape/latency.txt in the exchange directory,
#          target/field/escape-latency.txt on the host), never asserted;
#   (f)    the other tenant keeps its cookie, and no reading of the escaped containers (nor the
#          exec'd process) ever showed it;
#   (g)    `audit` is clean (exit 0) afterwards.
#
# Why this order. Nothing is stopped to make room for the checks: the follower heals through the
# hook's own ensure, under the state lock, so while the lock is held it cannot heal, and `audit`
# and `metrics`, which wait lock_timeout_ms for the cache and then go on without it (the escaped
# rule and the fail-open counts need no cache), run while the container is still at 0, inside the
# very condition that made it escape. Releasing the lock is then the one thing that changes, and
# the heal that follows is the deployed follower's. With the config, `audit` and `metrics` refuse
# an invalid file (every command but `hook` and `explain` does: src/cli/mod.rs), so they run with
# --config naming a copy of the node's valid file (the same policy; what plain `audit` says is
# printed); the follower is what is asked to notice the file and wait. The config file is restored
# byte for byte in every outcome (finally).
#
#   escape.py GEN_DIR          prints TAP lines and a summary line
"""Fail-open containers seen, counted and healed: podman's hooks.d and containerd's NRI routes."""

import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cri as base  # noqa: E402  (the CRI client, coresched reader, TAP counters)
import systemd_cgroup as sd  # noqa: E402  (kubelet's systemd driver over cri.py's client)

from cri import G, bad, check, note, read_cookie, run, wait_for  # noqa: E402

PKG = "oci-coresched-hook"
HOOK = f"/usr/bin/{PKG}"
STATE_DIR = f"/run/{PKG}"
LOCK = f"{STATE_DIR}/lock"
CONFIG = f"/etc/{PKG}/config.toml"
X = "/run/xchg"
OUT = f"{X}/escape"
LATENCY = f"{OUT}/latency.txt"
HOOK_LOG = f"{X}/hook.log"  # the guest config's log_file (guest.sh); absent under the DaemonSet
PROBE = "/usr/bin/exec-window"  # in the image and the rootfs (run.sh)
NS = "io.kubernetes.pod.namespace"
PODMAN = ["podman", "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--storage-driver", "vfs", "--runtime", "crun"]
ROOTFS = "/tmp/escape-rootfs"
# The reasons the page is said to carry always (noted when one is missing; the two used here are checked).
REASONS = ("lock_timeout", "state_dir", "config", "bad_input", "kernel", "cache", "other")
# Generous bounds under TCG: how long to wait, never a claim about how fast it must be.
HEAL_TIMEOUT = 120
POLL = 0.25
# The invalid config: the node's, plus a key the hook does not know (a typo, as an admin makes it).
INVALID = b"\n# tests/field/escape.py: a key the hook does not know makes this file invalid\nno_such_setting = true\n"
FAIL_OPEN = re.compile(r'^oci_coresched_hook_fail_open_total\{reason="([a-z_]+)"\}\s+(\S+)$')
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


# --- what the node's binary says --------------------------------------------------------------


def hook_cmd(hook, *args, config=None):
    """`HOOK [--config CONFIG] ARGS...`, completed."""
    return run([hook, *(["--config", config] if config else []), *args])


def metrics(hook, config=None):
    """The `metrics` page (text), or RuntimeError with why not."""
    r = hook_cmd(hook, "metrics", config=config)
    if r.returncode != 0:
        raise RuntimeError(f"{hook} metrics: exit {r.returncode}: {r.stderr.strip()[-800:]}")
    return r.stdout


def fail_open(page):
    """reason -> count of oci_coresched_hook_fail_open_total on a metrics page."""
    out = {}
    for line in page.splitlines():
        m = FAIL_OPEN.match(line.strip())
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def sample(page, name):
    """The sum of every sample of NAME on a page (None when there is none)."""
    found = [float(m.group(3)) for m in map(SAMPLE.match, page.splitlines()) if m and m.group(1) == name]
    return sum(found) if found else None


def audit(hook, config=None):
    """`audit --json`: (exit status, the parsed report or None, stdout + stderr)."""
    r = hook_cmd(hook, "audit", "--json", config=config)
    try:
        report = json.loads(r.stdout)
    except ValueError:
        report = None
    return r.returncode, report, (r.stdout + r.stderr).strip()


def rules(report):
    """Every object with a "rule" anywhere in an audit report."""
    found = []

    def walk(v):
        if isinstance(v, dict):
            if "rule" in v:
                found.append(v)
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(report)
    return found


def escaped(report, cid):
    """The audit's `escaped` rows naming container CID."""
    return [v for v in rules(report) if v.get("rule") == "escaped" and v.get("container") == cid]


def cache_row(hook, cid):
    """(group, cached cookie) of container CID in `list --json`, or (None, None)."""
    r = hook_cmd(hook, "list", "--json")
    if r.returncode != 0:
        raise RuntimeError(f"{hook} list --json: exit {r.returncode}: {r.stderr.strip()[-600:]}")
    for g in json.loads(r.stdout):
        for m in g["members"]:
            if m["id"] == cid:
                return g["group"], m.get("cookie_cached")
    return None, None


def same(a, b):
    """Two cookies ('0x..' text or integers) are one."""
    def val(c):
        return c if isinstance(c, int) else int(str(c), 16)

    try:
        return a is not None and b is not None and val(a) == val(b)
    except ValueError:
        return False


# --- the hook's log lines ----------------------------------------------------------------------


def log_mark():
    """Where the hook's sinks end now: the guest config's log_file, and the journal (syslog, the
    sink of the DaemonSet's config and of the defaults an invalid config falls back to)."""
    return (os.path.getsize(HOOK_LOG) if os.path.exists(HOOK_LOG) else 0, time.time())


def hook_lines(mark, *needles):
    """The hook's lines since MARK (log_file and journal) that contain every NEEDLE."""
    off, since = mark
    text = ""
    if os.path.exists(HOOK_LOG):
        with open(HOOK_LOG, errors="replace") as f:
            f.seek(off)
            text += f.read()
    text += run(["journalctl", "--no-pager", "-o", "cat", "-t", PKG, "--since", f"@{int(since) - 1}"]).stdout
    return [line for line in text.splitlines() if all(n in line for n in needles)]


# --- the state lock ----------------------------------------------------------------------------


def lock_holders(path):
    """Pids holding a flock on PATH (/proc/locks: "N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE ...")."""
    try:
        ino = os.stat(path).st_ino
    except FileNotFoundError:
        return []
    pids = []
    with open("/proc/locks") as f:
        for line in f:
            p = line.split()
            if len(p) >= 6 and p[1] == "FLOCK" and p[3] == "WRITE" and p[5].rsplit(":", 1)[-1] == str(ino):
                pids.append(int(p[4]))
    return pids


class LockHeld:
    """The state lock held, as an operator holds it: `flock --no-fork LOCK sleep 3600` (flock(2),
    exclusive: the hook's own lock), held once /proc/locks shows that process holding it; release()
    kills it (with --no-fork the lock dies with it)."""

    def __init__(self, path):
        self.path, self.proc, self.held_at, self.released_at = path, None, None, None

    def __enter__(self):
        self.proc = subprocess.Popen(["flock", "--exclusive", "--no-fork", self.path, "sleep", "3600"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_for(lambda: self.proc.pid in lock_holders(self.path) or self.proc.poll() is not None, 60, 0.1) \
                or self.proc.pid not in lock_holders(self.path):
            self.release()
            raise RuntimeError(f"flock --no-fork {self.path} did not get the lock in 60 s (holders: {lock_holders(self.path)})")
        self.held_at = time.monotonic()
        return self

    def release(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.released_at is None and self.held_at is not None:
            self.released_at = time.monotonic()

    def __exit__(self, *exc):
        self.release()


# --- the config ---------------------------------------------------------------------------------


def write_config(path, data):
    """DATA as PATH, 0644, written aside and renamed into place (as an editor saves it)."""
    tmp = f"{path}.escape-tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)


# --- routes -------------------------------------------------------------------------------------


class Ctr:
    """A running container of a route: KEY (its name in the route), ID, init PID, GROUP (the
    cache's key, `<namespace>/<group>`), and what the route keeps of it (POD: the sandbox id)."""

    def __init__(self, key, cid, pid, group, pod=None):
        self.key, self.id, self.pid, self.group, self.pod = key, cid, pid, group, pod


class Route:
    """What a scenario needs of a route. prepare() does what comes before the container's hooks (a
    pod's sandbox), start() creates and starts the container (its hooks run), exec_probe() runs
    the exec-window probe exec'd into it, shim() is the pid of the pod's shim (None without one);
    the follower (never stopped: it runs as deployed) is read here."""

    name = ""
    hook = HOOK  # the node's binary
    config = CONFIG  # the file the node's hook reads

    def prepare(self, key, namespace, group):
        return (key, namespace, group)

    def start(self, prepared):
        raise NotImplementedError

    def exec_probe(self, ctr):
        """(exit status, the probe's line)."""
        raise NotImplementedError

    def shim(self, ctr):
        return None

    def follower_alive(self):
        raise NotImplementedError

    def follower_log(self):
        """The follower's log of its current run."""
        raise NotImplementedError

    def close(self):
        pass


class UnitFollower:
    """The packaged follower unit; its log is its journal."""

    unit = sd.FOLLOW_UNIT

    def follower_alive(self):
        return sd.show(self.unit, "ActiveState").get("ActiveState") == "active"

    def follower_log(self):
        return sd.unit_log(self.unit)


class PodmanRoute(UnitFollower, Route):
    """podman 5 with crun, the packaged hooks.d file (podman's default hooks_dir)."""

    name = "podman (hooks.d, crun)"

    def __init__(self):
        self.names = []

    def start(self, prepared):
        key, namespace, group = prepared
        name = f"esc-{key}"
        r = run([*PODMAN, "run", "-d", "--name", name, "--network", "none", "--annotation", f"{G}={group}",
                 "--annotation", f"{NS}={namespace}", "--rootfs", ROOTFS, "/bin/sleep", "3600"])
        self.names.append(name)
        if r.returncode != 0:
            raise RuntimeError(f"podman run -d {name}: exit {r.returncode}: {r.stderr.strip()[-800:]}")
        cid = run([*PODMAN, "inspect", "-f", "{{.Id}}", name]).stdout.strip()
        pid = int(run([*PODMAN, "inspect", "-f", "{{.State.Pid}}", name]).stdout.strip() or 0)
        return Ctr(key, cid, pid, f"{namespace}/{group}", name)

    def exec_probe(self, ctr):
        r = run([*PODMAN, "exec", ctr.pod, PROBE])
        return r.returncode, (r.stdout.strip() or r.stderr.strip()[-300:])

    def close(self):
        if self.names:
            run([*PODMAN, "rm", "-f", "-t", "0", *self.names])


class CriRoute(Route):
    """A containerd route driven over CRI as kubelet drives it: one pod per container (a fresh pod:
    its shim has no cookie yet, so the container's init cannot inherit one at fork), ExecSync as
    the exec. HANDLER: the runtime handler; RESOURCES: kubelet's for a Burstable pod, or None."""

    def __init__(self, cri, handler="", resources=None):
        self.cri, self.handler, self.resources, self.pods = cri, handler, resources, []

    def prepare(self, key, namespace, group):
        name = f"esc-{key}"
        sb = self.cri.sandbox_config(name, namespace, {G: group}, "burstable")
        pod_id = self.cri.run_pod(sb, self.handler)
        self.pods.append(pod_id)
        return key, namespace, group, pod_id, sb

    def start(self, prepared):
        key, namespace, group, pod_id, sb = prepared
        cid = self.cri.create(pod_id, sb, "app", ["/bin/sleep", "3600"], resources=self.resources)
        self.cri.start(cid)
        self.started(key, pod_id, sb, cid)
        return Ctr(key, cid, self.cri.pid(cid), f"{namespace}/{group}", pod_id)

    def started(self, key, pod_id, sb, cid):
        """A container is running (the DaemonSet route makes it one of its tenants)."""

    def exec_probe(self, ctr):
        pb = self.cri.pb
        r = self.cri.call("ExecSync", pb.ExecSyncRequest(container_id=ctr.id, cmd=[PROBE], timeout=30), pb.ExecSyncResponse,
                          timeout=90)
        return r.exit_code, (r.stdout.decode(errors="replace").strip() or r.stderr.decode(errors="replace").strip()[-300:])

    def shim(self, ctr):
        return base.shim_of(ctr.pid)

    def close(self):
        for pod_id in self.pods:
            try:
                self.cri.remove_pod(pod_id)
            except Exception as e:  # noqa: BLE001 - teardown: said, not fatal
                note(f"teardown: removing pod {pod_id[:12]}: {e}")
        self.pods.clear()


class NriRoute(UnitFollower, CriRoute):
    """containerd 1.7, the packaged NRI unit as the wiring, kubelet's systemd cgroup driver."""

    name = "containerd (NRI plugin, systemd cgroup driver)"


# --- the scenarios ------------------------------------------------------------------------------


PROBE_LINE = re.compile(r"window_ns=(\S+) first=([01]) cookie=(0x[0-9a-f]+)")


def record(route, scenario, cause, secs, reads, extra):
    """One line of the latency file (and a note): measured, never asserted."""
    os.makedirs(OUT, exist_ok=True)
    new = not os.path.exists(LATENCY)
    with open(LATENCY, "a") as f:
        if new:
            f.write("# route|scenario|the cause cleared when|init healed after (s; never if not)|cookie reads|exec'd process\n")
        f.write(f"{route}|{scenario}|{cause}|{'never' if secs is None else f'{secs:.2f}'}|{reads}|{extra}\n")
    note(f"escape latency: {route}: {scenario}: init healed "
         f"{'never (within ' + str(HEAL_TIMEOUT) + ' s)' if secs is None else f'{secs:.2f} s'} after {cause} "
         f"({reads} cookie reads, every {POLL} s + a coresched run); exec'd process: {extra}")


class Watch:
    """Every cookie read of the escaped containers and their exec'd processes, to show the other
    tenant's cookie never among them."""

    def __init__(self):
        self.seen = {}

    def read(self, what, pid):
        c = read_cookie(pid)
        self.seen.setdefault(what, set()).add(c)
        return c


def wait_healed(watch, ctr, since):
    """Reads ctr's init cookie until it is non-zero (HEAL_TIMEOUT): (cookie, seconds since SINCE
    or None, reads)."""
    reads = 0
    while True:
        c = watch.read(ctr.key, ctr.pid)
        reads += 1
        if c != "0x0":
            return c, time.monotonic() - since, reads
        if time.monotonic() - since > HEAL_TIMEOUT:
            return c, None, reads
        time.sleep(POLL)


def follower_page(route, name, pred, timeout=60, also=lambda page: True):
    """Polls `metrics` (the follower's follow.prom appended; rewritten every 10 s) until PRED holds
    for the sum of NAME's samples and ALSO for the page: (held, last value, page)."""
    got = {}

    def once():
        try:
            got["page"] = metrics(route.hook)
        except RuntimeError as e:
            got["page"], got["v"] = str(e), None
            return False
        got["v"] = sample(got["page"], name)
        return got["v"] is not None and pred(got["v"]) and also(got["page"])

    held = wait_for(once, timeout, 2)
    return held, got.get("v"), got.get("page", "")


def page_lines(page):
    """The lines of a metrics page about escapes and the audit (evidence for a failed check)."""
    return "\n".join(line for line in page.splitlines() if "escape" in line or "audit" in line or "fail_open" in line)


def seen_and_counted(route, ctr, scenario, reason, before, mark, config=None):
    """(b) still at 0, (a) the log line, (c) the audit, (d) the count: the container escaped and
    nothing has healed it yet. CONFIG: a valid config for the commands (the node's is invalid)."""
    R = route.name
    now = read_cookie(ctr.pid)
    check(f"{R}: {scenario}: nothing healed it yet: still at cookie 0 ({now})", now == "0x0", now)
    shim = route.shim(ctr)
    if shim is not None:
        k = read_cookie(shim)
        check(f"{R}: {scenario}: its pod's shim (pid {shim}) is at cookie 0 too: the hook that wires it failed open ({k})",
              k == "0x0", k)
    lines = []

    def logged():
        lines[:] = hook_lines(mark, "failing open", ctr.id)
        return bool(lines)

    wait_for(logged, 30)
    for line in lines[:4]:
        note(f"{R}: {scenario}: hook: {line[-400:]}")
    named = [line for line in lines if reason in line and (reason != "lock_timeout" or ctr.group in line)]
    check(f"{R}: {scenario}: the hook logged `failing open` naming container {ctr.id[:12]}"
          + (f", its group {ctr.group}" if reason == "lock_timeout" else "") + f" and the reason ({len(lines)} lines)",
          bool(named), "\n".join(lines) or hook_lines(mark, ctr.id)[-6:])
    rc, report, raw = audit(route.hook, config)
    rows = escaped(report, ctr.id) if report is not None else []
    note(f"{R}: {scenario}: audit --json{' --config <valid copy>' if config else ''}: exit {rc}"
         + (f", cache: {report['cache_error']}" if isinstance(report, dict) and report.get("cache_error") else "")
         + ", rows " + json.dumps([{k: v.get(k) for k in ('rule', 'container', 'group', 'pid', 'have')} for v in rules(report)])[:900])
    check(f"{R}: {scenario}: `audit --json` names it (rule escaped, group {ctr.group}) and exits 1",
          rc == 1 and any(v.get("group") == ctr.group for v in rows), raw[-1500:])
    after = fail_open(metrics(route.hook, config))
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in sorted(set(before) | set(after) | {reason})}
    note(f"{R}: {scenario}: oci_coresched_hook_fail_open_total by reason: {after}; rose by {delta}")
    missing = [k for k in REASONS if k not in after]
    if missing:
        note(f"{R}: {scenario}: reasons not on the page: {missing}")
    check(f"{R}: {scenario}: `metrics`: oci_coresched_hook_fail_open_total{{reason=\"{reason}\"}} rose "
          f"({before.get(reason)} -> {after.get(reason)}), no other reason did",
          reason in before and delta[reason] >= 1 and all(v == 0 for k, v in delta.items() if k != reason), after)


def healed(route, watch, ctr, scenario, cause, since, want, other):
    """(e) the init and an exec'd process with the group's cookie (WANT, or the one the heal gives
    when None), the latency recorded; (f) never the other tenant's. Returns the cookie."""
    R = route.name
    got, secs, reads = wait_healed(watch, ctr, since)
    group, cached = cache_row(route.hook, ctr.id)
    note(f"{R}: {scenario}: init {ctr.pid} holds {got} ({reads} reads); the cache has it in {group} with {cached}")
    if want is None and got != "0x0":
        want = got  # the group's first member: the heal made its cookie
    check(f"{R}: {scenario}: healed: its init holds its group's cookie {want or '(none: not healed)'}, the cache's for "
          f"{ctr.group} ({got})",
          got != "0x0" and same(got, want) and group == ctr.group and same(cached, want),
          f"init {got}, cache {group} {cached}, want {want}; the follower's last lines:\n"
          + "\n".join(route.follower_log().splitlines()[-12:]))
    extra = "-"
    if got != "0x0":
        t0 = time.monotonic()
        rc, line = route.exec_probe(ctr)
        m = PROBE_LINE.search(line)
        if m:
            watch.seen.setdefault(f"{ctr.key} exec", set()).add(m.group(3))
        extra = f"{line} ({time.monotonic() - t0:.1f} s for the exec)"
        check(f"{R}: {scenario}: a process exec'd into it after the heal holds the group's cookie {want} ({line})",
              rc == 0 and m is not None and same(m.group(3), want), f"exit {rc}: {line!r}")
        shim = route.shim(ctr)
        if shim is not None:
            have = []
            wait_for(lambda: have.append(read_cookie(shim)) or same(have[-1], want), 30, 0.5)
            check(f"{R}: {scenario}: the heal gave the pod's shim (pid {shim}) the group's cookie too ({have[-1]})",
                  same(have[-1], want), have[-5:])
    record(R, scenario, cause, secs, reads, extra)
    now = read_cookie(other.pid)
    bad_reads = {what: sorted(s) for what, s in watch.seen.items() if other.cookie in s}
    check(f"{R}: {scenario}: the other tenant ({other.group}) keeps its cookie {other.cookie} ({now}), and no reading of "
          f"the escaped containers or their exec'd processes ever showed it",
          now == other.cookie and not bad_reads and not same(want, other.cookie), f"{bad_reads}, other now {now}")
    return want


def audit_clean(route, scenario):
    """(g) `audit` exits 0 (the follower's sweep may still be converging: polled, generously)."""
    got = {}

    def clean():
        got["r"] = audit(route.hook)
        return got["r"][0] == 0

    wait_for(clean, 60, 2)
    rc, report, raw = got["r"]
    check(f"{route.name}: {scenario}: afterwards `audit` is clean (exit {rc})", rc == 0, raw[-1500:])


def lock_scenario(route, watch, namespace, group, other, want):
    """The state lock held through the container's createRuntime and poststart, and through the
    audit and the count; its release is the cause's end. The follower runs throughout."""
    R, scenario = route.name, "lock held through createRuntime and poststart"
    check(f"{R}: {scenario}: the follower runs throughout, as deployed", route.follower_alive())
    page = metrics(route.hook)
    before, healed0 = fail_open(page), sample(page, "oci_coresched_hook_follow_escapes_healed_total") or 0
    prepared = route.prepare("e1", namespace, group)
    mark, fmark = log_mark(), len(route.follower_log())
    with LockHeld(LOCK) as held:
        t0 = time.monotonic()
        ctr = route.start(prepared)
        started = time.monotonic() - t0
        at_start = watch.read(ctr.key, ctr.pid)
        note(f"{R}: {scenario}: container {ctr.id[:12]} (init {ctr.pid}) started in {started:.1f} s with the lock held "
             f"by flock (pid {held.proc.pid})")
        check(f"{R}: {scenario}: its hooks failed open: the container runs, at cookie 0 ({at_start})", at_start == "0x0", at_start)
        seen_and_counted(route, ctr, scenario, "lock_timeout", before, mark)
        holders = lock_holders(LOCK)
        check(f"{R}: {scenario}: flock held the lock throughout (the container's start, the audit, the count)",
              holders == [held.proc.pid], holders)
        held.release()
    since = held.released_at
    note(f"{R}: {scenario}: the lock released after {held.released_at - held.held_at:.1f} s")
    tried = [line for line in route.follower_log()[fmark:].splitlines() if ctr.id in line]
    for line in tried[:3]:
        note(f"{R}: {scenario}: follower, while the lock was held: {line[-400:]}")
    want = healed(route, watch, ctr, scenario, "the state lock's release (flock killed)", since, want, other)
    # The page is rewritten every 10 s and in the turn that heals, after that turn's audit: a page
    # that counts the heal shows the audit run after it. That audit may not have run (the lock is
    # busy just after its release: audit_up 0); the next sweep's, a minute later, then is the one.
    ok, v, page = follower_page(route, "oci_coresched_hook_follow_escapes_healed_total", lambda v: v > healed0,
                                HEAL_TIMEOUT, lambda page: sample(page, "oci_coresched_hook_audit_up") == 1)
    check(f"{R}: {scenario}: the follower's page counts the heal (oci_coresched_hook_follow_escapes_healed_total "
          f"{healed0} -> {v}) beside an audit run after it", ok, page_lines(page))
    up = sample(page, "oci_coresched_hook_audit_up")
    escaped_now, violations = sample(page, "oci_coresched_hook_escaped_containers"), sample(page, "oci_coresched_hook_audit_violations")
    check(f"{R}: {scenario}: the same page: audit_up {up}, oci_coresched_hook_escaped_containers {escaped_now}, "
          f"audit_violations {violations}", ok and up == 1 and escaped_now == 0 and violations == 0, page_lines(page))
    audit_clean(route, scenario)
    return ctr, want


def config_scenario(route, watch, namespace, group, other, want):
    """/etc/oci-coresched-hook/config.toml invalid while the container starts; the follower runs."""
    R, scenario = route.name, "invalid config"
    with open(route.config, "rb") as f:
        saved = f.read()
    valid = f"{OUT}/config.valid.toml"
    os.makedirs(OUT, exist_ok=True)
    with open(valid, "wb") as f:
        f.write(saved)
    check(f"{R}: the follower runs through this scenario", route.follower_alive())
    page = metrics(route.hook)
    before, healed0 = fail_open(page), sample(page, "oci_coresched_hook_follow_escapes_healed_total")
    prepared = route.prepare("e2", namespace, group)
    fmark = len(route.follower_log())
    mark = log_mark()
    try:
        write_config(route.config, saved + INVALID)
        t_invalid = time.monotonic()
        r = hook_cmd(route.hook, "audit")
        note(f"{R}: {scenario}: plain `audit` with the invalid config: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        ctr = route.start(prepared)
        at_start = watch.read(ctr.key, ctr.pid)
        check(f"{R}: {scenario}: its hooks failed open: the container runs, at cookie 0 ({at_start})", at_start == "0x0", at_start)
        named = []

        def noticed():
            named[:] = [line for line in route.follower_log()[fmark:].splitlines() if route.config in line]
            return bool(named)

        wait_for(noticed, 60)
        # Four of its 2 s scans more with the file still invalid: nothing may heal meanwhile.
        time.sleep(8)
        noticed()
        held_at = watch.read(ctr.key, ctr.pid)
        for line in named[:3]:
            note(f"{R}: {scenario}: follower: {line[-400:]}")
        check(f"{R}: {scenario}: the running follower logged one line naming {route.config} "
              f"({len(named)} in the {time.monotonic() - t_invalid:.0f} s the file was invalid)",
              len(named) == 1, route.follower_log()[fmark:][-1500:])
        check(f"{R}: {scenario}: while the file is invalid the follower heals nothing: still at cookie 0 ({held_at})",
              held_at == "0x0", held_at)
        seen_and_counted(route, ctr, scenario, "config", before, mark, config=valid)
    finally:
        write_config(route.config, saved)
        since = time.monotonic()
    with open(route.config, "rb") as f:
        check(f"{R}: {scenario}: {route.config} restored byte for byte", f.read() == saved)
    want = healed(route, watch, ctr, scenario, "the valid config renamed back into place", since, want, other)
    ok, v, page = follower_page(route, "oci_coresched_hook_follow_escapes_healed_total",
                                lambda v: v > (healed0 or 0))
    check(f"{R}: {scenario}: the follower's page counts the heal (oci_coresched_hook_follow_escapes_healed_total "
          f"{healed0} -> {v})", ok, page_lines(page))
    audit_clean(route, scenario)
    return ctr, want


def run_route(route, namespace, group, other, want=None):
    """Both scenarios on ROUTE: containers of NAMESPACE/GROUP escape while OTHER (a Ctr of another
    tenant with .cookie, running) keeps its cookie. WANT: the group's cookie when a member already
    holds it, else None (the first escaped container's heal makes it)."""
    watch = Watch()
    e1, want = lock_scenario(route, watch, namespace, group, other, want)
    e2, want2 = config_scenario(route, watch, namespace, group, other, want)
    check(f"{route.name}: both escaped containers of {e1.group} ended on one cookie ({want}, {want2}), "
          f"not the other tenant's ({other.cookie})", same(want, want2) and not same(want, other.cookie))
    return e1, e2


def other_tenant(route, group):
    """A container of tenant-b's GROUP started normally (lock free, config valid): the other tenant."""
    o = route.start(route.prepare("o1", "tenant-b", group))
    o.cookie = read_cookie(o.pid)
    note(f"{route.name}: the other tenant's container {o.id[:12]} ({o.group}) holds {o.cookie}")
    if o.cookie == "0x0":
        raise RuntimeError(f"{route.name}: the other tenant's container {o.id[:12]} got no cookie: nothing to compare with")
    return o


def guarded(route, body):
    """BODY(): a crash is a failure with its cause; the route's containers are removed."""
    try:
        body()
    except Exception as e:
        import traceback

        bad(f"{route.name}: escape scenarios aborted: {type(e).__name__}: {e}", traceback.format_exc())
    finally:
        route.close()


def podman_route():
    r = run(["sh", "-c", f"rm -rf {ROOTFS} && mkdir -p {ROOTFS} && tar -xf /run/xchg/in/rootfs.tar -C {ROOTFS}"])
    if r.returncode != 0:
        bad("podman: cannot unpack the rootfs", r.stderr)
        return
    route = PodmanRoute()
    guarded(route, lambda: run_route(route, "tenant-a", "esc", other_tenant(route, "esc")))


def nri_route(cri):
    r = run(["systemctl", "restart", sd.NRI_UNIT])
    registered = wait_for(lambda: "registered as NRI plugin" in sd.unit_log(sd.NRI_UNIT), 120)
    check(f"systemctl restart {sd.NRI_UNIT}: the plugin registers with containerd", r.returncode == 0 and registered,
          r.stderr + sd.unit_log(sd.NRI_UNIT)[-1500:])
    route = NriRoute(cri, "runc", sd.RESOURCES["burstable"])
    guarded(route, lambda: run_route(route, "tenant-a", "esc", other_tenant(route, "esc")))


def main():
    gen = sys.argv[1]
    os.makedirs(OUT, exist_ok=True)
    with open(CONFIG, "rb") as f:
        config = f.read()
    was = {u: sd.show(u, "ActiveState")["ActiveState"] for u in (sd.NRI_UNIT, sd.FOLLOW_UNIT)}
    note("before this part: " + ", ".join(f"{u} {s}" for u, s in was.items()))
    cri = sd.SystemdCri(sd.load_pb(gen))
    try:
        run(["systemctl", "start", sd.FOLLOW_UNIT])
        podman_route()
        nri_route(cri)
    finally:
        with open(CONFIG, "rb") as f:
            if f.read() != config:
                write_config(CONFIG, config)
                bad(f"{CONFIG} was left changed by a scenario; restored")
        if os.path.exists(LOCK) and lock_holders(LOCK):
            note(f"the state lock is held at the end by {lock_holders(LOCK)}")
        for unit, state in was.items():  # as this part found them
            run(["systemctl", "start" if state == "active" else "stop", unit])
        # A gc run that the timer started while a scenario held the lock or broke the config
        # failed, as it must: said here, and its failed state reset so that later parts see the
        # unit as they left it.
        gc = "oci-coresched-hook-gc.service"
        if sd.show(gc, "ActiveState")["ActiveState"] == "failed":
            note(f"{gc} failed during the scenarios (a gc run met the held lock or the invalid config); reset")
            run(["systemctl", "reset-failed", gc])
    print(f"escape: {base.PASS} passed, {base.FAIL} failed", flush=True)
    return 1 if base.FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
