//! The monitoring files `packaging/` ships, checked with promtool and against the pages the real
//! binary serves:
//!
//! * the alerting rules (`packaging/prometheus/oci-coresched-hook.rules.yaml`) pass `promtool
//!   check rules`, and their unit tests (`….rules.test.yaml`) pass `promtool test rules` with, for
//!   every alert, a case where it fires and one where it does not;
//! * the Prometheus Operator's PrometheusRule (`packaging/kubernetes/prometheusrule.yaml`) holds
//!   the same groups, in the PodMonitor's namespace;
//! * every alert has a severity, a summary and a description that names its section of
//!   `docs/metrics.md`, and that section exists;
//! * the Grafana dashboard (`packaging/grafana/oci-coresched-hook.dashboard.json`) queries through
//!   its `${datasource}` variable, and each of its expressions parses (promtool);
//! * every metric family an expression of the rules or the dashboard names is one a real page
//!   serves: the follower's `--listen` page over the fake kernel, `metrics`, and the NRI plugin's;
//!   the node's families (the kernel's support, SMT, sched_ext, the CPU's vulnerabilities, the
//!   build) are on both agents' pages.
//!
//! The YAML is read with python3's yaml module (Debian: `python3-yaml`). Without it, promtool
//! (`prometheus`) or the feature `fake-kernel`, a test fails under `CI` and prints `SKIPPED`
//! otherwise.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{MANIFEST_DIR, run_command, skip, which};

const RULES: &str = "packaging/prometheus/oci-coresched-hook.rules.yaml";
const RULE_TESTS: &str = "packaging/prometheus/oci-coresched-hook.rules.test.yaml";
const PROMETHEUS_RULE: &str = "packaging/kubernetes/prometheusrule.yaml";
const POD_MONITOR: &str = "packaging/kubernetes/podmonitor.yaml";
const DASHBOARD: &str = "packaging/grafana/oci-coresched-hook.dashboard.json";
const METRICS_DOC: &str = "docs/metrics.md";

/// The prefixes of the families the project serves; any other name (`up`, a function) is not
/// the project's to serve.
const PREFIXES: [&str; 3] = ["oci_coresched_hook_", "container_core_sched_", "core_sched_"];

const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

fn repo(rel: &str) -> PathBuf {
    Path::new(MANIFEST_DIR).join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

/// `promtool ARGS` (in the crate root), which must succeed; `None` (a skip) without promtool.
fn promtool(test: &str, args: &[&str]) -> Option<String> {
    if which("promtool").is_none() {
        skip(test, "promtool not installed (apt-get install prometheus)");
        return None;
    }
    let mut cmd = Command::new("promtool");
    cmd.args(args).current_dir(MANIFEST_DIR);
    let out = run_command(None, cmd, None, TOOL_TIMEOUT);
    assert!(out.success(), "{out}");
    Some(out.stdout + &out.stderr)
}

/// The YAML file `rel` as JSON, read by python3's yaml module; `None` (a skip) without it.
fn yaml(test: &str, rel: &str) -> Option<Value> {
    const MISSING: &str = "python3 with its yaml module not installed (apt-get install python3-yaml)";
    if which("python3").is_none() {
        skip(test, MISSING);
        return None;
    }
    let mut cmd = Command::new("python3");
    cmd.args(["-c", "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)"]).arg(repo(rel));
    let out = run_command(None, cmd, None, TOOL_TIMEOUT);
    if !out.success() && out.stderr.contains("No module named 'yaml'") {
        skip(test, MISSING);
        return None;
    }
    assert!(out.success(), "{rel}: {out}");
    Some(serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{rel}: {e}: {out}")))
}

/// Every rule of a rules document (`groups` → `rules`).
fn rules(doc: &Value) -> Vec<&Value> {
    let groups = doc["groups"].as_array().expect("groups");
    groups.iter().flat_map(|g| g["rules"].as_array().expect("rules")).collect()
}

/// A rule's alert name.
fn alert_name(rule: &Value) -> &str {
    rule["alert"].as_str().unwrap_or_else(|| panic!("not an alerting rule: {rule}"))
}

/// Every panel of a dashboard, those inside collapsed rows included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().expect("panels") {
        out.push(p);
        out.extend(p["panels"].as_array().into_iter().flatten());
    }
    out
}

