#!/usr/bin/env python3
# Field tier, inside the Debian 13 guest, after every other part: packaging/kubernetes/daemonset.yaml
# run as kubelet would run it. Kubelet and an API server are not available here (Debian packages
# neither): tests/field/kubelet.py is the project's own stand-in, which reads the manifest (the
# DaemonSet's pod template and its ConfigMap) and makes the CRI calls kubelet makes for it, so an
# edit to the manifest is what runs here. containerd runs with NRI enabled as
# packaging/containerd/config-1.7-nri.toml says, plus the field tier's test-only settings
# (tests/field/containerd-nri-test.toml), and nothing else is installed on the node: the .deb an
# earlier part installed is purged first. The image is the one `make package` builds
# (scripts/package.sh image), imported under the manifest's image name. Every cookie is read with
# util-linux `coresched get -s PID`.
#
# Scenarios: the install (files as the manifest says), tenant pods in two namespaces through the
# DaemonSet's NRI plugin, an ExecSync probe and a CRI Exec (kubectl exec's path) through its
# follower, co-run pairs on those tenant pods (tests/field/isolation.py: two tenants, one group, an
# exec'd recorder against another tenant), the plugin's container killed and restarted by
# "kubelet" with tenant pods started meanwhile (catch-up, then exec'd processes covered), tenant
# pods whose hook failed open (the state lock held, an invalid config on the node) seen by `audit`,
# counted by `metrics` and healed by the follow container (tests/field/escape.py), a rolling
# update to the previous release's manifest and image (tests/field/previous-release.sh builds them
# from this repository's history) and back to this release's, each with the tenants running
# (every tenant keeps its cookie, a new tenant pod joins its group, exec'd probes are covered by
# that release's follower), a chart upgrade to revision 2 of the release (a config value changed:
# the pod rolls by its checksum/config annotation) and the rollback to revision 1, with the same
# checks, `rebuild`, the cache lost and refilled (the containers the plugin caught up stay in the
# groups whose cookie they hold), `doctor` in the follow container (the node isolates while the
# tenants run through the plugin; with SMT turned off there is nothing to isolate, both pods stay
# ready and their pages say so), and the uninstall. Throughout, this release's DaemonSet
# containers (`nri`, `follow`) must be at cookie 0, also when `follow` was given a cookie by hand
# before the plugin restarts.
#
#   daemonset.py GEN_DIR MANIFEST IMAGE_TAR CORUN PREV_MANIFEST PREV_IMAGE_TAR
#                   CORUN: the co-run recorder on the node; PREV_*: the previous release's manifest
#                   and image; prints TAP lines and a summary line
"""The DaemonSet of packaging/kubernetes/, run as kubelet would run it, in the field tier."""

import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cri as base  # noqa: E402  (CRI client, TAP counters)
import escape as esc  # noqa: E402  (fail-open containers: seen, counted, healed)
import isolation as iso  # noqa: E402  (the co-run pairs)
import kubelet  # noqa: E402  (the kubelet stand-in)

from cri import G, bad, check, note, wait_for  # noqa: E402

X = "/run/xchg"
OUT = f"{X}/daemonset"
FIELD_IMAGE = base.IMAGE
FIELD_IMAGE_TAR = f"{X}/in/image.tar"
CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTAINERD_CONFIGS = [f"{CHECKOUT}/packaging/containerd/config-1.7-nri.toml", f"{CHECKOUT}/tests/field/containerd-nri-test.toml"]
STATE_DIR = "/run/oci-coresched-hook"
CONFIG_DIR = "/etc/oci-coresched-hook"
TASKS = "/run/containerd/io.containerd.runtime.v2.task/k8s.io"
PROBE = "/usr/bin/exec-window"
UNINSTALL_PATCH = f"{CHECKOUT}/packaging/kubernetes/uninstall-patch.json"
# Revision 2 of the chart's release (config.log_level=debug), rendered by scripts/helm.py on the
# host (`make chart`); revision 1 is the MANIFEST argument.
CHART_REVISION_2 = f"{CHECKOUT}/packaging/helm/field-revision-2.yaml"
POD_MONITOR = f"{CHECKOUT}/packaging/kubernetes/podmonitor.yaml"
# The node's address when the guest has no network device: on lo, where the pods bind their
# endpoints (status.podIP of a hostNetwork pod is the node's address).
NODE_ADDRESS = "10.0.2.15"
PACKAGE = "oci-coresched-hook"
SYSTEMD = os.path.isdir("/run/systemd/system")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def sample(text, name):
    """The value of the unlabelled sample `name` in Prometheus text, or None."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


# The cookie of a pid as util-linux coresched reads it ('0x...'); the package's `inspect` is gone
# from this node.
cookie = base.read_cookie


class Timer:
    def __init__(self):
        self.t0 = time.monotonic()
        self.phases = []

    def phase(self, name):
        now = time.monotonic()
        self.phases.append((name, now - self.t0))
        note(f"phase '{name}': {now - self.t0:.0f} s")
        self.t0 = now


# --- the node ----------------------------------------------------------------------------------


class Containerd:
    """Debian's containerd.service, as the node runs it (the guest's PID 1 is systemd)."""

    def restart(self):
        if not SYSTEMD:
            raise RuntimeError("this part runs containerd as containerd.service: the guest must boot systemd")
        r = run(["systemctl", "restart", "containerd"])
        if r.returncode != 0:
            raise RuntimeError(f"systemctl restart containerd: {r.stderr}{self.text()[-2000:]}")
        up = wait_for(lambda: run(["ctr", "version"]).returncode == 0, 60)
        if not up:
            raise RuntimeError(f"containerd does not answer: {self.text()[-2000:]}")
        if "failed to load plugin io.containerd.grpc.v1.cri" in self.text():
            raise RuntimeError("containerd's CRI plugin did not load")

    def text(self):
        """This run's journal of containerd.service."""
        inv = run(["systemctl", "show", "-p", "InvocationID", "--value", "containerd"]).stdout.strip()
        return run(["journalctl", "--no-pager", "-o", "cat", f"_SYSTEMD_INVOCATION_ID={inv}"]).stdout


