//! The unit tests of `src/ops/metrics.rs`.

use super::*;
use std::io::Write as _;

use crate::host::kernel::Scope;
use crate::host::kernel::fake::{FakeKernel, FakeMode};
use crate::store::Member;
use crate::test_world::{Ground, World};
use crate::values::{Labels, Pid};

fn member(id: &str, group: &str, pid: Pid, start_time: u64, cookie: u64) -> Member {
    Member {
        cookie,
        labels: Labels {
            namespace: Some("tenant-a".into()),
            pod_name: Some(format!("pod-{id}")),
            pod_uid: Some(format!("uid-{id}")),
            container_name: Some(format!("ctr-{id}")),
            ..Default::default()
        },
        ..Member::new(id, group, pid, start_time)
    }
}

struct Seeded {
    _dir: tempfile::TempDir,
    proc: ProcFs,
    kernel: FakeKernel,
    store: Store,
    /// Cookie of group tenant-a/web on the fake kernel.
    web: u64,
}

fn seeded() -> Seeded {
    let (Ground { dir, fp, proc, kernel }, store) = World::new().into_parts();
    for (pid, start) in [(100, 10), (101, 11), (200, 20), (300, 99)] {
        fp.spawn(pid, start, 0, "/kubepods/x").unwrap();
    }
    kernel.create(100, Scope::ThreadGroup).unwrap();
    let web = kernel.get(100).unwrap();
    kernel.force(101, web);
    kernel.create(200, Scope::ThreadGroup).unwrap();
    kernel.deny(200); // GET fails: the cached cookie is reported

    store.transaction(|tx| tx.upsert_member(&member("a1", "tenant-a/web", 100, 10, 0x1))).unwrap();
    store.transaction(|tx| tx.upsert_member(&member("a2", "tenant-a/web", 101, 11, web))).unwrap();
    let mut odd = member("b1", "tenant-a/pod:sb\"1", 200, 20, 0xdead_beef_dead_beef);
    odd.labels.pod_name = Some("we\"ird\\na\nme".into());
    odd.labels.pod_uid = None;
    odd.labels.container_name = None;
    odd.labels.namespace = None;
    store.transaction(|tx| tx.upsert_member(&odd)).unwrap();
    store.transaction(|tx| tx.upsert_member(&member("dead", "tenant-a/web", 150, 15, web))).unwrap();
    store.transaction(|tx| tx.upsert_member(&member("reused", "tenant-b/gone", 300, 30, 0x77))).unwrap();
    store.transaction(|tx| tx.count("tenant-a/web", true)).unwrap();
    store.transaction(|tx| tx.count("tenant-a/web", true)).unwrap();
    store.transaction(|tx| tx.count("tenant-a/web", false)).unwrap();
    store.transaction(|tx| tx.count("tenant-a/pod:sb\"1", true)).unwrap();
    store.transaction(|tx| tx.count_failure(crate::error::FailureReason::Kernel)).unwrap();
    store.transaction(|tx| tx.count_failure(crate::error::FailureReason::LockTimeout)).unwrap();
    store.transaction(|tx| tx.count_failure(crate::error::FailureReason::LockTimeout)).unwrap();
    Seeded { _dir: dir, proc, kernel, store, web }
}

