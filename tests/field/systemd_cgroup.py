#!/usr/bin/env python3
# Field tier, inside the Debian 13 guest with systemd as PID 1: containers under kubelet's systemd
# cgroup driver (kubeadm's default). guest.sh has started containerd.service (Debian's unit) with
# the installed config-1.7-nri.toml plus tests/field/containerd-systemd-test.toml: its runc and
# crun handlers run with `SystemdCgroup = true`. The hook is wired by the packaged NRI plugin unit
# (oci-coresched-hook-nri.service, started here with systemctl); one pod runs through the
# base_runtime_spec route instead, before the plugin starts. Pods get kubelet's systemd cgroup
# parents (kubepods-besteffort-pod<uid>.slice, kubepods-burstable-pod<uid>.slice, Guaranteed
# kubepods-pod<uid>.slice; the uid's dashes as underscores, as kubelet escapes them) and the
# resources kubelet gives each QoS class, so each container's linux.cgroupsPath is
# SLICE:cri-containerd:ID and its cgroup the systemd scope
# /kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice/cri-containerd-<id>.scope.
#
# Asserted (cookies read with util-linux `coresched get -s PID`, cross-checked with the hook's
# `inspect`): groups, namespaces and policies as under cgroupfs; the QoS class the hook derives
# from the systemd-form cgroupsPath (its `decision` log line) for a BestEffort, a Burstable and a
# Guaranteed pod; `reconcile` and the follower (the packaged reconcile unit) finding members
# inside scopes (a moved process; runc exec, crun exec, CRI ExecSync); cpu.idle = 1 in each
# BestEffort container's scope (the cgroup systemd owns, which competes with its siblings) at
# start and again after each operation that could make systemd or the runtime re-apply the
# unit's attributes: daemon-reload, set-property on the pod slice, on kubepods-besteffort.slice
# and on the scope itself, and CRI UpdateContainerResources (which must succeed).
# Printed as # lines: the cgroup files and the units' properties after each of those operations.
#
#   systemd_cgroup.py GEN_DIR          prints TAP lines and a summary line
"""containerd with kubelet's systemd cgroup driver: scenarios of the field tier."""

import json
import os
import re
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cri as base  # noqa: E402  (the CRI client, coresched reader, TAP counters)

from cri import G, P, bad, cached, check, coresched, note, run, wait_for  # noqa: E402

X = "/run/xchg"
CONTAINERD = "containerd.service"
NRI_UNIT = "oci-coresched-hook-nri.service"
FOLLOW_UNIT = "oci-coresched-hook-reconcile.service"
# The runc shim's --root for CRI's namespace; crun run by the same shim (BinaryName) keeps its
# state there too.
STATE_ROOT = "/run/containerd/runc/k8s.io"
CGROOT = "/sys/fs/cgroup"
HOOK_LOG = f"{X}/hook.log"
PROBE = "/usr/bin/exec-window"
UID_NS = uuid.UUID("8f0c6f1e-5b0a-4c55-9d1e-6c0a2f8b7d31")  # pod uids: uuid5(UID_NS, pod name)
KQOS = "koordinator.sh/qosClass"
# After an operation that re-applies a unit's attributes, how long cpu.idle may take to be 1 again
# (whatever puts it back: systemd itself, or the follower).
IDLE_SETTLE = 10
MI = 1024 * 1024


def sh(*argv, timeout=180):
    """Runs argv; its stdout, or RuntimeError with its output when it fails."""
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: {(r.stdout + r.stderr).strip()[-1500:]}")
    return r.stdout


def show(unit, *props):
    """`systemctl show -p ... UNIT` as a dict."""
    out = run(["systemctl", "show", unit] + [f"-p{p}" for p in props]).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def unit_log(unit):
    """The journal of the unit's current invocation (its stdout and stderr)."""
    inv = show(unit, "InvocationID").get("InvocationID", "")
    if not inv:
        return ""
    return run(["journalctl", "--no-pager", "-o", "cat", f"_SYSTEMD_INVOCATION_ID={inv}"]).stdout


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        return f"<{e.strerror}>"


def proc_cgroup(pid):
    for line in read(f"/proc/{pid}/cgroup").splitlines():
        if line.startswith("0::"):
            return line[3:]
    return ""