def hook_processes():
    """Running processes whose executable is an oci-coresched-hook binary."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                exe = os.readlink(f"/proc/{d}/exe")
            except OSError:
                continue
            if os.path.basename(exe).startswith(PACKAGE):
                found.append(f"{d}:{exe}")
    return found


def clean_node():
    """Nothing of the hook on the node but what the DaemonSet installs: the .deb (installed by the
    field tier's setup for the other parts) is purged, with what the tier put beside it."""
    if run(["dpkg-query", "-W", "-f=${Status}", PACKAGE]).stdout.startswith("install ok"):
        r = run(["dpkg", "--purge", PACKAGE])
        if r.returncode != 0:
            raise RuntimeError(f"dpkg --purge {PACKAGE}: {r.stdout}{r.stderr}")
        note(f"removed the {PACKAGE} package an earlier part installed (dpkg --purge)")
    for path in ("/usr/lib/och-field", STATE_DIR, CONFIG_DIR):
        if os.path.lexists(path):
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
            note(f"removed {path} (left by an earlier part)")
    left = [p for p in ("/usr/bin/oci-coresched-hook", "/usr/local/bin/oci-coresched-hook",
                        "/usr/share/containers/oci/hooks.d/oci-coresched-hook.json",
                        "/etc/containers/oci/hooks.d/oci-coresched-hook.json") if os.path.lexists(p)]
    procs = hook_processes()
    units = run(["systemctl", "list-units", "--state=active", "--no-legend", "--plain", "oci-coresched-hook*"]).stdout.strip()
    check("before the DaemonSet: nothing of the hook on the node (no package, file, unit or process)",
          not left and not procs and not units, f"files {left}, processes {procs!r}, units {units!r}")


def import_image(tar, want):
    """`ctr images import` of an OCI archive into CRI's namespace; `want` is the name it must get."""
    r = run(["ctr", "-n", "k8s.io", "images", "import", "--snapshotter", "native", tar])
    if r.returncode != 0:
        raise RuntimeError(f"ctr images import {tar}: {r.stdout}{r.stderr}")
    names = run(["ctr", "-n", "k8s.io", "images", "ls", "-q"]).stdout.split()
    if want not in names:
        raise RuntimeError(f"{tar} imported as {r.stdout.strip()!r}, not as the manifest's image {want} (images: {names})")


def manifest_image(manifest):
    spec = manifest.template["spec"]
    images = {c["image"] for c in list(spec.get("initContainers") or []) + list(spec["containers"])}
    if len(images) != 1:
        raise RuntimeError(f"the pod template names more than one image: {sorted(images)}")
    return images.pop()


def config_map(manifest):
    for v in manifest.template["spec"]["volumes"]:
        if "configMap" in v:
            return v["configMap"]["name"]
    raise RuntimeError("the pod template has no configMap volume")


def env_of(container):
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


def injected(cid):
    """Whether the runtime's spec of container `cid` has the hook the plugin injects."""
    with open(f"{TASKS}/{cid}/config.json") as f:
        hooks = json.load(f).get("hooks") or {}
    return any(h.get("path") == HOOK[0] for h in hooks.get("createRuntime") or [])


def members():
    """Container id -> (group, cgroup) from the installed binary's `list --json`."""
    r = run([HOOK[0], "list", "--json"])
    if r.returncode != 0:
        raise RuntimeError(f"{HOOK[0]} list --json: exit {r.returncode}: {r.stderr}")
    return {m["id"]: (g["group"], m.get("cgroup")) for g in json.loads(r.stdout) for m in g["members"]
            if not m["id"].startswith("shim:")}


HOOK = [""]  # the installed binary (the manifest's HOOK_BIN_DIR), set in main


class DaemonSetRoute(esc.CriRoute):
    """tests/field/escape.py's scenarios on the DaemonSet: tenant pods of its own (esc-e1, esc-e2)
    wired by the hook its NRI plugin injects (run on the node by runc), the node's binary for
    `audit` and `metrics`, and its follow container as the follower. The escaped pods stay as
    tenants of the later scenarios (the rolling update, the uninstall)."""

    name = "DaemonSet (NRI plugin and follower in pods)"

    def __init__(self, s):
        super().__init__(s.cri)
        self.s, self.hook = s, HOOK[0]

    def started(self, key, pod_id, sb, cid):
        self.s.tenants[key] = (pod_id, sb)
        self.s.ctrs[key] = cid

    def close(self):
        kept = {pod_id for pod_id, _ in self.s.tenants.values()}
        self.pods[:] = [p for p in self.pods if p not in kept]  # a sandbox whose container never started
        super().close()

    def follower_alive(self):
        return self.cri.status(self.s.ds.containers["follow"].id).status.state == self.cri.pb.CONTAINER_RUNNING

    def follower_log(self):
        return self.s.ds.log("follow")


# --- the scenarios -----------------------------------------------------------------------------


class Scenarios:
    def __init__(self, cri, manifest, timer, containerd):
        self.cri, self.manifest, self.timer, self.containerd = cri, manifest, timer, containerd
        self.k = kubelet.Kubelet(cri)
        self.tenants = {}  # name -> (pod id, sandbox config)
        self.ctrs = {}  # "pod/container" -> id
        self.ds = None  # the running DaemonSet pod
        self.install = kubelet.container_named(manifest.template, "install")

    # DaemonSet pods

    def start_daemonset(self, manifest, what):
        t0 = time.monotonic()
        plan = kubelet.daemonset_pod(manifest)
        pod = self.k.run_pod(plan)
        note(f"{what}: pod {plan.namespace}/{plan.name} ({plan.qos}, cgroup parent "
             f"{kubelet.cgroup_parent(plan.qos, plan.uid)}) running in {time.monotonic() - t0:.0f} s")
        for line in pod.log("install").splitlines():
            note(f"  install: {line.split(' ', 3)[-1]}")
        self.ds = pod
        self.wait_plugin(what)
        return pod

    def wait_plugin(self, what, attempt=None):
        """The plugin registered and its catch-up done (its log, as `kubectl logs -c nri` shows it)."""
        def done():
            return re.search(r"catch-up done: .*", self.ds.log("nri", attempt))

        registered = wait_for(lambda: "registered as NRI plugin" in self.ds.log("nri", attempt), 120)
        check(f"{what}: the DaemonSet's NRI plugin registers with containerd", registered, self.ds.log("nri", attempt)[-1500:])
        if wait_for(done, 90):
            line = done().group(0)
            note(f"{what}: plugin: {line}")
            check(f"{what}: the plugin's catch-up had no failure", " 0 failed" in line, line)
        else:
            bad(f"{what}: the plugin's catch-up never finished", self.ds.log("nri", attempt)[-1500:])

    def pid(self, name, pod=None):
        return self.cri.pid((pod or self.ds).containers[name].id)

    def own_at_zero(self, what, cache=True):
        """B: the DaemonSet's long-running containers at cookie 0 and, unless `cache` is false, in
        no group of the hook's cache."""
        got = {n: cookie(self.pid(n)) for n in ("nri", "follow")}
        check(f"{what}: the DaemonSet's nri and follow containers are at cookie 0 (coresched: {got})",
              set(got.values()) == {"0x0"}, got)
        cached = members()
        own = {c.id: n for n, c in self.ds.containers.items()}
        rows = {own[k]: v for k, v in cached.items() if k in own}
        if cache:
            check(f"{what}: neither of them is in a group of the hook's cache", not rows, rows)
        elif rows:
            note(f"{what}: in the hook's cache: {rows}")

    # tenant pods (cri.py's kubelet-style configs, the field image)

    def tenant(self, name, namespace, cpu=None):
        """A tenant pod of group web; with CPU its process is a co-run recorder's loop on that CPU."""
        t0 = time.monotonic()
        sb = self.cri.sandbox_config(name, namespace, {G: "web"}, "burstable")
        pod_id = self.cri.run_pod(sb)
        self.tenants[name] = (pod_id, sb)
        if cpu is None:
            cid = self.cri.create(pod_id, sb, "app", ["/bin/sleep", "3600"])
        else:
            cid = self.cri.create(pod_id, sb, "app", iso.loop(f"ds-{name}", cpu), mounts=iso.pod_mounts(self.cri.pb))
        self.cri.start(cid)
        self.ctrs[name] = cid
        note(f"tenant pod {namespace}/{name} (group web) running in {time.monotonic() - t0:.0f} s")
        return cid

    def tcookie(self, name):
        return cookie(self.cri.pid(self.ctrs[name]))

    def exec_sync(self, name):
        pb = self.cri.pb
        r = self.cri.call("ExecSync", pb.ExecSyncRequest(container_id=self.ctrs[name], cmd=[PROBE], timeout=30), pb.ExecSyncResponse, timeout=90)
        return r.exit_code, r.stdout.decode(errors="replace").strip()

    def probe_ok(self, how, name, want):
        """An exec'd probe (ExecSync, or CRI Exec as `kubectl exec`) gets `want` through the follower."""
        if how == "ExecSync":
            code, out = self.exec_sync(name)
        else:
            code, out, err = kubelet.stream_exec(self.cri, self.ctrs[name], [PROBE])
            out = (out + err).strip()
        m = re.fullmatch(r"window_ns=(\d+) first=[01] cookie=(0x[0-9a-f]+)", out)
        good = code == 0 and m is not None and m.group(2) == want
        check(f"{how} into tenant pod {name}: the exec'd probe gets the pod's group cookie {want} from the DaemonSet's follower"
              + (f" after {int(m.group(1)) // 1000} us" if m else ""), good, f"exit {code}: {out!r}")

    # the parts

    def first_start(self):
        self.start_daemonset(self.manifest, "first start")
        self.timer.phase("DaemonSet pod")
        self.check_install("install", self.manifest)
        note("follow was created " + ("after the plugin registered: the plugin injected the hook into it"
                                      if injected(self.ds.containers["follow"].id)
                                      else "before the plugin registered: the catch-up decided it"))
        self.own_at_zero("first start")

    def check_install(self, what, manifest):
        env = env_of(kubelet.container_named(manifest.template, "install"))
        bin_path = os.path.join(env.get("HOOK_BIN_DIR", "/usr/local/bin"), PACKAGE)
        image_bin = f"/proc/{self.pid('nri')}/root/usr/bin/{PACKAGE}"
        same = os.path.isfile(bin_path) and open(bin_path, "rb").read() == open(image_bin, "rb").read()
        mode = oct(os.stat(bin_path).st_mode & 0o7777) if os.path.exists(bin_path) else "missing"
        check(f"{what}: the binary is {bin_path} (HOOK_BIN_DIR), 0755, the image's own", same and mode == "0o755", mode)
        record = f"{CONFIG_DIR}/installed-hooks-dirs"
        dirs = open(record).read().split() if os.path.exists(record) else []
        check(f"{what}: {record} names the hooks.d directories written ({dirs})", dirs == ["/usr/share/containers/oci/hooks.d"], dirs)
        for d in dirs:
            f = f"{d}/{PACKAGE}.json"
            try:
                hook = json.load(open(f))
                fine = hook["hook"]["path"] == bin_path and os.stat(f).st_mode & 0o777 == 0o644
            except (OSError, ValueError, KeyError) as e:
                fine, hook = False, e
            check(f"{what}: {f} runs {bin_path} (0644)", fine, hook)
        cm = manifest.configmaps[(manifest.namespace, config_map(manifest))]["config.toml"]
        got = open(f"{CONFIG_DIR}/config.toml").read() if os.path.exists(f"{CONFIG_DIR}/config.toml") else None
        check(f"{what}: {CONFIG_DIR}/config.toml is the ConfigMap's config.toml", got == cm, got)
        st = os.lstat(STATE_DIR) if os.path.lexists(STATE_DIR) else None
        check(f"{what}: the state dir {STATE_DIR} is a root-owned directory, 0700",
              st is not None and os.path.isdir(STATE_DIR) and not os.path.islink(STATE_DIR)
              and st.st_mode & 0o7777 == 0o700 and st.st_uid == 0, st and oct(st.st_mode))

    def tenants_through_nri(self):
        cpus = {"a1": 0, "a2": 1, "b1": 1}  # the co-run pairs' CPUs
        for name, ns in (("a1", "tenant-a"), ("a2", "tenant-a"), ("b1", "tenant-b")):
            self.tenant(name, ns, cpus[name])
        self.timer.phase("tenant pods")
        c = {n: self.tcookie(n) for n in ("a1", "a2", "b1")}
        note(f"tenant cookies (coresched): {c}")
        self.web = {"tenant-a": c["a1"], "tenant-b": c["b1"]}
        check("tenant pods: two pods of group web in tenant-a share one cookie, through the DaemonSet's NRI plugin",
              c["a1"] != "0x0" and c["a1"] == c["a2"], c)
        check("tenant pods: group web in tenant-b is another cookie", c["b1"] not in ("0x0", c["a1"]), c)
        m = members()
        check("the cache has them as tenant-a/web and tenant-b/web",
              [m.get(self.ctrs[n], ("-",))[0] for n in ("a1", "a2", "b1")] == ["tenant-a/web", "tenant-a/web", "tenant-b/web"], m)
        self.probe_ok("ExecSync", "a1", c["a1"])
        self.probe_ok("CRI Exec", "b1", c["b1"])
        self.timer.phase("exec probes")
        route = "DaemonSet (NRI plugin and follower in pods)"
        a1, a2, b1 = (iso.Side(f"ds-{n}", cpus[n], f"tenant pod {n}") for n in ("a1", "a2", "b1"))
        iso.three_pairs(route, a1, a2, b1, iso.exec_sync_side(self.cri, self.ctrs["a1"], "ds-a1", 0), c["a1"])
        self.timer.phase("co-run pairs")

    def endpoints(self):
        """The pods' HTTP endpoints as a cluster uses them: kubelet's probes as the manifest
        writes them, Prometheus scraping what the pod annotations and the PodMonitor name (the
        pages are saved for promtool, run by tests/field/run.sh on the host), and the plugin's
        readiness across a containerd stop and start, its liveness holding throughout."""
        import yaml

        plan = self.ds.plan
        specs = {n: kubelet.container_named(plan.template, n) for n in ("nri", "follow")}
        for name, c in specs.items():
            for kind in ("readinessProbe", "livenessProbe"):
                url = plan.probe_url(c, kind)[0]
                ok = wait_for(lambda: kubelet.probe(plan, c, kind)[0], 60)
                got = kubelet.probe(plan, c, kind)
                check(f"{name}: its {kind} ({url}) succeeds as kubelet runs it", ok, got)
        ip = kubelet.node_ip()
        ann = plan.annotations
        pages = {}
        check("the pod annotations ask Prometheus to scrape it", ann.get("prometheus.io/scrape") == "true", ann)
        url = f"http://{ip}:{ann.get('prometheus.io/port')}{ann.get('prometheus.io/path', '/metrics')}"
        pages["annotations"] = self.scrape(url)
        mon = yaml.safe_load(open(POD_MONITOR))
        sel = mon["spec"]["selector"]["matchLabels"]
        check(f"the PodMonitor ({os.path.relpath(POD_MONITOR, CHECKOUT)}) selects the DaemonSet's pods in its namespace",
              mon["metadata"]["namespace"] == plan.namespace and all(plan.labels.get(k) == v for k, v in sel.items()),
              (mon["metadata"], sel, plan.labels))
        by_name = {q["name"]: (n, q["containerPort"]) for n, c in specs.items() for q in c.get("ports") or []}
        for ep in mon["spec"]["podMetricsEndpoints"]:
            owner, port = by_name.get(ep["port"], (None, None))
            check(f"PodMonitor endpoint port {ep['port']} is a named port of the pod ({owner})", owner is not None, by_name)
            if owner:
                pages[ep["port"]] = self.scrape(f"http://{ip}:{port}{ep.get('path', '/metrics')}")
        os.makedirs(f"{OUT}/scrapes", exist_ok=True)
        for key, text in pages.items():
            with open(f"{OUT}/scrapes/{key}.prom", "w") as f:
                f.write(text)
        follow_page, nri_page = pages.get("metrics", ""), pages.get("nri-metrics", "")
        want = {n: (f'container_id="{self.ctrs[n]}",core_sched_group="{g}",core_sched_cookie="{self.tcookie(n)}"')
                for n, g in (("a1", "tenant-a/web"), ("a2", "tenant-a/web"), ("b1", "tenant-b/web"))}
        missing = {n: w for n, w in want.items() if w not in follow_page}
        check("the follower's page has every tenant container with its group and its cookie as coresched reads it "
              "(the `metrics` families)", not missing,
              [line for line in follow_page.splitlines() if line.startswith("oci_coresched_hook_container_cookie")] + [str(missing)])
        for fam in ("oci_coresched_hook_follow_events_enabled 1", "oci_coresched_hook_audit_violations",
                    "oci_coresched_hook_force_idle_seconds_total"):
            check(f"the follower's page has {fam}", fam in follow_page)
        check("the plugin's page: ready, and it injected the hook into the tenant containers",
              "oci_coresched_hook_nri_ready 1" in nri_page
              and (sample(nri_page, "oci_coresched_hook_nri_containers_adjusted_total") or 0) >= 3, nri_page)
        port = ann.get("prometheus.io/port")
        refused = self.scrape(f"http://127.0.0.1:{port}/metrics", want=None)
        check(f"bound to the node's address {ip} only: nothing answers on 127.0.0.1:{port}", refused is None, refused)
        self.timer.phase("endpoints")

        nri = specs["nri"]
        live, ready_seen = [], []
        r = run(["systemctl", "stop", "containerd"])
        check("containerd.service stopped (the pods' shims keep running)", r.returncode == 0, r.stderr)
        t0 = time.monotonic()

        def unready():
            live.append(kubelet.probe(plan, nri, "livenessProbe"))
            ready_seen.append(kubelet.probe(plan, nri, "readinessProbe"))
            return not ready_seen[-1][0]

        went = wait_for(unready, 30)
        check(f"containerd away: nri's readinessProbe fails ({ready_seen[-1][1]} {ready_seen[-1][2].strip()!r}) "
              f"{time.monotonic() - t0:.1f} s after the stop", went, ready_seen[-3:])
        # Stay away for a liveness probe period and more: kubelet would count its failures now.
        end = time.monotonic() + 12
        while time.monotonic() < end:
            live.append(kubelet.probe(plan, nri, "livenessProbe"))
            time.sleep(1)
        t1 = time.monotonic()
        self.containerd.restart()  # starts the stopped unit, then waits for it to answer
        # A gRPC channel that saw its server go away waits out a reconnect backoff: a new client.
        self.cri = base.Cri(self.cri.pb)
        self.k = kubelet.Kubelet(self.cri)
        back = wait_for(lambda: kubelet.probe(plan, nri, "readinessProbe")[0], 60)
        live.append(kubelet.probe(plan, nri, "livenessProbe"))
        check(f"containerd back: nri's readinessProbe succeeds again {time.monotonic() - t1:.1f} s after the start",
              back, kubelet.probe(plan, nri, "readinessProbe"))
        failed = [x for x in live if not x[0]]
        check(f"nri's livenessProbe succeeded all {len(live)} times while containerd was away and back (kubelet would "
              "not restart it)", not failed, failed[:3])
        log = self.ds.log("nri")
        since = log.split("runtime restarting", 1)
        check("the plugin logged the stop as \"runtime restarting\" (info), with no error line after it",
              len(since) == 2 and " error: " not in since[1] and "failed to connect" not in since[1],
              [line for line in log.splitlines()[-8:]])
        follow_ready = kubelet.probe(plan, specs["follow"], "readinessProbe")
        check("follow stayed ready (its events do not depend on containerd)", follow_ready[0], follow_ready)
        self.timer.phase("endpoints across a containerd stop")

    def scrape(self, url, want=200):
        """GET `url` as Prometheus does; the body (None when nothing answered and `want` is None)."""
        import urllib.error
        import urllib.request

        req = urllib.request.Request(url, headers={"Accept": "text/plain;version=0.0.4", "User-Agent": "Prometheus/2.53"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                body, status, ctype = r.read().decode(), r.status, r.headers.get("Content-Type")
        except urllib.error.HTTPError as e:
            body, status, ctype = e.read().decode(errors="replace"), e.code, e.headers.get("Content-Type")
        except OSError as e:
            if want is None:
                return None
            check(f"scrape {url}", False, e)
            return ""
        if want is None:
            return f"{status}: {body[:200]}"
        check(f"scrape {url}: {status}, {ctype}, {len(body)} bytes",
              status == want and ctype == "text/plain; version=0.0.4; charset=utf-8", body[:500])
        return body

    def doctor(self, what):
        """`doctor --json` inside the follow container, as `kubectl exec … -c follow -- oci-coresched-hook
        doctor` runs it: (exit status, report or None)."""
        pb = self.cri.pb
        x = self.cri.call("ExecSync", pb.ExecSyncRequest(
            container_id=self.ds.containers["follow"].id, cmd=["/usr/bin/oci-coresched-hook", "doctor", "--json"],
            timeout=60), pb.ExecSyncResponse, timeout=120)
        try:
            report = json.loads(x.stdout.decode())
        except ValueError:
            report = None
        check(f"{what}: doctor in the follow container reports (exit {x.exit_code})", report is not None,
              (x.stdout.decode()[-500:], x.stderr.decode()[-500:]))
        for f in (report or {}).get("facts", []):
            if f["level"] != "ok":
                note(f"doctor ({what}): {f['level']} {f['name']}: {f['summary']}")
            if f["level"] in ("fail", "warn"):
                for line in f.get("detail", []):
                    note(f"doctor ({what}):     {line}")
        return x.exit_code, report

    def doctor_isolates(self):
        """doctor in the follow container on the node with its tenants running through the
        DaemonSet's plugin: it isolates (exit 0), every fact that says so ok."""
        rc, rep = self.doctor("tenants running")
        facts = {f["name"]: f for f in (rep or {}).get("facts", [])}
        check(f"doctor in the follow container: the node isolates (exit {rc}, verdict {(rep or {}).get('verdict')})",
              rc == 0 and (rep or {}).get("verdict") == "isolates", (rep or {}).get("summary"))
        for name in ("kernel", "smt", "sched_ext", "config", "routes", "follower", "nri", "audit"):
            check(f"doctor in the follow container: {name} ok", facts.get(name, {}).get("level") == "ok", facts.get(name))
        self.timer.phase("doctor")

    def node_shapes(self):
        """doctor in the DaemonSet's follow container on the node as it is (its facts of the kernel,
        the config and the wiring ok), then with SMT turned off (nothing to isolate: exit 0, both pods stay ready and their pages
        say the kernel cannot make cookies), then on again."""
        plan = self.ds.plan
        specs = {n: kubelet.container_named(plan.template, n) for n in ("nri", "follow")}
        rc, rep = self.doctor("SMT on, after the rolling update and rebuild")
        facts = {f["name"]: f for f in (rep or {}).get("facts", [])}
        for name in ("kernel", "smt", "sched_ext", "config", "routes", "follower", "nri"):
            check(f"doctor in the follow container, SMT on: {name} ok", facts.get(name, {}).get("level") == "ok", facts.get(name))
        ip = kubelet.node_ip()
        ports = {n: q["containerPort"] for n, c in specs.items() for q in c.get("ports") or []}

        def pages():
            import urllib.request

            got = {}
            for n, p in ports.items():
                try:
                    with urllib.request.urlopen(f"http://{ip}:{p}/metrics", timeout=10) as r:
                        got[n] = r.read().decode()
                except OSError as e:
                    got[n] = f"unreachable: {e}"
            return got

        r = run(["sh", "-c", "echo off > /sys/devices/system/cpu/smt/control"])
        check("SMT turned off on the node (smt/control)", r.returncode == 0, r.stderr)
        try:
            off = wait_for(lambda: all("oci_coresched_hook_smt_active 0" in t for t in pages().values()), 30)
            got = pages()
            check("SMT off: both pages say so (smt_active 0, kernel_supported 0)", off and all(
                "oci_coresched_hook_kernel_supported 0" in t for t in got.values()),
                {n: [line for line in t.splitlines() if line.startswith(("oci_coresched_hook_smt", "oci_coresched_hook_kernel"))]
                 for n, t in got.items()})
            for name, c in specs.items():
                ready = kubelet.probe(plan, c, "readinessProbe")
                check(f"SMT off: {name}'s readinessProbe still succeeds (readiness is the agent's work, not the "
                      f"kernel's: docs/kubernetes.md)", ready[0], ready)
            rc, rep = self.doctor("SMT off")
            check(f"doctor with SMT off: nothing to isolate, exit 0 (exit {rc}, verdict {(rep or {}).get('verdict')})",
                  rc == 0 and (rep or {}).get("verdict") == "nothing_to_isolate", (rep or {}).get("summary"))
        finally:
            r = run(["sh", "-c", "echo on > /sys/devices/system/cpu/smt/control"])
            check("SMT on again", r.returncode == 0 and open("/sys/devices/system/cpu/smt/active").read().strip() == "1",
                  r.stderr)
        back = wait_for(lambda: all("oci_coresched_hook_kernel_supported 1" in t for t in pages().values()), 30)
        check("SMT on again: both pages say the kernel can make cookies", back)
        self.own_at_zero("after SMT off and on")
        self.timer.phase("doctor, SMT off and on")

    def catch_up(self):
        nri = self.ds.containers["nri"]
        pid = self.pid("nri")
        os.kill(pid, 9)
        st = self.k.wait_exited(nri.id, 60)
        note(f"killed the plugin's container (pid {pid}, SIGKILL): exit code {st.exit_code}")
        follow_pid = self.pid("follow")
        r = run(["coresched", "new", "-d", str(follow_pid)])
        given = cookie(follow_pid)
        check(f"a cookie already there: follow's process (pid {follow_pid}) given one by hand ({given})",
              r.returncode == 0 and given != "0x0", r.stderr)
        for name, ns in (("d1", "tenant-a"), ("d2", "tenant-b")):
            self.tenant(name, ns)
        down = {n: self.tcookie(n) for n in ("d1", "d2")}
        check(f"plugin down: tenant pods start without a cookie ({down})", set(down.values()) == {"0x0"}, down)
        t0 = time.monotonic()
        again = self.k.restart(self.ds, "nri")
        note(f"kubelet restarted nri (attempt {again.attempt}) in {time.monotonic() - t0:.0f} s")
        self.wait_plugin("plugin restarted")
        self.timer.phase("catch-up")
        caught = wait_for(lambda: self.tcookie("d1") == self.web["tenant-a"] and self.tcookie("d2") == self.web["tenant-b"], 30)
        got = {n: self.tcookie(n) for n in ("d1", "d2")}
        check(f"catch-up: the pods started while the plugin was down have their groups' cookies ({got}, want {self.web})", caught, got)
        m = members()
        cgs = {n: m.get(self.ctrs[n], (None, None))[1] for n in ("d1", "d2")}
        want = {n: f"/kubepods/burstable/poduid-{n}/{self.ctrs[n]}" for n in ("d1", "d2")}
        check("catch-up in the nri container (a cgroup namespace of its own) recorded host cgroup paths", cgs == want, cgs)
        self.own_at_zero("after the plugin's restart")
        cleared = re.search(rf"catch-up: container {self.ds.containers['follow'].id} \(pid {follow_pid}\): cookie cleared", self.ds.log("nri"))
        check("the catch-up cleared the cookie follow had been given (its log says so)", cleared is not None,
              [line for line in self.ds.log("nri").splitlines() if "catch-up" in line][-6:])
        self.probe_ok("ExecSync", "d1", self.web["tenant-a"])
        self.probe_ok("CRI Exec", "d2", self.web["tenant-b"])
        self.timer.phase("catch-up checks")

    def escape(self):
        """Tenant pods whose hook failed open, seen by `audit`, counted by `metrics` and healed by
        the follow container (tests/field/escape.py): the state lock held through a container's
        createRuntime and poststart, and an invalid /etc/oci-coresched-hook/config.toml on the node
        (the file the node's hook reads, and both DaemonSet containers through their hostPath).
        Their group is tenant-a/web, whose cookie the tenants already hold; b1 is the other tenant."""
        route = DaemonSetRoute(self)
        b1 = esc.Ctr("b1", self.ctrs["b1"], self.cri.pid(self.ctrs["b1"]), "tenant-b/web")
        b1.cookie = cookie(b1.pid)
        esc.guarded(route, lambda: esc.run_route(route, "tenant-a", "web", b1, self.web["tenant-a"]))
        self.own_at_zero("after the escape scenarios")
        self.timer.phase("escape (failed open: seen, counted, healed)")

    def rolling_update(self, prev_manifest, prev_image_tar):
        """The DaemonSet's image updated between releases, as an admin rolls it out node by node
        (maxUnavailable 1: the old pod deleted, then the new one started): to the previous
        release's manifest and image (a rollback), then back to this release's."""
        prev_image = manifest_image(prev_manifest)
        import_image(prev_image_tar, prev_image)
        self.timer.phase("previous release's image")
        self.roll(prev_manifest, f"rollback to {prev_image}", current=False, new_pod="r1")
        self.roll(self.manifest, f"update to {manifest_image(self.manifest)}", current=True, new_pod="n1")

    def chart_upgrade(self, rev2):
        """`helm upgrade` to revision 2 of the chart's release (a config value changed), then
        `helm rollback` to revision 1, with the tenants running: each new pod template differs
        from the running one by its checksum/config annotation only, so the DaemonSet rolls its
        pod (maxUnavailable 1), whose install puts that revision's config on the node."""
        def template(m):
            t = json.loads(json.dumps(m.template))
            t.get("metadata", {}).get("annotations", {}).pop("checksum/config", None)
            return t

        def checksum(m):
            return (m.template.get("metadata", {}).get("annotations") or {}).get("checksum/config")

        rev1 = self.manifest
        cm = lambda m: m.configmaps[(m.namespace, config_map(m))]["config.toml"]  # noqa: E731
        check("chart revision 2: its ConfigMap's config differs from revision 1's", cm(rev2) != cm(rev1), cm(rev2))
        check("chart revision 2: its pod template's checksum/config differs from revision 1's (the DaemonSet rolls)",
              checksum(rev1) and checksum(rev2) and checksum(rev1) != checksum(rev2), (checksum(rev1), checksum(rev2)))
        check("chart revision 2: its pod template differs from revision 1's in checksum/config only",
              template(rev1) == template(rev2))
        self.roll(rev2, "chart upgrade to revision 2 (config.log_level=debug)", current=True, new_pod="h2")
        self.roll(rev1, "chart rollback to revision 1", current=True, new_pod="h1")

    def roll(self, manifest, what, current, new_pod):
        before = {n: self.tcookie(n) for n in self.ctrs}
        old_image = manifest_image(self.ds.plan.manifest)
        t0 = time.monotonic()
        self.k.delete_pod(self.ds)
        note(f"{what} (maxUnavailable 1): the running DaemonSet pod deleted in {time.monotonic() - t0:.0f} s")
        self.start_daemonset(manifest, what)
        self.timer.phase(what)
        got = run([HOOK[0], "--version"]).stdout.strip()
        note(f"{what}: the installed binary says {got!r} (the pod deleted ran {old_image})")
        after = {n: self.tcookie(n) for n in self.ctrs}
        check(f"{what}: every running tenant container kept its cookie ({after})", after == before, f"before {before}")
        self.listed(what, got)
        self.check_install(what, manifest)
        if current:
            self.own_at_zero(f"after the {what}")
        else:
            # The previous release's manifest has no policy-none annotation: its own containers
            # may get a cookie of their pod's group; that is that release's behaviour, printed.
            note(f"{what}: the previous release's nri and follow hold "
                 f"{ {n: cookie(self.pid(n)) for n in ('nri', 'follow')} }")
        self.tenant(new_pod, "tenant-a")
        check(f"{what}: a new tenant pod joins its group's cookie", self.tcookie(new_pod) == self.web["tenant-a"],
              self.tcookie(new_pod))
        self.probe_ok("ExecSync", "a2", self.web["tenant-a"])
        self.probe_ok("CRI Exec", "b1", self.web["tenant-b"])
        self.timer.phase(f"{what}: checks")

    def listed(self, what, version):
        """`list --json` of the installed binary: every tenant container in its namespace's group
        web, and no group whose live members hold more than one cookie."""
        r = run([HOOK[0], "list", "--json"])
        if not check(f"{what}: list --json ({version}) runs", r.returncode == 0, r.stderr):
            return
        groups = json.loads(r.stdout)
        cached = {m["id"]: g["group"] for g in groups for m in g["members"]}
        wrong = {n: cached.get(cid) for n, cid in self.ctrs.items()
                 if cached.get(cid) != f"{self.tenants[n][1].metadata.namespace}/web"}
        check(f"{what}: list shows every tenant container in its group", not wrong, wrong)
        multi = [g["group"] for g in groups if g.get("live_cookies", 0) > 1]
        check(f"{what}: list shows no group with more than one cookie", not multi, multi)

    def rebuild(self):
        r = run([HOOK[0], "rebuild", "--json"])
        check("rebuild (the operator command) runs on the node", r.returncode == 0, r.stderr)
        if r.returncode == 0:
            rep = json.loads(r.stdout)
            own = {c.id: n for n, c in self.ds.containers.items()}
            for m in rep.get("members", []):
                if m["id"] in own:
                    note(f"rebuild recorded the DaemonSet's {own[m['id']]} in group {m['group']} with cookie {m['cookie']}")
            for s in rep.get("skipped", []):
                if s["id"] in own:
                    note(f"rebuild skipped the DaemonSet's {own[s['id']]}: {s['reason']}")
        # A process exec'd into the DaemonSet's containers: the follower leaves it at 0.
        pb = self.cri.pb
        pids = {}
        for n, c in self.ds.containers.items():
            x = self.cri.call("ExecSync", pb.ExecSyncRequest(
                container_id=c.id, cmd=["/bin/busybox", "sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"], timeout=30),
                pb.ExecSyncResponse, timeout=90)
            pids[n] = int(x.stdout.decode().strip() or 0)
        time.sleep(3)
        got = {n: cookie(p) for n, p in pids.items() if p}
        check(f"after rebuild: processes exec'd into nri and follow stay at cookie 0 ({got})",
              len(got) == 2 and set(got.values()) == {"0x0"}, pids)
        # rebuild reads the runtimes' state, where an un-adjusted container (the plugin's own)
        # carries none of its pod's annotations: at cookie 0 it is reported, not recorded in a
        # guessed group, and follow (adjusted: policy none) is skipped.
        self.own_at_zero("after rebuild")
        self.timer.phase("rebuild")

    def lost_cache(self):
        """The cache lost with every tenant running: moved aside under the state lock (as a damaged
        file is), so the next opener (the follower's sweep, or `rebuild` itself) refills a new one
        from the runtimes' state. d1 and d2 were caught up by the plugin: their state lacks their
        pod's annotations and alone would put them in their pod's default group, while the cookie
        they hold is their group's, which the refill follows."""
        moved = []
        with esc.LockHeld(f"{STATE_DIR}/lock"):
            for name in ("cache.db", "cache.db-wal", "cache.db-shm"):
                if os.path.exists(f"{STATE_DIR}/{name}"):
                    os.rename(f"{STATE_DIR}/{name}", f"{STATE_DIR}/lost-{name}")
                    moved.append(name)
        check(f"lost cache: {moved} moved aside under the state lock", "cache.db" in moved, moved)
        r = run([HOOK[0], "rebuild", "--json", "--log-level", "info"])
        check("lost cache: rebuild runs", r.returncode == 0, r.stderr)
        if r.returncode == 0:
            recorded = {m["id"]: m["group"] for m in json.loads(r.stdout).get("members", [])}
            got = {n: recorded.get(self.ctrs[n]) for n in ("d1", "d2")}
            want = {"d1": "tenant-a/web", "d2": "tenant-b/web"}
            check(f"lost cache: rebuild records the containers the plugin caught up in the groups whose cookie "
                  f"they hold ({got})", got == want, r.stdout[-1500:])
        self.listed("lost cache", "rebuilt")
        shims = [line for line in r.stderr.splitlines() if "the shim of sandbox" in line]
        note(f"lost cache: rebuild recorded {len(shims)} pods' shims: {shims[:2]}")
        # The pods' shims hold their groups' cookies: recorded again, they are no process outside
        # every member holding a group's cookie.
        r = run([HOOK[0], "audit"])
        check(f"lost cache: audit is clean (exit {r.returncode})", r.returncode == 0, (r.stdout + r.stderr)[-1500:])
        self.own_at_zero("after the lost cache")
        self.timer.phase("lost cache")

    def uninstall(self):
        """The documented removal: the DaemonSet patched with packaging/kubernetes/uninstall-patch.json
        (its init container runs `uninstall` with PURGE=1, one idle container instead of nri and
        follow) rolls out like an update, then the DaemonSet is deleted."""
        record = open(f"{CONFIG_DIR}/installed-hooks-dirs").read().split()
        bin_path = os.path.join(env_of(self.install).get("HOOK_BIN_DIR", "/usr/local/bin"), PACKAGE)
        with open(UNINSTALL_PATCH) as f:
            m = self.manifest.patched(json.load(f))
        t0 = time.monotonic()
        self.k.delete_pod(self.ds)
        pod = self.k.run_pod(kubelet.daemonset_pod(m))
        note(f"uninstall rolled out (the plugin's pod deleted first: maxUnavailable 1) in {time.monotonic() - t0:.0f} s")
        for line in pod.log("install").splitlines():
            note(f"  uninstall: {line.split(' ', 3)[-1]}")
        done = self.cri.status(pod.containers["done"].id).status.state == self.cri.pb.CONTAINER_RUNNING
        check("uninstall: the patched pod's init container ran `uninstall` (exit 0) and its idle container runs", done)
        wrote = [bin_path, f"{CONFIG_DIR}/config.toml", f"{CONFIG_DIR}/installed-hooks-dirs"] + [
            f"{d}/{PACKAGE}.json" for d in record]
        left = [p for p in wrote if os.path.lexists(p)]
        if os.path.isdir(CONFIG_DIR):
            left += [f"{CONFIG_DIR}/{n}" for n in os.listdir(CONFIG_DIR)]
        check(f"uninstall removed every file the install wrote ({', '.join(wrote)}), and nothing is left in {CONFIG_DIR}",
              not left, left)
        if os.path.isdir(CONFIG_DIR):
            note(f"{CONFIG_DIR} stays as an empty directory: kubelet created it for the hostPath volume")
        note(f"left on the node: the state dir {STATE_DIR} (a hostPath kubelet created; tmpfs) holding "
             f"{sorted(os.listdir(STATE_DIR)) if os.path.isdir(STATE_DIR) else 'nothing'}")
        self.k.delete_pod(pod)
        pb = self.cri.pb
        self.timer.phase("uninstall")
        # Tenant containers created while the plugin ran carry its poststop hook, which now names a
        # removed binary: their pods must still stop.
        errors = []
        for name, (pod_id, _) in self.tenants.items():
            try:
                self.cri.call("StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=pod_id), pb.StopPodSandboxResponse)
                self.cri.call("RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id), pb.RemovePodSandboxResponse)
            except self.cri.grpc.RpcError as e:
                errors.append(f"{name}: {e.details()}")
        check("after the uninstall every tenant pod still stops and is removed (their injected poststop names a removed binary)",
              not errors, errors)
        self.timer.phase("teardown")


def load_pb(gen):
    """api_pb2 from GEN_DIR when an earlier part compiled it there, else compiled now."""
    if os.path.exists(f"{gen}/api_pb2.py"):
        sys.path.insert(0, gen)
        import api_pb2

        return api_pb2
    return base.compile_proto(gen)


def save_logs(containerd):
    os.makedirs(OUT, exist_ok=True)
    for d in os.listdir(kubelet.POD_LOGS) if os.path.isdir(kubelet.POD_LOGS) else []:
        if d.startswith("oci-coresched-hook_"):
            shutil.copytree(os.path.join(kubelet.POD_LOGS, d), os.path.join(OUT, d), dirs_exist_ok=True)
    with open(f"{OUT}/containerd.log", "w") as f:
        f.write(containerd.text())
    with open(f"{OUT}/hook-journal.log", "w") as f:
        f.write(run(["journalctl", "-t", PACKAGE, "-b", "--no-pager"]).stdout)


def main():
    gen, manifest_path, image_tar, corun, prev_manifest_path, prev_image_tar = sys.argv[1:7]
    os.makedirs(OUT, exist_ok=True)
    iso.setup(corun, False)
    t0 = time.monotonic()
    manifest = kubelet.Manifest(manifest_path)
    install = kubelet.container_named(manifest.template, "install")
    HOOK[0] = os.path.join(env_of(install).get("HOOK_BIN_DIR", "/usr/local/bin"), PACKAGE)
    containerd = Containerd()
    timer = Timer()
    s = None
    try:
        if not os.path.isfile(image_tar):
            raise RuntimeError(f"no installer image at {image_tar}: scripts/package.sh image builds it (needs podman)")
        cri = base.Cri(load_pb(gen))
        clean_node()
        os.makedirs("/etc/containerd", exist_ok=True)
        with open("/etc/containerd/config.toml", "w") as out:
            for path in CONTAINERD_CONFIGS:
                out.write(open(path).read())
        containerd.restart()
        note(f"containerd.service restarted with NRI enabled ({' + '.join(os.path.relpath(p, CHECKOUT) for p in CONTAINERD_CONFIGS)})")
        k = kubelet.Kubelet(cri)
        if not k.image_present(FIELD_IMAGE):
            import_image(FIELD_IMAGE_TAR, FIELD_IMAGE)
        image = manifest_image(manifest)
        import_image(image_tar, image)
        check(f"the image make package builds imports under the manifest's image name {image}", k.image_present(image))
        timer.phase("setup (purge, containerd, images)")
        if run(["ip", "-4", "-o", "addr", "show", "scope", "global"]).stdout.strip() == "":
            r = run(["ip", "addr", "add", f"{NODE_ADDRESS}/32", "dev", "lo"])
            if r.returncode != 0:
                raise RuntimeError(f"ip addr add {NODE_ADDRESS}/32 dev lo: {r.stderr}")
            note(f"the guest has no network device: the node's address is {NODE_ADDRESS} on lo (the pods' status.podIP)")
        s = Scenarios(cri, manifest, timer, containerd)
        s.first_start()
        s.tenants_through_nri()
        s.endpoints()
        s.doctor_isolates()
        s.catch_up()
        s.escape()
        s.rolling_update(kubelet.Manifest(prev_manifest_path), prev_image_tar)
        s.chart_upgrade(kubelet.Manifest(CHART_REVISION_2))
        s.rebuild()
        s.lost_cache()
        s.node_shapes()
        s.uninstall()
    except Exception as e:  # a crash is a failure with its cause, never a silent pass
        import traceback

        bad(f"DaemonSet scenarios aborted: {type(e).__name__}: {e}", traceback.format_exc())
    finally:
        save_logs(containerd)
    note("times (s): " + ", ".join(f"{n} {t:.0f}" for n, t in timer.phases))
    note(f"DaemonSet part: {time.monotonic() - t0:.0f} s")
    print(f"daemonset: {base.PASS} passed, {base.FAIL} failed", flush=True)
    return 1 if base.FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
