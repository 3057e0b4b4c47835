//! The Helm chart (`packaging/helm/oci-coresched-hook`), rendered and linted by the real Helm
//! engine through `scripts/helm.py` (helm-python-sdk: the Helm v4 library in a PyPI wheel):
//!
//! * `helm lint --strict` passes, with the default values and with every switch turned;
//! * `packaging/kubernetes/daemonset.yaml` is the chart's default rendering, byte for byte, and
//!   the chart's copies of the alerting rules, the dashboard and containerd's base spec are their
//!   sources' bytes;
//! * the chart's version and appVersion are the crate's;
//! * the schema refuses a wrong type, an unknown key, a port out of range and an unknown route,
//!   with Helm's message;
//! * `routes.nri: false` removes the `nri` container, its socket's volume and its PodMonitor
//!   endpoint, and nothing else; `routes.hooksD: false` sets `HOOKS_DIR=none` on the `install`
//!   container and removes its hooks.d and engine config mounts and their volumes, and nothing
//!   else; `routes.containerdBaseSpec: true` adds the `base-spec` init
//!   container, its volume and containerd's base spec (its hooks on the installed binary) in the
//!   ConfigMap, and nothing else;
//! * a config value changes the ConfigMap's line, the pod template's `checksum/config` annotation
//!   (so the pods roll) and nothing else; the rendered config passes the binary's `check-config`;
//! * the listen ports and the image are set once and reach every place that names them;
//! * the optional PodMonitor, PrometheusRule and dashboard render, the rule groups being
//!   `packaging/prometheus`'s and the dashboard `packaging/grafana`'s;
//! * the renders pass `kubernetes-validate --strict`, as the manifest does in the packaging tier.
//!
//! `python3` on PATH must import `helm_python` (pip package helm-python-sdk) and `yaml`;
//! `scripts/test-all.sh` makes a venv with them and puts it first on PATH. Without them (or
//! without `kubernetes-validate` for the last check) a test fails under `CI` and prints
//! `SKIPPED` otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use crate::common::{MANIFEST_DIR, run_command, skip, which};

const HOOK: &str = env!("CARGO_BIN_EXE_oci-coresched-hook");
const CHART: &str = "packaging/helm/oci-coresched-hook";
const MANIFEST: &str = "packaging/kubernetes/daemonset.yaml";
const RULES: &str = "packaging/prometheus/oci-coresched-hook.rules.yaml";
const DASHBOARD: &str = "packaging/grafana/oci-coresched-hook.dashboard.json";
const BASE_SPEC: &str = "packaging/containerd/base-runtime-spec.json";
const TIMEOUT: Duration = Duration::from_secs(120);
const MISSING: &str = "python3 with the modules helm_python and yaml not installed (pip install helm-python-sdk \
                       pyyaml into a venv first on PATH; scripts/test-all.sh makes one at \
                       ${XDG_CACHE_HOME:-~/.cache}/oci-coresched-hook/venv)";

fn repo(rel: &str) -> PathBuf {
    Path::new(MANIFEST_DIR).join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

/// The running test's name (libtest names each test's thread after it).
fn this_test() -> String {
    std::thread::current().name().unwrap_or("helm").to_string()
}

/// Whether `python3` imports the engine (probed once); when not, the running test says so.
fn engine() -> bool {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    let probe = PROBE.get_or_init(|| {
        if which("python3").is_none() {
            return Err("no python3 on PATH".into());
        }
        let mut cmd = Command::new("python3");
        cmd.args(["-c", "import helm_python, yaml"]);
        let out = run_command(None, cmd, None, TIMEOUT);
        if out.success() { Ok(()) } else { Err(out.stderr.trim().lines().last().unwrap_or("").to_string()) }
    });
    match probe {
        Ok(()) => true,
        Err(why) => {
            skip(&this_test(), &format!("{MISSING}: {why}"));
            false
        }
    }
}

/// `scripts/helm.py ARGS` through `python3`, finished (its exit status is the caller's to check).
fn helm_py(args: &[&str]) -> crate::common::Output {
    let mut cmd = Command::new("python3");
    cmd.arg(repo("scripts/helm.py")).args(args).current_dir(MANIFEST_DIR);
    run_command(None, cmd, None, TIMEOUT)
}

/// The chart's objects rendered with `sets` (`--set` expressions; one starting with `string:` is
/// a `--set-string`), as JSON values.
fn render(sets: &[&str]) -> Vec<Value> {
    let mut args = vec!["render", "--json"];
    for s in sets {
        match s.strip_prefix("string:") {
            Some(s) => args.extend(["--set-string", s]),
            None => args.extend(["--set", s]),
        }
    }
    let out = helm_py(&args);
    assert!(out.success(), "render {sets:?}: {out}");
    match serde_json::from_str(&out.stdout) {
        Ok(Value::Array(v)) => v,
        other => panic!("render {sets:?}: not a JSON list: {other:?}"),
    }
}

fn object<'a>(objs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = objs.iter().filter(|o| o["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind} in {objs:#?}");
    found[0]
}