def kubelet_slice(uid, qos):
    """kubelet's systemd driver: the pod's slice, from its uid and QoS class ("" = Guaranteed)."""
    esc = uid.replace("-", "_")
    return f"kubepods-{qos}-pod{esc}.slice" if qos else f"kubepods-pod{esc}.slice"


def slice_path(name):
    """The cgroup of a slice: its dash-separated prefixes are its parents."""
    parts = name[: -len(".slice")].split("-")
    return "/" + "/".join("-".join(parts[: i + 1]) + ".slice" for i in range(len(parts)))


# The resources kubelet gives a container of each QoS class: BestEffort none (cpu shares 2),
# Burstable a 100m cpu request, Guaranteed 1 cpu and 128 MiB as requests and limits.
RESOURCES = {
    "besteffort": dict(cpu_shares=2, cpu_period=100000),
    "burstable": dict(cpu_shares=102, cpu_period=100000),
    "": dict(cpu_shares=1024, cpu_quota=100000, cpu_period=100000, memory_limit_in_bytes=128 * MI),
}


class SystemdCri(base.Cri):
    """cri.py's client with kubelet's systemd-driver cgroup parents and kubelet's resources."""

    def pod_uid(self, name):
        return str(uuid.uuid5(UID_NS, name))

    def cgroup_parent(self, uid, qos):
        return kubelet_slice(uid, qos)

    def spec(self, cid):
        """The OCI spec containerd generated for the container (ContainerStatus, verbose)."""
        return json.loads(self.status(cid).info.get("info", "{}")).get("runtimeSpec", {})

    def update(self, cid, resources):
        pb = self.pb
        req = pb.UpdateContainerResourcesRequest(container_id=cid, linux=pb.LinuxContainerResources(**resources))
        self.call("UpdateContainerResources", req, pb.UpdateContainerResourcesResponse)

    def exec_sync(self, cid, cmd):
        pb = self.pb
        r = self.call("ExecSync", pb.ExecSyncRequest(container_id=cid, cmd=cmd, timeout=60), pb.ExecSyncResponse, timeout=120)
        return r.exit_code, r.stdout.decode(errors="replace").strip(), r.stderr.decode(errors="replace").strip()


def decisions(cid):
    """The hook's `decision {...}` log lines for container CID (all stages), parsed."""
    out = []
    for line in read(HOOK_LOG).splitlines():
        m = re.search(r" decision (\{.*\})$", line)
        if m and f'"container_id":"{cid}"' in m.group(1):
            out.append(json.loads(m.group(1)))
    return out


def load_pb(gen):
    """CRI's api_pb2 from GEN_DIR (compiled there by cri.py earlier in the boot), else compiled."""
    if os.path.exists(os.path.join(gen, "api_pb2.py")):
        sys.path.insert(0, gen)
        import api_pb2

        return api_pb2
    return base.compile_proto(gen)