/// Every PromQL expression of the dashboard: its panels' targets and its query variables, as
/// (where, expression).
fn dashboard_exprs(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in panels(dashboard) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap_or_else(|| panic!("panel {:?}: a target without expr", p["title"]));
            out.push((format!("panel {:?}", p["title"].as_str().unwrap_or("")), expr.to_string()));
        }
    }
    for v in dashboard["templating"]["list"].as_array().expect("templating") {
        if v["type"] == "query" {
            let q = v["query"]["query"].as_str().or(v["query"].as_str()).expect("a query variable's query");
            out.push((format!("variable {:?}", v["name"].as_str().unwrap_or("")), q.to_string()));
        }
    }
    out
}

/// The end (exclusive) of the string literal that starts at `i`.
fn string_end(c: &[char], i: usize) -> usize {
    let quote = c[i];
    let mut j = i + 1;
    while j < c.len() && c[j] != quote {
        j += if c[j] == '\\' && quote != '`' { 2 } else { 1 };
    }
    j + 1
}

/// The end (exclusive) of the bracketed part that opens at `i` (`(`, `{` or `[`), strings skipped.
fn close(c: &[char], i: usize) -> usize {
    let open = c[i];
    let shut = match open {
        '(' => ')',
        '{' => '}',
        _ => ']',
    };
    let (mut depth, mut j) = (0, i);
    while j < c.len() {
        match c[j] {
            '"' | '\'' | '`' => {
                j = string_end(c, j);
                continue;
            }
            x if x == open => depth += 1,
            x if x == shut => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
        j += 1;
    }
    c.len()
}

fn ident_char(x: char) -> bool {
    x.is_ascii_alphanumeric() || x == '_' || x == ':'
}

/// The metric names of the project's families that a PromQL expression (or Grafana's
/// `label_values(SELECTOR, LABEL)`) selects: identifiers outside strings, label matchers, range
/// brackets, Grafana variables and the label lists of `by`, `without`, `on`, `ignoring`,
/// `group_left` and `group_right`, that start with one of [`PREFIXES`], and the value of a
/// `__name__="…"` matcher.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let expr = expr.trim();
    let expr = match expr.strip_prefix("label_values(").and_then(|e| e.strip_suffix(')')) {
        // Only the selector: the last argument (after the last top-level comma) is a label.
        Some(args) => {
            let c: Vec<char> = args.chars().collect();
            let (mut i, mut last_comma) = (0, None);
            while i < c.len() {
                match c[i] {
                    '"' | '\'' | '`' => i = string_end(&c, i),
                    '(' | '{' | '[' => i = close(&c, i),
                    ',' => {
                        last_comma = Some(i);
                        i += 1;
                    }
                    _ => i += 1,
                }
            }
            last_comma.map_or(String::new(), |k| c[..k].iter().collect())
        }
        None => expr.to_string(),
    };
    let c: Vec<char> = expr.chars().collect();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '"' | '\'' | '`' => i = string_end(&c, i),
            '[' => i = close(&c, i),
            '{' => {
                let end = close(&c, i);
                let matchers: String = c[i..end].iter().collect();
                if let Some((_, rest)) = matchers.split_once("__name__") {
                    let value = rest.trim_start().strip_prefix('=').map(str::trim_start);
                    if let Some(name) = value.and_then(|v| v.strip_prefix('"')).and_then(|v| v.split('"').next()) {
                        out.insert(name.to_string());
                    }
                }
                i = end;
            }
            '$' => {
                i += 1;
                while i < c.len() && (ident_char(c[i]) || c[i] == '{' || c[i] == '}') {
                    i += 1;
                }
            }
            x if x.is_ascii_alphabetic() || x == '_' || x == ':' => {
                let start = i;
                while i < c.len() && ident_char(c[i]) {
                    i += 1;
                }
                let word: String = c[start..i].iter().collect();
                if ["by", "without", "on", "ignoring", "group_left", "group_right"].contains(&word.as_str()) {
                    let mut j = i;
                    while j < c.len() && c[j].is_whitespace() {
                        j += 1;
                    }
                    if j < c.len() && c[j] == '(' {
                        i = close(&c, j);
                    }
                } else if PREFIXES.iter().any(|p| word.starts_with(p)) {
                    out.insert(word);
                }
            }
            // A number (its exponent or a duration's unit included).
            x if x.is_ascii_digit() => {
                while i < c.len() && ident_char(c[i]) {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// The families a page declares (`# TYPE NAME TYPE`), with their types.
fn families(page: &str) -> BTreeMap<String, String> {
    page.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, kind)| (name.to_string(), kind.trim().to_string()))
        .collect()
}

/// Whether `name` is a family of `served`, or a series of one (a histogram's `_bucket`, `_sum`,
/// `_count`; a summary's `_sum`, `_count`).
fn is_served(name: &str, served: &BTreeMap<String, String>) -> bool {
    served.contains_key(name)
        || [("_bucket", &["histogram"][..]), ("_sum", &["histogram", "summary"]), ("_count", &["histogram", "summary"])]
            .iter()
            .any(|(suffix, kinds)| {
                name.strip_suffix(suffix).and_then(|f| served.get(f)).is_some_and(|k| kinds.contains(&k.as_str()))
            })
}

#[test]
fn metric_names_are_the_families_an_expression_selects() {
    let names = |e: &str| metric_names(e).into_iter().collect::<Vec<_>>();
    assert_eq!(
        names(
            r#"sum by (core_sched_group) (rate(oci_coresched_hook_group_force_idle_seconds_total{core_sched_group=~"core_sched_x|y", instance=~"$node(:[0-9]+)?"}[$__rate_interval]))"#
        ),
        ["oci_coresched_hook_group_force_idle_seconds_total"]
    );
    assert_eq!(
        names("oci_coresched_hook_audit_up == 0\nunless on(instance) oci_coresched_hook_kernel_supported == 0"),
        ["oci_coresched_hook_audit_up", "oci_coresched_hook_kernel_supported"]
    );
    assert_eq!(
        names(r#"label_values(oci_coresched_hook_group_members{instance=~"$node(:[0-9]+)?"}, core_sched_group)"#),
        ["oci_coresched_hook_group_members"]
    );
    assert!(names("label_values(core_sched_group)").is_empty());
    assert_eq!(
        names(
            r#"count_values("core_sched_cookie", oci_coresched_hook_container_cookie) * on(instance) group_left(core_sched_group) oci_coresched_hook_group_ensures_total offset 5m"#
        ),
        ["oci_coresched_hook_container_cookie", "oci_coresched_hook_group_ensures_total"]
    );
    assert_eq!(
        names(
            "histogram_quantile(0.99, sum without (instance) (rate(oci_coresched_hook_follow_window_seconds_bucket[5m]))) > 1e-3"
        ),
        ["oci_coresched_hook_follow_window_seconds_bucket"]
    );
    assert_eq!(names(r#"{__name__="oci_coresched_hook_nri_ready", job="x"}"#), ["oci_coresched_hook_nri_ready"]);
    assert!(names(r#"up{job=~"oci-coresched-hook.*"} == 0"#).is_empty());

    let served = families("# TYPE a_seconds histogram\n# TYPE b summary\n# TYPE c counter\n");
    assert!(is_served("a_seconds_bucket", &served) && is_served("a_seconds_count", &served));
    assert!(is_served("b_sum", &served) && !is_served("b_bucket", &served));
    assert!(is_served("c", &served) && !is_served("c_sum", &served) && !is_served("d", &served));
}

#[test]
fn promtool_checks_the_rules_and_runs_their_unit_tests() {
    let test = "promtool_checks_the_rules_and_runs_their_unit_tests";
    let Some(report) = promtool(test, &["check", "rules", RULES]) else { return };
    assert!(report.contains("SUCCESS"), "{report}");
    let Some(report) = promtool(test, &["test", "rules", RULE_TESTS]) else { return };
    assert!(report.contains("SUCCESS"), "{report}");
}

/// `promtool test rules` passes a test of an alert that does not exist when it expects nothing,
/// and one alert may have only firing cases: both are checked here.
#[test]
fn every_alert_has_a_unit_test_where_it_fires_and_one_where_it_does_not() {
    let test = "every_alert_has_a_unit_test_where_it_fires_and_one_where_it_does_not";
    let (Some(doc), Some(tests)) = (yaml(test, RULES), yaml(test, RULE_TESTS)) else { return };
    let alerts: BTreeSet<&str> = rules(&doc).into_iter().map(alert_name).collect();
    assert!(alerts.len() >= 10, "{alerts:?}");
    let mut fires = BTreeSet::new();
    let mut silent = BTreeSet::new();
    for group in tests["tests"].as_array().expect("tests") {
        for case in group["alert_rule_test"].as_array().into_iter().flatten() {
            let name = case["alertname"].as_str().expect("alertname");
            assert!(alerts.contains(name), "{RULE_TESTS} tests {name:?}, which {RULES} does not have");
            match case["exp_alerts"].as_array() {
                Some(a) if !a.is_empty() => fires.insert(name),
                _ => silent.insert(name),
            };
        }
    }
    let untested: Vec<_> = alerts.iter().filter(|a| !fires.contains(*a) || !silent.contains(*a)).collect();
    assert!(untested.is_empty(), "alerts without both a firing and a silent case in {RULE_TESTS}: {untested:?}");
}

#[test]
fn the_prometheus_rule_holds_the_same_groups_beside_the_pod_monitor() {
    let test = "the_prometheus_rule_holds_the_same_groups_beside_the_pod_monitor";
    let (Some(plain), Some(operator), Some(monitor)) =
        (yaml(test, RULES), yaml(test, PROMETHEUS_RULE), yaml(test, POD_MONITOR))
    else {
        return;
    };
    assert_eq!(operator["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(operator["kind"], "PrometheusRule");
    assert_eq!(operator["metadata"]["namespace"], monitor["metadata"]["namespace"], "{PROMETHEUS_RULE}");
    assert_eq!(operator["metadata"]["labels"], monitor["metadata"]["labels"], "{PROMETHEUS_RULE}");
    assert_eq!(operator["spec"].as_object().map(|s| s.len()), Some(1), "spec has only groups");
    let (a, b) = (&plain["groups"], &operator["spec"]["groups"]);
    if a != b {
        let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap();
        let (a, b) = (pretty(a), pretty(b));
        let first = a.lines().zip(b.lines()).position(|(x, y)| x != y).unwrap_or(0);
        panic!(
            "{PROMETHEUS_RULE} spec.groups differs from {RULES} groups; first differing line of their JSON:\n  \
             {RULES}: {}\n  {PROMETHEUS_RULE}: {}",
            a.lines().nth(first).unwrap_or(""),
            b.lines().nth(first).unwrap_or("")
        );
    }
}

#[test]
fn every_alert_says_what_it_means_and_where_its_runbook_is() {
    let test = "every_alert_says_what_it_means_and_where_its_runbook_is";
    let Some(doc) = yaml(test, RULES) else { return };
    let metrics_doc = read(METRICS_DOC);
    let sections: BTreeSet<&str> = metrics_doc
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .filter(|h| h.starts_with("OciCoreschedHook"))
        .collect();
    let mut alerts = BTreeSet::new();
    for rule in rules(&doc) {
        let name = alert_name(rule);
        assert!(alerts.insert(name), "{name} twice");
        let severity = rule["labels"]["severity"].as_str();
        assert!(matches!(severity, Some("critical" | "warning")), "{name}: severity {severity:?}");
        for key in ["summary", "description"] {
            let text = rule["annotations"][key].as_str().unwrap_or("");
            assert!(text.len() > 20, "{name}: annotation {key} {text:?}");
        }
        let link = format!("docs/metrics.md#{}", name.to_lowercase());
        let description = rule["annotations"]["description"].as_str().unwrap_or("");
        assert!(description.contains(&link), "{name}: the description does not end with its runbook {link}");
        assert!(sections.contains(name), "{METRICS_DOC} has no section \"### {name}\"");
    }
    let stale: Vec<_> = sections.difference(&alerts).collect();
    assert!(stale.is_empty(), "{METRICS_DOC} has sections for alerts {RULES} does not have: {stale:?}");
}

#[test]
fn the_dashboard_queries_through_its_variables_and_every_expression_parses() {
    let test = "the_dashboard_queries_through_its_variables_and_every_expression_parses";
    let dashboard: Value = serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON");
    let vars = dashboard["templating"]["list"].as_array().expect("templating");
    let var = |n: &str| vars.iter().find(|v| v["name"] == n).unwrap_or_else(|| panic!("no variable {n}"));
    assert_eq!((&var("datasource")["type"], &var("datasource")["query"]), (&json!("datasource"), &json!("prometheus")));
    let ds = json!({"type": "prometheus", "uid": "${datasource}"});
    for n in ["node", "group"] {
        assert_eq!(var(n)["datasource"], ds, "variable {n}");
    }
    let mut ids = BTreeSet::new();
    for p in panels(&dashboard) {
        let title = p["title"].as_str().unwrap_or("");
        assert!(ids.insert(p["id"].as_u64().expect("a panel id")), "panel {title:?}: its id is taken");
        let pos = &p["gridPos"];
        assert!(pos["x"].as_u64().unwrap() + pos["w"].as_u64().unwrap() <= 24, "panel {title:?}: {pos}");
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"], ds, "panel {title:?}");
        let targets = p["targets"].as_array().filter(|t| !t.is_empty());
        for t in targets.unwrap_or_else(|| panic!("panel {title:?} has no query")) {
            assert_eq!(t["datasource"], ds, "panel {title:?}");
        }
    }
    // Each expression as a recording rule, Grafana's variables given values, for promtool to parse.
    let values = [("$__rate_interval", "5m"), ("$__range", "6h"), ("$node", "10.0.2.15"), ("$group", ".*")];
    let mut records = Vec::new();
    for (n, (at, expr)) in dashboard_exprs(&dashboard).into_iter().enumerate() {
        if expr.starts_with("label_values(") {
            continue;
        }
        let expr = values.iter().fold(expr, |e, (var, value)| e.replace(var, value));
        assert!(!expr.contains('$'), "{at}: an unknown variable in {expr}");
        records.push(json!({"record": format!("dashboard_expr_{n}"), "expr": expr, "labels": {"at": at}}));
    }
    assert!(records.len() >= 30, "{} expressions", records.len());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dashboard.rules.json");
    std::fs::write(&file, json!({"groups": [{"name": "dashboard", "rules": records}]}).to_string()).unwrap();
    let Some(report) = promtool(test, &["check", "rules", file.to_str().unwrap()]) else { return };
    assert!(report.contains("SUCCESS"), "{report}");
}

/// Every family the rules and the dashboard select, with where each is used; the rules' alerts
/// each select at least one of the project's families (but the one on `up`), as does each of
/// the dashboard's panels.
fn families_used(test: &str) -> Option<BTreeMap<String, Vec<String>>> {
    let doc = yaml(test, RULES)?;
    let dashboard: Value = serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON");
    let mut used: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let exprs = rules(&doc)
        .into_iter()
        .map(|r| (format!("alert {}", alert_name(r)), r["expr"].as_str().expect("expr").to_string()))
        .chain(dashboard_exprs(&dashboard));
    for (at, expr) in exprs {
        let names = metric_names(&expr);
        assert!(!names.is_empty() || expr.starts_with("up{"), "{at}: no family of the project in {expr}");
        for n in names {
            used.entry(n).or_default().push(at.clone());
        }
    }
    Some(used)
}

#[cfg(not(feature = "fake-kernel"))]
#[test]
fn every_family_the_rules_and_the_dashboard_select_is_served() {
    crate::fakeworld::needs_feature("every_family_the_rules_and_the_dashboard_select_is_served", "fake-kernel");
}

#[cfg(feature = "fake-kernel")]
#[test]
fn every_family_the_rules_and_the_dashboard_select_is_served() {
    use std::os::unix::fs::DirBuilderExt;
    use std::os::unix::net::UnixListener;

    use crate::common::World;
    use crate::common::http::{get, served_at};
    use crate::common::wait::wait_for;
    use crate::nri::support::{Plugin, accept, plugin_cmd, setup};

    /// A long-running command of the binary, its stderr in a file, killed on drop.
    struct Served(std::process::Child, PathBuf);

    impl Served {
        fn spawn(mut cmd: Command, stderr: &Path) -> Self {
            let file = std::fs::File::create(stderr).expect("stderr file");
            cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(file);
            Self(cmd.spawn().expect("spawn"), stderr.to_path_buf())
        }
        fn log(&self) -> String {
            std::fs::read_to_string(&self.1).unwrap_or_default()
        }
    }

    impl Drop for Served {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
            if std::thread::panicking() {
                eprintln!("--- {} ---\n{}", self.1.display(), self.log());
            }
        }
    }

    const WAIT: Duration = Duration::from_secs(20);
    let test = "every_family_the_rules_and_the_dashboard_select_is_served";
    let Some(used) = families_used(test) else { return };
    let page = |addr, want: &str| {
        wait_for(&format!("a page with {want}"), WAIT, || {
            let (status, body) = get(addr, "/metrics");
            if status == 200 && body.contains(want) { Ok(body) } else { Err(format!("{status}: {body}")) }
        })
    };

    // The follower's page over the fake kernel, in a state dir as the packages make it (the
    // follower makes none), with a cgroup v2 mount whose root cgroup counts forced idle (else the
    // forced idle families are left out, as on cgroup v1).
    let w = World::fake_kernel("alerts-follow", "");
    std::fs::DirBuilder::new().mode(0o700).create(w.state_dir()).unwrap();
    std::fs::create_dir_all(w.cgroup_root()).unwrap();
    std::fs::write(w.cgroup_root().join("cgroup.controllers"), "cpu\n").unwrap();
    std::fs::write(w.cgroup_root().join("cpu.stat"), "usage_usec 9000000\ncore_sched.force_idle_usec 1500000\n")
        .unwrap();
    let cmd = w.cmd(&["reconcile", "--follow", "--interval", "3600", "--listen", "127.0.0.1:0"]);
    let follower = Served::spawn(cmd, &w.path("follow.stderr"));
    let addr = wait_for("the follower to log where it serves", WAIT, || served_at(&follower.log()).ok_or("not yet"));
    let follow_page = page(addr, "# TYPE oci_coresched_hook_follow_events_enabled ");
    drop(follower);
    // `metrics`, which appends the counters the follower wrote into the state dir.
    let out = w.cli(&["metrics"], b"");
    assert!(out.success(), "{out}");
    assert!(out.stdout.contains("# TYPE oci_coresched_hook_follow_events_enabled "), "{out}");

    // The NRI plugin's page, once a runtime configured it (its runtime_info is there only then).
    let s = setup("alerts");
    let listener = UnixListener::bind(&s.socket).unwrap();
    let plugin = Plugin::spawn(plugin_cmd(&s, &["--listen", "127.0.0.1:0"]), s.dir.path());
    let mut rt = accept(&listener);
    rt.expect_register();
    rt.configure();
    let addr = wait_for("the plugin to log where it serves", WAIT, || served_at(&plugin.log()).ok_or("not yet"));
    let nri_page = page(addr, "oci_coresched_hook_nri_ready 1");

    // The node's families, which the alerts on a node that cannot isolate read, are on both
    // agents' pages (and in `metrics`), with the sched_ext guard's refusals on the agents'.
    for family in [
        "oci_coresched_hook_kernel_supported",
        "oci_coresched_hook_smt_active",
        "oci_coresched_hook_sched_ext_enabled",
        "oci_coresched_hook_sched_ext_guard",
        "oci_coresched_hook_cpu_vulnerable",
        "oci_coresched_hook_build_info",
        "oci_coresched_hook_sched_ext_refusals_total",
    ] {
        for (what, text) in [("the follower's page", &follow_page), ("the plugin's page", &nri_page)] {
            assert!(families(text).contains_key(family), "{what} lacks {family}:\n{text}");
        }
        let in_metrics = families(&out.stdout).contains_key(family);
        assert!(in_metrics || family.ends_with("_refusals_total"), "metrics lacks {family}:\n{}", out.stdout);
    }
    let mut served = BTreeMap::new();
    for (what, text) in
        [("the follower's page", &follow_page), ("metrics", &out.stdout), ("the plugin's page", &nri_page)]
    {
        let f = families(text);
        assert!(!f.is_empty(), "{what} declares no family:\n{text}");
        served.extend(f);
    }
    let missing: Vec<String> = used
        .iter()
        .filter(|(name, _)| !is_served(name, &served))
        .map(|(name, at)| format!("{name} (in {})", at.join(", ")))
        .collect();
    assert!(
        missing.is_empty(),
        "families no page serves:\n  {}\nserved: {:?}",
        missing.join("\n  "),
        served.keys().collect::<Vec<_>>()
    );
}