/// Parses exposition text with the reference Python client's parser. `None` when the parser
/// is not installed (outside CI); in CI its absence is a failure.
fn parse_with_prometheus_client(text: &str) -> Option<serde_json::Value> {
    const SCRIPT: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for f in text_string_to_metric_families(sys.stdin.read()):
    out.append({"name": f.name, "type": f.type, "documentation": f.documentation,
                "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples]})
print(json.dumps(out))
"#;
    let have = std::process::Command::new("python3")
        .args(["-c", "import prometheus_client.parser"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !have {
        crate::test_skip::skip(
            "metrics: the Prometheus parser check",
            "python3 with prometheus_client not installed (scripts/test-all.sh puts it in its venv: scripts/requirements-test.txt)",
        );
        return None;
    }
    let mut child = std::process::Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client rejected the text:\n{}\n--- text ---\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// Runs `promtool check metrics` when it is installed (`tests/common/promtool.rs`).
pub(crate) fn promtool_check(text: &str) -> Option<String> {
    crate::test_promtool::check("metrics: promtool check metrics", text, crate::test_skip::skip)
}

fn family_of<'a>(fams: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    fams.as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no family {name} in {fams:#}"))
}

fn sample_value(fam: &serde_json::Value, want: &[(&str, &str)]) -> f64 {
    let hits: Vec<&serde_json::Value> =
        fam["samples"].as_array().unwrap().iter().filter(|s| want.iter().all(|(k, v)| s["labels"][*k] == *v)).collect();
    assert_eq!(hits.len(), 1, "{want:?} in {fam:#}");
    hits[0]["value"].as_f64().unwrap()
}

#[test]
fn render_is_valid_exposition_and_reports_live_members() {
    let s = seeded();
    let text = render(&s.store, &s.kernel, &s.proc).unwrap();

    // Independent of the parser: the raw shape.
    for name in [
        "oci_coresched_hook_container_cookie",
        "oci_coresched_hook_group_ensures_total",
        "oci_coresched_hook_failures_total",
        "oci_coresched_hook_group_members",
    ] {
        assert!(text.contains(&format!("# HELP {name} ")), "{name}\n{text}");
        assert!(text.contains(&format!("# TYPE {name} ")), "{name}\n{text}");
    }
    assert!(text.ends_with('\n'));
    assert!(!text.contains("container_id=\"dead\""), "{text}");
    assert!(!text.contains("container_id=\"reused\""), "{text}");
    assert!(text.contains(r#"pod_name="we\"ird\\na\nme""#), "{text}");
    assert!(text.contains(r#"core_sched_group="tenant-a/pod:sb\"1""#), "{text}");
    assert!(!text.contains("oci_coresched_hook_kernel_supported"), "the node's families are render_node's: {text}");

    promtool_check(&text);
    let Some(fams) = parse_with_prometheus_client(&text) else { return };
    let cookie = family_of(&fams, "oci_coresched_hook_container_cookie");
    assert_eq!(cookie["type"], "gauge");
    let samples = cookie["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 3, "{cookie:#}");
    // a1: the cache says 0x1, the kernel says the group's cookie: the kernel wins.
    let a1 = &samples.iter().find(|x| x["labels"]["container_id"] == "a1").unwrap()["labels"];
    assert_eq!(a1["container_id"], "a1");
    assert_eq!(a1["pod_name"], "pod-a1");
    assert_eq!(a1["pod_namespace"], "tenant-a");
    assert_eq!(a1["pod_uid"], "uid-a1");
    assert_eq!(a1["container_name"], "ctr-a1");
    assert_eq!(a1["core_sched_group"], "tenant-a/web");
    assert_eq!(a1["core_sched_cookie"], format!("{:#x}", s.web));
    assert_eq!(sample_value(cookie, &[("container_id", "a1")]), s.web as f64);
    assert_eq!(sample_value(cookie, &[("container_id", "a2")]), s.web as f64);
    // b1: GET is denied, so the cached cookie is reported; escaped labels round-trip.
    let b1 = &samples.iter().find(|x| x["labels"]["container_id"] == "b1").unwrap()["labels"];
    assert_eq!(b1["pod_name"], "we\"ird\\na\nme");
    assert_eq!(b1["core_sched_group"], "tenant-a/pod:sb\"1");
    assert_eq!(b1["core_sched_cookie"], "0xdeadbeefdeadbeef");
    assert_eq!(b1["pod_uid"], "");
    assert_eq!(sample_value(cookie, &[("container_id", "b1")]), 0xdead_beef_dead_beef_u64 as f64);

    // The parser names a counter family without its `_total` suffix.
    let status = family_of(&fams, "oci_coresched_hook_group_ensures");
    assert_eq!(status["type"], "counter");
    assert_eq!(sample_value(status, &[("core_sched_group", "tenant-a/web"), ("status", "succeeded")]), 2.0);
    assert_eq!(sample_value(status, &[("core_sched_group", "tenant-a/web"), ("status", "failed")]), 1.0);
    assert_eq!(sample_value(status, &[("core_sched_group", "tenant-a/pod:sb\"1"), ("status", "succeeded")]), 1.0);
    assert_eq!(sample_value(status, &[("core_sched_group", "tenant-b/gone"), ("status", "failed")]), 0.0);

    let failures = family_of(&fams, "oci_coresched_hook_failures");
    assert_eq!(failures["type"], "counter");
    assert_eq!(sample_value(failures, &[("reason", "lock_timeout")]), 2.0);
    assert_eq!(sample_value(failures, &[("reason", "kernel")]), 1.0);

    let members = family_of(&fams, "oci_coresched_hook_group_members");
    assert_eq!(members["type"], "gauge");
    assert_eq!(sample_value(members, &[("core_sched_group", "tenant-a/web")]), 2.0);
    assert_eq!(sample_value(members, &[("core_sched_group", "tenant-a/pod:sb\"1")]), 1.0);
    assert_eq!(sample_value(members, &[("core_sched_group", "tenant-b/gone")]), 0.0);
}

/// Runs `render_is_valid_exposition_and_reports_live_members` alone in a child test process
/// whose `PATH` has neither `promtool` nor `python3`, with or without `CI`.
fn run_exposition_test_without_checkers(ci: bool) -> (bool, String) {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "ops::metrics::tests::render_is_valid_exposition_and_reports_live_members"])
        .args(["--test-threads", "1"])
        .env("PATH", "/nonexistent-och-test-path")
        .env_remove("CI")
        .stdin(std::process::Stdio::null());
    if ci {
        cmd.env("CI", "true");
    }
    let out = cmd.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// The checks by promtool and prometheus_client never vanish silently: without the tool the
/// test says SKIPPED on stderr (visible even when the test passes, without --nocapture), and
/// under CI it fails instead.
#[test]
fn missing_exposition_checkers_are_visible_skips_and_fail_under_ci() {
    let (ok, text) = run_exposition_test_without_checkers(false);
    assert!(ok, "without CI, a missing checker is a skip, not a failure:\n{text}");
    let err_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("SKIPPED ")).collect();
    assert!(err_lines.iter().any(|l| l.contains("promtool")), "no visible SKIPPED line for promtool:\n{text}");
    assert!(
        err_lines.iter().any(|l| l.contains("prometheus_client")),
        "no visible SKIPPED line for prometheus_client:\n{text}"
    );
    let (ok, text) = run_exposition_test_without_checkers(true);
    assert!(!ok, "with CI set, a missing promtool must fail the test:\n{text}");
    assert!(text.contains("promtool") && text.contains("CI is set"), "{text}");
}

#[test]
fn unsupported_kernel_reports_zero_and_cached_cookies() {
    let s = seeded();
    s.kernel.set_mode(FakeMode::Unsupported);
    let text = render(&s.store, &s.kernel, &s.proc).unwrap();
    // a1's GET fails now: its cached cookie (0x1) is what is reported.
    assert!(text.contains(r#"container_id="a1",core_sched_group="tenant-a/web",core_sched_cookie="0x1"} 1"#), "{text}");
    let node = render_node(&s.kernel, &s._dir.path().join("no-sys"), true);
    assert!(node.contains("oci_coresched_hook_kernel_supported 0\n"), "{node}");
    s.kernel.set_mode(FakeMode::NoSmt);
    assert!(
        render_node(&s.kernel, &s._dir.path().join("no-sys"), true).contains("oci_coresched_hook_kernel_supported 0\n")
    );
}

#[test]
fn empty_cache_is_still_valid() {
    let w = World::new();
    let text = render(&w.store, &w.kernel, &w.proc).unwrap();
    if let Some(fams) = parse_with_prometheus_client(&text) {
        assert_eq!(fams.as_array().unwrap().len(), 4, "{fams:#}");
    }
}

/// A sysfs tree: SMT `active`, sched_ext `state` (and `root/ops`), and vulnerability files.
fn sysfs(dir: &std::path::Path, smt: Option<&str>, ext: Option<(&str, Option<&str>)>, vulns: &[(&str, &str)]) {
    std::fs::create_dir_all(dir.join("kernel")).unwrap();
    if let Some(active) = smt {
        std::fs::create_dir_all(dir.join(crate::host::cpu::SMT_DIR)).unwrap();
        std::fs::write(dir.join(crate::host::cpu::SMT_DIR).join("active"), format!("{active}\n")).unwrap();
    }
    if let Some((state, ops)) = ext {
        let d = dir.join(crate::host::sched_ext::DIR);
        std::fs::create_dir_all(d.join("root")).unwrap();
        std::fs::write(d.join("state"), format!("{state}\n")).unwrap();
        if let Some(ops) = ops {
            std::fs::write(d.join("root/ops"), format!("{ops}\n")).unwrap();
        }
    }
    let v = dir.join(crate::host::cpu::VULNERABILITIES_DIR);
    std::fs::create_dir_all(&v).unwrap();
    for (name, text) in vulns {
        std::fs::write(v.join(name), format!("{text}\n")).unwrap();
    }
}

#[test]
fn the_nodes_families_say_what_the_kernel_and_the_cpu_let_core_scheduling_do() {
    use crate::host::kernel::guard::Guarded;
    let w = World::new();
    let sys = w.dir.path().join("sys");
    sysfs(
        &sys,
        Some("1"),
        Some(("enabled", Some("simple"))),
        &[
            ("meltdown", "Not affected"),
            ("mds", "Mitigation: Clear CPU buffers; SMT vulnerable"),
            ("l1tf", "Mitigation: PTE Inversion; VMX: conditional cache flushes, SMT disabled"),
            ("spectre_v1", "Mitigation: usercopy/swapgs barriers and __user pointer sanitization"),
            ("spectre_v2", "Mitigation: Retpolines; IBPB: conditional; STIBP: disabled; RSB filling"),
            ("itlb_multihit", "KVM: Vulnerable"),
            ("srbds", "Unknown: Dependent on hypervisor status"),
        ],
    );
    // The guard holds every cookie off, and the kernel's own answer is still "supported".
    let guarded = Guarded::new(&w.kernel, sys.clone());
    assert!(guarded.probe().is_err());
    let text = render_node(&guarded, &sys, true);
    for line in [
        "oci_coresched_hook_kernel_supported 1\n",
        "oci_coresched_hook_smt_active 1\n",
        "oci_coresched_hook_sched_ext_enabled{scheduler=\"simple\"} 1\n",
        "oci_coresched_hook_sched_ext_guard 1\n",
        "oci_coresched_hook_cpu_vulnerable{vulnerability=\"meltdown\"} 0\n",
        "oci_coresched_hook_cpu_vulnerable{vulnerability=\"mds\"} 1\n",
        "oci_coresched_hook_cpu_vulnerable{vulnerability=\"l1tf\"} 0\n",
        "oci_coresched_hook_cpu_vulnerable{vulnerability=\"spectre_v1\"} 0\n",
        "oci_coresched_hook_cpu_vulnerable{vulnerability=\"spectre_v2\"} 1\n",
        "oci_coresched_hook_cpu_vulnerable{vulnerability=\"itlb_multihit\"} 1\n",
        "oci_coresched_hook_cpu_vulnerable{vulnerability=\"srbds\"} 0\n",
    ] {
        assert!(text.contains(line), "no {line:?} in\n{text}");
    }
    let info = format!(
        "oci_coresched_hook_build_info{{version=\"{}\",commit=\"{}\"}} 1\n",
        env!("CARGO_PKG_VERSION"),
        env!("OCH_COMMIT")
    );
    assert!(text.contains(&info), "{text}");
    promtool_check(&text);
    if let Some(fams) = parse_with_prometheus_client(&text) {
        assert_eq!(fams.as_array().unwrap().len(), 6, "{fams:#}");
    }

    // Unloaded, the guard off, SMT off: every family still there.
    sysfs(&sys, Some("0"), Some(("disabled", None)), &[]);
    std::fs::remove_file(sys.join(crate::host::sched_ext::DIR).join("root/ops")).unwrap();
    let text = render_node(&w.kernel, &sys, false);
    for line in [
        "oci_coresched_hook_smt_active 0\n",
        "oci_coresched_hook_sched_ext_enabled{scheduler=\"\"} 0\n",
        "oci_coresched_hook_sched_ext_guard 0\n",
    ] {
        assert!(text.contains(line), "no {line:?} in\n{text}");
    }

    // No sysfs at all: the state cannot be told (1), SMT and the vulnerabilities have no sample.
    let text = render_node(&w.kernel, &w.dir.path().join("nothing"), true);
    assert!(text.contains("oci_coresched_hook_sched_ext_enabled{scheduler=\"\"} 1\n"), "{text}");
    assert!(text.contains("# TYPE oci_coresched_hook_smt_active gauge\n"), "{text}");
    assert!(!text.contains("\noci_coresched_hook_smt_active "), "{text}");
    assert!(!text.contains("oci_coresched_hook_cpu_vulnerable{"), "{text}");
    promtool_check(&text);
}

#[test]
fn refusals_are_a_counter() {
    let text = render_refusals(3);
    assert!(text.contains("# TYPE oci_coresched_hook_sched_ext_refusals_total counter\n"), "{text}");
    assert!(text.ends_with("oci_coresched_hook_sched_ext_refusals_total 3\n"), "{text}");
    promtool_check(&text);
}

#[test]
fn pod_labels_come_from_kubelet_then_containerd_annotations() {
    use crate::decide::policy::PodLabels;
    let ann = |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let containerd = ann(&[
        ("io.kubernetes.cri.sandbox-name", "web-0"),
        ("io.kubernetes.cri.sandbox-uid", "u-1"),
        ("io.kubernetes.cri.container-name", "app"),
    ]);
    assert_eq!(
        PodLabels::from_annotations(&containerd),
        PodLabels { name: Some("web-0".into()), uid: Some("u-1".into()), container_name: Some("app".into()) }
    );
    let both = ann(&[
        ("io.kubernetes.pod.name", "kubelet-name"),
        ("io.kubernetes.cri.sandbox-name", "cri-name"),
        ("io.kubernetes.pod.uid", ""),
        ("io.kubernetes.cri.sandbox-uid", "u-2"),
        ("io.kubernetes.container.name", "bad\u{7}name"),
    ]);
    let long = "x".repeat(crate::decide::policy::MAX_POD_LABEL_LEN + 1);
    assert_eq!(
        PodLabels::from_annotations(&both),
        PodLabels { name: Some("kubelet-name".into()), uid: Some("u-2".into()), container_name: None },
        "kubelet keys win, an empty value defers, a control character drops the label"
    );
    assert_eq!(PodLabels::from_annotations(&ann(&[("io.kubernetes.pod.name", &long)])), PodLabels::default());
}

#[test]
fn hook_run_records_pod_labels_that_metrics_report() {
    use crate::config::Config;
    use crate::hook::{self, Stage};
    use crate::host::oci_state::State;

    let w = crate::test_world::World::new();
    let (dir, fp, proc, kernel) = (&w.dir, &w.fp, &w.proc, &w.kernel);
    fp.spawn(4242, 77, 1, "/kubepods/pod-u1/ctr").unwrap();
    let annotations = [
        ("io.kubernetes.cri.sandbox-namespace", "tenant-a"),
        ("io.kubernetes.cri.sandbox-id", "sb1"),
        ("io.kubernetes.cri.sandbox-name", "web-0"),
        ("io.kubernetes.cri.sandbox-uid", "u1"),
        ("io.kubernetes.cri.container-name", "app"),
    ];
    let state = State {
        id: "c1".into(),
        status: "creating".into(),
        pid: Some(4242),
        bundle: None,
        annotations: annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    };
    let config = Config::default();
    let decision =
        crate::decide::policy::decide(&hook::input(&state, Some(Stage::CreateRuntime)).unwrap(), &config).unwrap();
    assert_eq!(decision.pod.name.as_deref(), Some("web-0"));
    assert!(!serde_json::to_string(&decision).unwrap().contains("web-0"), "explain's JSON is unchanged");
    let sd = dir.path().join("state");
    let sys = w.sys(sd.clone());
    hook::run(&decision, &config, &sys).unwrap();

    let store = Store::open(&sd.join("cache.db")).unwrap();
    let m = store.member("c1").unwrap().unwrap();
    assert_eq!(
        (m.labels.pod_name.as_deref(), m.labels.pod_uid.as_deref(), m.labels.container_name.as_deref()),
        (Some("web-0"), Some("u1"), Some("app"))
    );
    let text = render(&store, kernel, proc).unwrap();
    let want = format!(
        "oci_coresched_hook_container_cookie{{pod_name=\"web-0\",pod_namespace=\"tenant-a\",pod_uid=\"u1\",\
             container_name=\"app\",container_id=\"c1\",core_sched_group=\"{}\",core_sched_cookie=\"{:#x}\"}} ",
        m.group, m.cookie
    );
    assert!(text.contains(&want), "{want}\n{text}");
}