def scenarios(cri, pods):
    ctrs, slices, handlers = {}, {}, {}

    def pod(key, namespace, qos, handler, annotations):
        t0 = time.monotonic()
        sb = cri.sandbox_config(f"sd-{key}", namespace, annotations, qos)
        pods[key] = (cri.run_pod(sb, handler), sb, qos)
        slices[key], handlers[key] = sb.linux.cgroup_parent, handler
        note(f"pod {namespace}/sd-{key} running ({time.monotonic() - t0:.1f} s, handler {handler}, cgroup parent {slices[key]})")

    def container(pod_key, name, annotations=None, command=None):
        pod_id, sb, qos = pods[pod_key]
        t0 = time.monotonic()
        cid = cri.create(pod_id, sb, name, command or ["/bin/sleep", "3600"], annotations, resources=RESOURCES[qos])
        cri.start(cid)
        ctrs[f"{pod_key}/{name}"] = cid
        note(f"container sd-{pod_key}/{name} started ({time.monotonic() - t0:.1f} s)")

    def scope(key):
        """The cgroup kubelet's systemd driver gives container KEY."""
        return f"{slice_path(slices[key.split('/')[0]])}/cri-containerd-{ctrs[key]}.scope"

    def cookie(key):
        return coresched(cri.pid(ctrs[key]))

    # 0. containerd.service runs with the systemd driver and NRI on (guest.sh wrote its config);
    # the NRI plugin and the follower are stopped until their steps.
    note(f"{CONTAINERD}: MainPID {show(CONTAINERD, 'MainPID')['MainPID']}, {run(['containerd', '--version']).stdout.strip()}")
    sh("systemctl", "stop", NRI_UNIT, FOLLOW_UNIT)

    # 1. The base_runtime_spec route (hooks from the base spec, annotations by pod_annotations):
    # its pod runs before the NRI plugin is started.
    pod("spec", "tenant-a", "burstable", "runc-spec", {G: "web"})
    container("spec", "web")

    # 2. The packaged NRI plugin unit: the wiring of every other pod.
    t0 = time.monotonic()
    sh("systemctl", "start", NRI_UNIT)
    registered = wait_for(lambda: "registered as NRI plugin" in unit_log(NRI_UNIT), 120)
    check(f"systemctl start {NRI_UNIT}: the plugin registers with containerd", registered, unit_log(NRI_UNIT)[-1500:])
    note(f"NRI plugin registered {time.monotonic() - t0:.1f} s after systemctl start")

    pod("bu", "tenant-a", "burstable", "runc", {G: "web"})
    container("bu", "web")
    container("bu", "none", annotations={P: "none"})
    container("bu", "excl", annotations={P: "exclusive"})
    pod("gu", "tenant-a", "", "crun", {G: "web"})
    container("gu", "web")
    pod("be", "tenant-b", "besteffort", "runc", {G: "web"})
    container("be", "web")
    # koordinator.sh/qosClass on the container: the LS rule, so tenant-b's plain "web" group.
    container("be", "ls", annotations={KQOS: "LS"})
    pod("bec", "tenant-b", "besteffort", "crun", {G: "web"})
    container("bec", "web")

    # Where the containers are: systemd scopes under kubelet's slices, systemd-form cgroupsPath.
    # crun, under the systemd driver, runs the init in a child cgroup of the scope: "container".
    wrong = []
    for key, cid in ctrs.items():
        slice_ = slices[key.split("/")[0]]
        path = cri.spec(cid).get("linux", {}).get("cgroupsPath", "")
        unit = show(f"cri-containerd-{cid}.scope", "ControlGroup", "Slice", "ActiveState")
        have = (path, proc_cgroup(cri.pid(cid)), unit.get("ControlGroup"), unit.get("Slice"), unit.get("ActiveState"))
        leaf = scope(key) + ("/container" if handlers[key.split("/")[0]] == "crun" else "")
        want = (f"{slice_}:cri-containerd:{cid}", leaf, scope(key), slice_, "active")
        if have != want:
            wrong.append(f"{key}: {have} != {want}")
    note(f"e.g. sd-be/web: cgroupsPath {slices['be']}:cri-containerd:{ctrs['be/web'][:12]}..., cgroup {scope('be/web')}")
    check(
        "every container: cgroupsPath SLICE:cri-containerd:ID, its init in the systemd scope cri-containerd-ID.scope"
        " under kubelet's pod slice (crun: in the scope's child cgroup 'container')",
        not wrong,
        "\n".join(wrong),
    )

    # 3. Groups, namespaces, policies.
    c = {k: cookie(k) for k in ctrs}
    note("cookies (coresched): " + ", ".join(f"{k}={v}" for k, v in c.items()))
    cache = cached()
    note("cached groups: " + ", ".join(f"{k}={cache.get(v, '-')}" for k, v in ctrs.items()))
    web = c["bu/web"]
    check("systemd driver, NRI: a Burstable runc pod's container has its group's cookie", web != "0x0", c)
    check("two pods naming one group share a cookie: a Guaranteed pod under crun joins the Burstable runc pod", c["gu/web"] == web, c)
    check("the base_runtime_spec route under the systemd driver: its pod joins the group's cookie", c["spec/web"] == web, c)
    check("the same group name in another namespace (tenant-b, LS) is another cookie", c["be/ls"] not in (web, "0x0"), c)
    check("policy none: cookie 0", c["bu/none"] == "0x0", c)
    others = {v for k, v in c.items() if k != "bu/excl"}
    check("policy exclusive: a cookie of its own", c["bu/excl"] not in others | {"0x0"}, c)
    be = c["be/web"]
    check("BestEffort pods (runc and crun) of one group share the expeller group's cookie", be not in ("0x0", web, c["be/ls"]) and c["bec/web"] == be, c)
    want_groups = {
        "bu/web": "tenant-a/web",
        "gu/web": "tenant-a/web",
        "spec/web": "tenant-a/web",
        "be/ls": "tenant-b/web",
        "be/web": "tenant-b/web-expeller",
        "bec/web": "tenant-b/web-expeller",
    }
    have_groups = {k: cache.get(ctrs[k]) for k in want_groups}
    check("the cache keys groups by namespace and QoS rule (tenant-a/web, tenant-b/web, tenant-b/web-expeller)", have_groups == want_groups, have_groups)
    sb = coresched(cri.sandbox_pid(pods["bu"][0]))
    check("the pod sandbox (pause) container, in its own scope, keeps cookie 0", sb == "0x0", sb)

    # 4. The QoS class from the systemd-form cgroupsPath, as the hook's decision line shows it.
    def decided(key):
        d = [x for x in decisions(ctrs[key]) if x.get("action") == "ensure"]
        return d[0] if d else {}

    for key, rt in (("be/web", "runc"), ("bec/web", "crun")):
        d = decided(key)
        check(
            f"BestEffort pod ({rt}, cgroupsPath kubepods-besteffort-pod<uid>.slice:cri-containerd:ID): decision qos BE, group tenant-b/web-expeller, sched_idle",
            (d.get("qos"), d.get("group"), d.get("sched_idle")) == ("BE", "tenant-b/web-expeller", True),
            d,
        )
    d = decided("bu/web")
    check(
        "Burstable pod (kubepods-burstable-pod<uid>.slice): decision qos LS, group tenant-a/web, no sched_idle",
        (d.get("qos"), d.get("group"), d.get("sched_idle")) == ("LS", "tenant-a/web", False) and "Guaranteed" not in d.get("reason", ""),
        d,
    )
    d = decided("gu/web")
    check(
        "Guaranteed pod (kubepods-pod<uid>.slice): decision qos LS with the Guaranteed reason, group tenant-a/web",
        (d.get("qos"), d.get("group"), d.get("sched_idle")) == ("LS", "tenant-a/web", False) and "Guaranteed pod" in d.get("reason", ""),
        d,
    )

    # 5. cpu.idle in the BestEffort containers' scopes: the cgroup systemd owns, the one that
    # competes with its siblings in the pod slice.
    idle_keys = {"be/web": "runc", "bec/web": "crun"}

    def snap(label):
        """cpu.idle of each BestEffort scope; their files and units' properties as a note."""
        parts, idle = [], {}
        for key in idle_keys:
            s, pod_slice = scope(key), slices[key.split("/")[0]]
            idle[key] = read(f"{CGROOT}{s}/cpu.idle")
            inner = f" (its child 'container': cpu.idle={read(f'{CGROOT}{s}/container/cpu.idle')})" if os.path.isdir(f"{CGROOT}{s}/container") else ""
            su = show(f"cri-containerd-{ctrs[key]}.scope", "CPUWeight", "MemoryHigh")
            pu = show(pod_slice, "CPUWeight", "MemoryHigh")
            parts.append(
                f"{key}: scope cpu.idle={idle[key]} cpu.weight={read(f'{CGROOT}{s}/cpu.weight')}{inner} unit CPUWeight={su.get('CPUWeight')} "
                f"MemoryHigh={su.get('MemoryHigh')}; pod slice cpu.idle={read(f'{CGROOT}{slice_path(pod_slice)}/cpu.idle')} "
                f"cpu.weight={read(f'{CGROOT}{slice_path(pod_slice)}/cpu.weight')} unit CPUWeight={pu.get('CPUWeight')} MemoryHigh={pu.get('MemoryHigh')}"
            )
        note(f"{label}: " + " | ".join(parts))
        return idle

    def snap_quiet():
        return {key: read(f"{CGROOT}{scope(key)}/cpu.idle") for key in idle_keys}

    idle = snap("after start")
    for key, rt in idle_keys.items():
        check(f"BestEffort ({rt}): sched_idle wrote cpu.idle = 1 into the container's scope {scope(key)}", idle[key] == "1", idle[key])

    # 6. reconcile and the follower inside scopes. A host process moved into a container's scope
    # (no exec, no fork there) has cookie 0 until `reconcile` gives it the group's (the follower
    # is stopped here: its sweep would fix it too).
    mover = subprocess.Popen(["/bin/sleep", "600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        with open(f"{CGROOT}{scope('bu/web')}/cgroup.procs", "w") as f:
            f.write(str(mover.pid))
        moved_to = proc_cgroup(mover.pid)
        before = coresched(mover.pid)
        check(f"a process moved into {scope('bu/web')} without an exec has cookie 0", before == "0x0" and moved_to == scope("bu/web"), f"{before} in {moved_to}")
        r = run([base.HOOK, "reconcile"])
        note("reconcile: " + (r.stdout + r.stderr).strip().replace("\n", " | ")[-600:])
        after = coresched(mover.pid)
        check("oci-coresched-hook reconcile gives the moved process its group's cookie", r.returncode == 0 and after == web, f"exit {r.returncode}, {after} (want {web})")
    finally:
        mover.kill()
        mover.wait()

    t0 = time.monotonic()
    sh("systemctl", "start", FOLLOW_UNIT)
    following = wait_for(lambda: "following process events" in unit_log(FOLLOW_UNIT), 90)
    check(f"systemctl start {FOLLOW_UNIT}: the follower listens to process events", following, unit_log(FOLLOW_UNIT)[-1500:])
    note(f"follower up {time.monotonic() - t0:.1f} s after systemctl start")

    def exec_detached(runtime, key):
        """`<runtime> --root STATE_ROOT exec -d ID sleep`: the new process in the container's
        cgroup. Its stdio is /dev/null (a detached process keeps the caller's: a pipe would stay
        open)."""
        procs = f"{CGROOT}{proc_cgroup(cri.pid(ctrs[key]))}/cgroup.procs"
        old = set(read(procs).split())
        errlog = f"{X}/systemd-{runtime}-exec.stderr"
        with open(errlog, "w") as err:
            r = subprocess.run(
                [runtime, "--root", STATE_ROOT, "exec", "-d", ctrs[key], "/bin/sleep", "300"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, timeout=120,
            )
        if r.returncode != 0:
            raise RuntimeError(f"{runtime} exec -d {ctrs[key]}: exit {r.returncode}: {read(errlog)[-800:]}")
        new = set()
        wait_for(lambda: bool(new.update(set(read(procs).split()) - old) or new), 30, 0.2)
        if not new:
            raise RuntimeError(f"{runtime} exec -d: no new process in {procs}")
        return int(sorted(new)[0])

    for runtime, key in (("runc", "bu/web"), ("crun", "bec/web")):
        want = c[key]
        pid = exec_detached(runtime, key)
        got = [coresched(pid)]
        wait_for(lambda: got.append(coresched(pid)) or got[-1] == want, 10, 0.2)
        check(
            f"{runtime} exec (--root {STATE_ROOT}) into a scope-ed container: the exec'd process gets its group's cookie",
            got[-1] == want,
            f"pid {pid} in {proc_cgroup(pid)}: {got[-1]} (want {want})",
        )
    for key in ("be/web", "gu/web"):
        rc, out, err = cri.exec_sync(ctrs[key], [PROBE])
        note(f"CRI ExecSync {PROBE} in {key}: exit {rc}: {out} {err}")
        check(f"CRI ExecSync into a scope-ed container ({key}): the exec'd probe reads its group's cookie", rc == 0 and out.endswith(f"cookie={c[key]}"), f"{out} {err} (want {c[key]})")

    # 7. What makes systemd or the runtime re-apply a unit's attributes, with the follower
    # running as on a node: after each, cpu.idle must be 1 again within IDLE_SETTLE seconds.
    # A value lost is put back by hand, so that each operation is judged on its own.
    def update_all():
        for key, rt in idle_keys.items():
            error = None
            try:
                cri.update(ctrs[key], RESOURCES["besteffort"])
            except cri.grpc.RpcError as e:
                error = e.details()
            check(f"BestEffort ({rt}): CRI UpdateContainerResources succeeds", error is None, error)

    pod_slices = sorted({slices[k.split("/")[0]] for k in idle_keys})
    ops = [
        ("systemctl daemon-reload", lambda: sh("systemctl", "daemon-reload")),
        ("systemctl set-property --runtime POD-SLICE CPUWeight=1", lambda: [sh("systemctl", "set-property", "--runtime", s, "CPUWeight=1") for s in pod_slices]),
        ("systemctl set-property --runtime POD-SLICE MemoryHigh=1G", lambda: [sh("systemctl", "set-property", "--runtime", s, "MemoryHigh=1G") for s in pod_slices]),
        (
            "systemctl set-property --runtime kubepods-besteffort.slice CPUWeight=1 (kubelet's QoS-class update)",
            lambda: sh("systemctl", "set-property", "--runtime", "kubepods-besteffort.slice", "CPUWeight=1"),
        ),
        (
            "systemctl set-property --runtime SCOPE MemoryHigh=1G (a property of the container's own unit)",
            lambda: [sh("systemctl", "set-property", "--runtime", f"cri-containerd-{ctrs[k]}.scope", "MemoryHigh=1G") for k in idle_keys],
        ),
        ("CRI UpdateContainerResources (cpu_shares 2, the runtime's update)", update_all),
    ]
    for label, op in ops:
        t0 = time.monotonic()
        op()
        spent = time.monotonic() - t0
        idle = {}
        wait_for(lambda: idle.update(snap_quiet()) or all(v == "1" for v in idle.values()), IDLE_SETTLE, 0.5)
        snap(f"after {label} ({spent:.1f} s)")
        for key, rt in idle_keys.items():
            check(f"BestEffort ({rt}): cpu.idle = 1 in the scope after {label}", idle[key] == "1", idle[key])
            if idle[key] != "1":
                with open(f"{CGROOT}{scope(key)}/cpu.idle", "w") as f:
                    f.write("1")

    # 8. Teardown as kubelet does: the NRI-injected and base-spec poststop forget every container.
    for key in list(pods):
        cri.remove_pod(pods.pop(key)[0])
    check("every pod removed: the cache holds no container", wait_for(lambda: not cached(), 60), cached())
    left = [s for s in ctrs if os.path.exists(f"{CGROOT}{scope(s)}")]
    note(f"scopes left after the pods' removal: {left or 'none'}")


def main():
    gen = sys.argv[1]
    t0 = time.monotonic()
    pb = load_pb(gen)
    note(f"CRI api.proto loaded in {time.monotonic() - t0:.1f} s")
    cri = SystemdCri(pb)
    pods = {}
    was = {u: show(u, "ActiveState")["ActiveState"] for u in (NRI_UNIT, FOLLOW_UNIT)}
    note("before this part: " + ", ".join(f"{u} {s}" for u, s in was.items()))
    try:
        scenarios(cri, pods)
    except Exception as e:  # a crash is a failure with its cause, never a silent pass
        import traceback

        bad(f"systemd cgroup driver scenarios aborted: {type(e).__name__}", traceback.format_exc())
    finally:
        for pod_id, _, _ in pods.values():  # left by an abort: no pod outlives this part
            try:
                cri.remove_pod(pod_id)
            except Exception as e:
                note(f"teardown: removing pod {pod_id[:12]}: {e}")
        with open(f"{X}/systemd-cgroup.journal", "w") as f:
            f.write(run(["journalctl", "-b", "--no-pager", "-u", CONTAINERD, "-u", NRI_UNIT, "-u", FOLLOW_UNIT]).stdout)
        for unit, state in was.items():  # as this part found them
            run(["systemctl", "start" if state == "active" else "stop", unit])
    per = {}
    for method, secs in cri.timings:
        per.setdefault(method, []).append(secs)
    note("CRI call times (s): " + ", ".join(f"{m} n={len(v)} max={max(v):.1f}" for m, v in per.items()))
    print(f"systemd-cgroup: {base.PASS} passed, {base.FAIL} failed", flush=True)
    return 1 if base.FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