fn kinds(objs: &[Value]) -> Vec<String> {
    objs.iter().map(|o| o["kind"].as_str().unwrap_or("?").to_string()).collect()
}

fn pod_spec(objs: &[Value]) -> &Value {
    &object(objs, "DaemonSet")["spec"]["template"]["spec"]
}

fn container_names(objs: &[Value]) -> Vec<String> {
    let pod = pod_spec(objs);
    let names = |k: &str| -> Vec<String> {
        pod[k].as_array().into_iter().flatten().map(|c| c["name"].as_str().unwrap().to_string()).collect()
    };
    [names("initContainers"), names("containers")].concat()
}

/// A YAML file of the repository as JSON (python3's yaml module).
fn yaml_file(rel: &str) -> Value {
    let mut cmd = Command::new("python3");
    cmd.args(["-c", "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)"]).arg(repo(rel));
    let out = run_command(None, cmd, None, TIMEOUT);
    assert!(out.success(), "{rel}: {out}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn chart_lints_strictly_with_every_switch() {
    if !engine() {
        return;
    }
    for sets in [
        &[][..],
        &["routes.nri=false,routes.containerdBaseSpec=true"][..],
        &["routes.hooksD=false"][..],
        &["podMonitor.enabled=true,prometheusRule.enabled=true,dashboard.enabled=true,namespace.create=true"][..],
        &["config.qos.BE.sched_idle=true,config.log_file=/var/log/och.log,affinity.nodeAffinity.x=1"][..],
    ] {
        let mut args = vec!["lint"];
        for s in sets {
            args.extend(["--set", s]);
        }
        let out = helm_py(&args);
        assert!(out.success() && out.stdout.contains("1 chart(s) linted, ok"), "lint --strict {sets:?}: {out}");
    }
    // The check bites: a value the schema refuses fails the lint.
    let out = helm_py(&["lint", "--set", "ports.nri=0"]);
    assert!(!out.success() && out.stdout.contains("/ports/nri"), "lint accepted port 0: {out}");
}

#[test]
fn the_manifest_is_the_default_render() {
    if !engine() {
        return;
    }
    let out = helm_py(&["manifest"]);
    assert!(out.success(), "{out}");
    let file = read(MANIFEST);
    if file != out.stdout {
        let first = file.lines().zip(out.stdout.lines()).position(|(a, b)| a != b);
        panic!(
            "{MANIFEST} is not the chart's default render (first differing line: {:?}): run `make chart`",
            first.map(|i| i + 1)
        );
    }
    // Every file `make chart` writes, the field tier's revision 2 among them, is what it would write.
    let out = helm_py(&["check"]);
    assert!(out.success(), "a file make chart writes is stale: {out}");
    // What the field tier and the packaging tier run: one image for every container, today's
    // containers, the Namespace and the ConfigMap.
    let objs = render(&["namespace.create=true"]);
    assert_eq!(kinds(&objs), ["Namespace", "ConfigMap", "DaemonSet"]);
    assert_eq!(container_names(&objs), ["install", "nri", "follow"]);
    let version = env!("CARGO_PKG_VERSION");
    let pod = pod_spec(&objs);
    for c in pod["initContainers"].as_array().unwrap().iter().chain(pod["containers"].as_array().unwrap()) {
        assert_eq!(c["image"], format!("localhost/oci-coresched-hook:{version}"), "{}", c["name"]);
    }
    // helm install --namespace NS: no Namespace object by default.
    assert_eq!(kinds(&render(&[])), ["ConfigMap", "DaemonSet"]);
}

/// The chart's copies of files other parts of the repository own are their bytes (`make chart`).
#[test]
fn the_charts_copies_are_their_sources() {
    for (src, copy) in [
        (RULES, "files/oci-coresched-hook.rules.yaml"),
        (DASHBOARD, "files/oci-coresched-hook.dashboard.json"),
        (BASE_SPEC, "files/base-runtime-spec.json"),
    ] {
        assert!(read(src) == read(&format!("{CHART}/{copy}")), "{CHART}/{copy} differs from {src}: run `make chart`");
    }
}

#[test]
fn the_chart_version_is_the_crate_version() {
    let chart = read(&format!("{CHART}/Chart.yaml"));
    let field = |k: &str| -> String {
        let line =
            chart.lines().find(|l| l.starts_with(&format!("{k}:"))).unwrap_or_else(|| panic!("Chart.yaml has no {k}"));
        line[k.len() + 1..].trim().trim_matches('"').to_string()
    };
    assert_eq!(field("version"), env!("CARGO_PKG_VERSION"), "Chart.yaml version");
    assert_eq!(field("appVersion"), env!("CARGO_PKG_VERSION"), "Chart.yaml appVersion");
    assert_eq!(field("apiVersion"), "v2");
}

#[test]
fn the_schema_refuses_bad_values() {
    if !engine() {
        return;
    }
    for (set, says) in [
        ("routes.nri=maybe", "at '/routes/nri': got string, want boolean"),
        ("routes.hooksD=no", "at '/routes/hooksD': got string, want boolean"),
        ("routes.crio=true", "at '/routes': additional properties 'crio' not allowed"),
        ("routes.containerdBaseSpec=1", "at '/routes/containerdBaseSpec': got number, want boolean"),
        ("replicas=2", "additional properties 'replicas' not allowed"),
        ("ports.follow=70000", "at '/ports/follow': maximum"),
        ("ports.nri=0", "at '/ports/nri': minimum"),
        ("ports.nri=metrics", "at '/ports/nri': got string, want integer"),
        ("image.pullPolicy=Sometimes", "at '/image/pullPolicy'"),
        ("config.log_level=loud", "at '/config/log_level'"),
        ("config.lock_timeout_ms=0", "at '/config/lock_timeout_ms': minimum"),
        ("config.no_such_key=1", "at '/config': additional properties 'no_such_key' not allowed"),
        ("config.qos.XX.enable=true", "at '/config/qos': additional properties 'XX' not allowed"),
        ("resources.follow.requests.cpu=lots", "at '/resources/follow/requests/cpu'"),
    ] {
        let out = helm_py(&["render", "--set", set]);
        assert!(!out.success(), "the schema accepted {set}: {out}");
        assert!(
            out.stderr.contains("values don't meet the specifications of the schema") && out.stderr.contains(says),
            "{set}: Helm's message should say {says:?}: {out}"
        );
    }
    // The same keys with good values render.
    render(&["routes.nri=false,routes.hooksD=true,ports.follow=9000,image.pullPolicy=Always,config.log_level=debug"]);
}

/// The DaemonSet of `objs` without the parts of the NRI route: the `nri` container and the NRI
/// socket's volume.
fn without_nri(objs: &[Value]) -> Value {
    let mut ds = object(objs, "DaemonSet").clone();
    let pod = &mut ds["spec"]["template"]["spec"];
    let containers = pod["containers"].as_array_mut().unwrap();
    let before = containers.len();
    containers.retain(|c| c["name"] != "nri");
    assert_eq!(containers.len(), before - 1, "no nri container to remove");
    let volumes = pod["volumes"].as_array_mut().unwrap();
    let before = volumes.len();
    volumes.retain(|v| v["name"] != "nri-socket");
    assert_eq!(volumes.len(), before - 1, "no nri-socket volume to remove");
    ds
}

#[test]
fn the_nri_route_switch_removes_exactly_its_part() {
    if !engine() {
        return;
    }
    let on = render(&["podMonitor.enabled=true"]);
    let off = render(&["podMonitor.enabled=true,routes.nri=false"]);
    assert_eq!(container_names(&off), ["install", "follow"]);
    assert_eq!(
        without_nri(&on),
        *object(&off, "DaemonSet"),
        "routes.nri=false changed more than the nri container and its volume"
    );
    assert_eq!(object(&on, "ConfigMap"), object(&off, "ConfigMap"));
    // No other container mounts the NRI socket's volume.
    let pod = pod_spec(&off);
    for c in pod["initContainers"].as_array().unwrap().iter().chain(pod["containers"].as_array().unwrap()) {
        for m in c["volumeMounts"].as_array().unwrap() {
            assert_ne!(m["name"], "nri-socket", "{} mounts the NRI socket", c["name"]);
        }
    }
    // The PodMonitor loses the nri-metrics endpoint, and only that.
    let mut pm = object(&on, "PodMonitor").clone();
    let eps = pm["spec"]["podMetricsEndpoints"].as_array_mut().unwrap();
    assert_eq!(eps.iter().map(|e| e["port"].as_str().unwrap()).collect::<Vec<_>>(), ["metrics", "nri-metrics"]);
    eps.retain(|e| e["port"] != "nri-metrics");
    assert_eq!(pm, *object(&off, "PodMonitor"));
}

/// The volumes only the hooks.d route needs: the `install` container mounts them to write the
/// hooks.d file and to read the engines' configured hooks_dir.
const HOOKS_D_VOLUMES: [&str; 4] = ["host-usr-share", "host-containers", "host-hooks", "host-crio"];

/// The DaemonSet of `objs` as `routes.hooksD: false` should make it: `HOOKS_DIR=none` on the
/// `install` container (after HOOK_BIN_DIR), without the hooks.d mounts and their volumes.
fn without_hooks_d(objs: &[Value]) -> Value {
    let mut ds = object(objs, "DaemonSet").clone();
    let pod = &mut ds["spec"]["template"]["spec"];
    let install = &mut pod["initContainers"][0];
    assert_eq!(install["name"], "install");
    let env = install["env"].as_array_mut().unwrap();
    let at = env.iter().position(|e| e["name"] == "HOOK_BIN_DIR").unwrap() + 1;
    assert!(env.iter().all(|e| e["name"] != "HOOKS_DIR"), "HOOKS_DIR set by default: {env:?}");
    env.insert(at, serde_json::json!({"name": "HOOKS_DIR", "value": "none"}));
    let mounts = install["volumeMounts"].as_array_mut().unwrap();
    let before = mounts.len();
    mounts.retain(|m| !HOOKS_D_VOLUMES.contains(&m["name"].as_str().unwrap()));
    assert_eq!(mounts.len(), before - HOOKS_D_VOLUMES.len(), "install lacks a hooks.d mount");
    let volumes = pod["volumes"].as_array_mut().unwrap();
    let before = volumes.len();
    volumes.retain(|v| !HOOKS_D_VOLUMES.contains(&v["name"].as_str().unwrap()));
    assert_eq!(volumes.len(), before - HOOKS_D_VOLUMES.len(), "a hooks.d volume is missing");
    ds
}

#[test]
fn the_hooks_d_route_switch_removes_exactly_its_part() {
    if !engine() {
        return;
    }
    let on = render(&["podMonitor.enabled=true"]);
    let off = render(&["podMonitor.enabled=true,routes.hooksD=false"]);
    assert_eq!(container_names(&off), ["install", "nri", "follow"]);
    assert_eq!(
        without_hooks_d(&on),
        *object(&off, "DaemonSet"),
        "routes.hooksD=false changed more than HOOKS_DIR and the hooks.d mounts and volumes"
    );
    assert_eq!(kinds(&on), kinds(&off));
    for (a, b) in on.iter().zip(&off).filter(|(a, _)| a["kind"] != "DaemonSet") {
        assert_eq!(a, b, "routes.hooksD=false changed the {}", a["kind"]);
    }
    // Only install mounts them, so no other container loses a mount with the volumes.
    let pod = pod_spec(&on);
    for c in pod["initContainers"].as_array().unwrap().iter().chain(pod["containers"].as_array().unwrap()) {
        if c["name"] == "install" {
            continue;
        }
        for m in c["volumeMounts"].as_array().unwrap() {
            assert!(!HOOKS_D_VOLUMES.contains(&m["name"].as_str().unwrap()), "{} mounts {}", c["name"], m["name"]);
        }
    }
    // What the install step still writes: the binary, the config (from the ConfigMap) and the
    // state dir's mode.
    let install = &pod_spec(&off)["initContainers"][0];
    let mounts: Vec<_> =
        install["volumeMounts"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(mounts, ["host-bin", "host-config", "state", "config"]);
}

#[test]
fn the_base_spec_route_switch_adds_exactly_its_part() {
    if !engine() {
        return;
    }
    let off = render(&[]);
    let on = render(&["routes.containerdBaseSpec=true"]);
    assert_eq!(container_names(&on), ["install", "base-spec", "nri", "follow"]);
    // The DaemonSet: the base-spec init container and its volume, and the pod template's hash of
    // the ConfigMap, which now holds the base spec.
    let mut ds = object(&on, "DaemonSet").clone();
    let pod = &mut ds["spec"]["template"]["spec"];
    let inits = pod["initContainers"].as_array_mut().unwrap();
    let init = inits.remove(1);
    let volumes = pod["volumes"].as_array_mut().unwrap();
    let at = volumes.iter().position(|v| v["name"] == "host-containerd").expect("the host-containerd volume");
    assert_eq!(
        volumes.remove(at)["hostPath"],
        serde_json::json!({"path": "/etc/containerd", "type": "DirectoryOrCreate"})
    );
    let sum = |d: &Value| d["spec"]["template"]["metadata"]["annotations"]["checksum/config"].clone();
    assert_ne!(sum(&ds), sum(object(&off, "DaemonSet")), "the base spec is in the ConfigMap: its hash changes");
    ds["spec"]["template"]["metadata"]["annotations"]["checksum/config"] = sum(object(&off, "DaemonSet"));
    assert_eq!(
        ds,
        *object(&off, "DaemonSet"),
        "routes.containerdBaseSpec=true changed more than its init container and volume"
    );
    // Its init container: the image's busybox, the same image and confinement as install, the
    // host's /etc/containerd and the ConfigMap only.
    let install = &object(&off, "DaemonSet")["spec"]["template"]["spec"]["initContainers"][0];
    for k in ["image", "imagePullPolicy", "securityContext", "resources"] {
        assert_eq!(init[k], install[k], "base-spec's {k}");
    }
    assert_eq!(init["command"], serde_json::json!(["/bin/busybox", "sh", "-c"]));
    let script = init["args"][0].as_str().unwrap();
    assert!(script.starts_with("set -eu;") && script.contains("mv -f /host/etc/containerd/.oci-coresched-hook-base-spec.json.tmp /host/etc/containerd/oci-coresched-hook-base-spec.json;"), "{script}");
    assert_eq!(
        init["volumeMounts"],
        serde_json::json!([{"name": "host-containerd", "mountPath": "/host/etc/containerd"}, {"name": "config", "mountPath": "/config", "readOnly": true}])
    );
    // The ConfigMap: config.toml unchanged, plus the base spec whose hooks run the installed binary.
    let mut cm = object(&on, "ConfigMap").clone();
    let spec =
        cm["data"].as_object_mut().unwrap().remove("base-runtime-spec.json").expect("the base spec in the ConfigMap");
    assert_eq!(cm, *object(&off, "ConfigMap"));
    let got: Value = serde_json::from_str(spec.as_str().unwrap()).expect("the base spec is JSON");
    let mut want: Value = serde_json::from_str(&read(BASE_SPEC)).unwrap();
    let mut paths = 0;
    for stage in want["hooks"].as_object_mut().expect("hooks").values_mut() {
        for h in stage.as_array_mut().unwrap() {
            if h["path"] == "/usr/bin/oci-coresched-hook" {
                h["path"] = "/usr/local/bin/oci-coresched-hook".into();
                paths += 1;
            }
        }
    }
    assert_eq!(paths, 3, "{BASE_SPEC} has three hooks on /usr/bin/oci-coresched-hook");
    assert_eq!(got, want, "the ConfigMap's base spec is not {BASE_SPEC} with its hooks on /usr/local/bin");
}

#[test]
fn a_config_change_rolls_the_pods_and_changes_nothing_else() {
    if !engine() {
        return;
    }
    let before = render(&[]);
    let after = render(&["config.log_level=debug"]);
    let toml = |objs: &[Value]| object(objs, "ConfigMap")["data"]["config.toml"].as_str().unwrap().to_string();
    let (a, b) = (toml(&before), toml(&after));
    let changed: Vec<(&str, &str)> = a.lines().zip(b.lines()).filter(|(x, y)| x != y).collect();
    assert_eq!(changed, [("log_level = \"info\"", "log_level = \"debug\"")], "{a}\n---\n{b}");
    assert_eq!(a.lines().count(), b.lines().count());
    let template = |objs: &[Value]| object(objs, "DaemonSet")["spec"]["template"].clone();
    let (mut ta, mut tb) = (template(&before), template(&after));
    let sum = |t: &Value| t["metadata"]["annotations"]["checksum/config"].as_str().unwrap().to_string();
    let (sa, sb) = (sum(&ta), sum(&tb));
    assert!(sa.len() == 64 && sa.bytes().all(|c| c.is_ascii_hexdigit()), "checksum/config {sa:?}");
    assert_ne!(sa, sb, "a config change left checksum/config alone: the pods would not roll");
    for t in [&mut ta, &mut tb] {
        t["metadata"]["annotations"].as_object_mut().unwrap().remove("checksum/config");
    }
    assert_eq!(ta, tb, "a config change changed more of the pod template than checksum/config");
    let mut da = object(&before, "DaemonSet").clone();
    let mut db = object(&after, "DaemonSet").clone();
    da["spec"]["template"] = Value::Null;
    db["spec"]["template"] = Value::Null;
    assert_eq!(da, db);

    // Every config the chart renders is one the binary accepts (the install step checks it too).
    let dir = tempfile_dir("helm-config");
    for (i, sets) in [
        &[][..],
        &["config.log_level=debug,config.fail_closed=true,config.lock_timeout_ms=500"][..],
        &["config.qos.BE.sched_idle=true,config.qos.BE.core_expeller=true,config.qos.LSR.enable=false"][..],
        &["config.log_file=/var/log/oci-coresched-hook.log,config.enable_schedstats=true,config.sched_ext_guard=false"]
            [..],
    ]
    .iter()
    .enumerate()
    {
        let path = dir.join(format!("config-{i}.toml"));
        let text = toml(&render(sets));
        std::fs::write(&path, &text).unwrap();
        let mut cmd = Command::new(HOOK);
        cmd.arg("check-config").arg(&path);
        let out = run_command(None, cmd, None, TIMEOUT);
        assert!(out.success(), "check-config refuses the chart's config for {sets:?}:\n{text}\n{out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("och-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn ports_image_and_placement_are_set_once() {
    if !engine() {
        return;
    }
    let objs = render(&[
        "ports.follow=19642,ports.nri=19643,image.repository=registry.example/och,image.tag=9.9.9,image.pullPolicy=Always",
        "string:nodeSelector.feature\\.node\\.kubernetes\\.io/cpu-hardware_multithreading=true",
        "priorityClassName=",
    ]);
    let ds = object(&objs, "DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(ds["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"], "19642");
    for c in pod["initContainers"].as_array().unwrap().iter().chain(pod["containers"].as_array().unwrap()) {
        assert_eq!(c["image"], "registry.example/och:9.9.9", "{}", c["name"]);
        assert_eq!(c["imagePullPolicy"], "Always", "{}", c["name"]);
    }
    for (name, port, port_name) in [("nri", 19643, "nri-metrics"), ("follow", 19642, "metrics")] {
        let c = pod["containers"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap();
        let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        assert_eq!(args[args.len() - 2..], ["--listen".to_string(), format!("$(POD_IP):{port}")], "{name}");
        assert_eq!(c["ports"], serde_json::json!([{"name": port_name, "containerPort": port}]), "{name}");
    }
    assert_eq!(
        pod["nodeSelector"],
        serde_json::json!({"kubernetes.io/os": "linux", "feature.node.kubernetes.io/cpu-hardware_multithreading": "true"})
    );
    assert!(pod.get("priorityClassName").is_none(), "an empty priorityClassName is left out: {pod}");
    // A label value --set turns into a boolean is refused (node labels are strings).
    let out = helm_py(&["render", "--set", "nodeSelector.smt=true"]);
    assert!(!out.success() && out.stderr.contains("at '/nodeSelector/smt': got boolean, want string"), "{out}");
}

#[test]
fn the_optional_monitoring_objects_render() {
    if !engine() {
        return;
    }
    let base = render(&[]);
    for kind in ["PodMonitor", "PrometheusRule"] {
        assert!(!kinds(&base).contains(&kind.to_string()), "{kind} rendered by default");
    }
    assert_eq!(base.iter().filter(|o| o["kind"] == "ConfigMap").count(), 1, "a dashboard ConfigMap by default");
    let objs = render(&[
        "podMonitor.enabled=true,podMonitor.labels.release=kps,podMonitor.interval=15s",
        "prometheusRule.enabled=true,prometheusRule.labels.release=kps",
        "dashboard.enabled=true,dashboard.namespace=monitoring",
    ]);
    let pm = object(&objs, "PodMonitor");
    assert_eq!(pm["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(pm["metadata"]["namespace"], "oci-coresched-hook");
    assert_eq!(pm["metadata"]["labels"]["release"], "kps");
    let ds = object(&objs, "DaemonSet");
    assert_eq!(
        pm["spec"]["selector"]["matchLabels"], ds["spec"]["selector"]["matchLabels"],
        "the PodMonitor selects the pods"
    );
    for ep in pm["spec"]["podMetricsEndpoints"].as_array().unwrap() {
        assert_eq!(ep["interval"], "15s");
        let port = ep["port"].as_str().unwrap();
        let named = ds["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| c["ports"].as_array().unwrap())
            .any(|p| p["name"] == port);
        assert!(named, "the PodMonitor scrapes port {port}, which no container names");
    }
    let pr = object(&objs, "PrometheusRule");
    assert_eq!(pr["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(pr["metadata"]["labels"]["release"], "kps");
    assert_eq!(pr["spec"]["groups"], yaml_file(RULES)["groups"], "the PrometheusRule's groups are not {RULES}'s");
    let dash = objs
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "oci-coresched-hook-dashboard")
        .expect("the dashboard ConfigMap");
    assert_eq!(dash["metadata"]["namespace"], "monitoring");
    assert_eq!(dash["metadata"]["labels"]["grafana_dashboard"], "1");
    let json: Value = serde_json::from_str(dash["data"]["oci-coresched-hook.dashboard.json"].as_str().unwrap())
        .expect("dashboard JSON");
    let want: Value = serde_json::from_str(&read(DASHBOARD)).unwrap();
    assert_eq!(json, want, "the dashboard ConfigMap is not {DASHBOARD}");
}

#[test]
fn renders_pass_kubernetes_validate() {
    if !engine() {
        return;
    }
    if which("kubernetes-validate").is_none() {
        skip(&this_test(), "kubernetes-validate not installed (pip install kubernetes-validate into the venv)");
        return;
    }
    let dir = tempfile_dir("helm-validate");
    // The Prometheus Operator's kinds are not Kubernetes' own: kubernetes-validate has no schema
    // for them, so the renders checked here are the ones without them.
    for (i, set) in [
        "namespace.create=true",
        "routes.nri=false,routes.containerdBaseSpec=true",
        "routes.hooksD=false",
        "config.qos.BE.sched_idle=true,dashboard.enabled=true",
    ]
    .iter()
    .enumerate()
    {
        let out = helm_py(&["render", "--set", set]);
        assert!(out.success(), "{out}");
        let path = dir.join(format!("render-{i}.yaml"));
        std::fs::write(&path, &out.stdout).unwrap();
        let mut cmd = Command::new("kubernetes-validate");
        cmd.args(["--strict", "--quiet"]).arg(&path);
        let v = run_command(None, cmd, None, TIMEOUT);
        assert!(v.success(), "kubernetes-validate --strict on the render with {set}: {v}");
    }
    // The check bites: a field Kubernetes does not know fails it.
    let bad = read(MANIFEST).replace("      hostPID: true\n", "      hostPID: true\n      hostPIDs: true\n");
    let path = dir.join("bad.yaml");
    std::fs::write(&path, bad).unwrap();
    let mut cmd = Command::new("kubernetes-validate");
    cmd.args(["--strict", "--quiet"]).arg(&path);
    assert!(!run_command(None, cmd, None, TIMEOUT).success(), "kubernetes-validate accepted an unknown field");
    let _ = std::fs::remove_dir_all(&dir);
}
