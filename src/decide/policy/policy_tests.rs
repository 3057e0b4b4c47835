//! Tests of the decision: container ids, validators, QoS classes, reasons, determinism and the
//! JSON shape `explain` prints. The decision table (every rule and their precedence) and the
//! property checks over generated annotation maps have files of their own, which share this
//! one's helpers.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::config::{QosClass, QosRule};

#[path = "decision_table_tests.rs"]
mod decision_table_tests;
#[path = "properties_tests.rs"]
mod properties_tests;

/// The decision's input over borrowed parts.
fn input(
    lifecycle: Lifecycle,
    id: &str,
    pid: Option<i64>,
    annotations: &BTreeMap<String, String>,
    cgroups_path: Option<&str>,
) -> ContainerInput {
    ContainerInput {
        lifecycle,
        id: id.to_string(),
        pid,
        annotations: annotations.clone(),
        cgroups_path: cgroups_path.map(str::to_string),
    }
}

const NS: &str = "io.kubernetes.pod.namespace";
const NS_CRI: &str = "io.kubernetes.cri.sandbox-namespace";
const SB: &str = "io.kubernetes.cri.sandbox-id";
const SB_CRIO: &str = "io.kubernetes.cri-o.SandboxID";
const UID: &str = "io.kubernetes.pod.uid";
const UID_CRI: &str = "io.kubernetes.cri.sandbox-uid";

const BE_PATH: &str = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice:cri-containerd:c1";
const BURSTABLE_PATH: &str = "/kubepods/burstable/pod1234/c1";
const GUARANTEED_PATH: &str = "/kubepods/pod1234/c1";
const GUARANTEED_SYSTEMD_PATH: &str = "kubepods-pod1234.slice:cri-containerd:c1";
const SYSTEM_PATH: &str = "/system.slice/docker-c1.scope";

fn rule(enable: bool, core_expeller: bool, sched_idle: bool) -> QosRule {
    QosRule { enable, core_expeller, sched_idle }
}

fn cfg_default() -> Config {
    Config::default()
}

fn cfg_cross() -> Config {
    Config { allow_cross_namespace_groups: true, ..Config::default() }
}

/// Koordinator-like NodeSLO: LSR and LS expel, BE runs sched_idle, LSE plain.
fn cfg_koord() -> Config {
    let mut c = Config::default();
    c.qos.insert(QosClass::Lsr, rule(true, true, false));
    c.qos.insert(QosClass::Ls, rule(true, true, false));
    c.qos.insert(QosClass::Be, rule(true, false, true));
    c
}

fn cfg_koord_cross() -> Config {
    Config { allow_cross_namespace_groups: true, ..cfg_koord() }
}

/// LSR expels and LS is plain, so which of the two rules applied shows in the group.
fn cfg_lsr() -> Config {
    let mut c = Config::default();
    c.qos.insert(QosClass::Lsr, rule(true, true, false));
    c
}

/// LSR disabled, LS expels: a Guaranteed pod falls back to the LS rule.
fn cfg_lsr_off() -> Config {
    let mut c = Config::default();
    c.qos.insert(QosClass::Lsr, rule(false, false, false));
    c.qos.insert(QosClass::Ls, rule(true, true, false));
    c
}

/// An explicit LSE rule (not in Koordinator's NodeSLO) that differs from the LSR one.
fn cfg_lse() -> Config {
    let mut c = cfg_lsr();
    c.qos.insert(QosClass::Lse, rule(true, false, true));
    c
}

/// BE disabled (with sched_idle still asked for), LS plain.
fn cfg_be_off() -> Config {
    let mut c = Config::default();
    c.qos.insert(QosClass::Be, rule(false, false, true));
    c
}

fn long(n: usize) -> String {
    "g".repeat(n)
}

fn annotations(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

#[test]
fn bad_container_ids_are_errors() {
    let ann = BTreeMap::new();
    let too_long = "c".repeat(MAX_ID_LEN + 1);
    for id in ["", "a/b", "-c", ".c", "_c", "c\n", "c d", "c:1", "cé", "../c", too_long.as_str()] {
        let input = input(Lifecycle::Ensure, id, Some(100), &ann, None);
        let err = decide(&input, &Config::default()).expect_err(id);
        assert_eq!(err, BadContainerId(id.chars().take(80).collect()));
        assert!(err.to_string().contains("invalid container id"));
        // Even the stages that do nothing reject an id that cannot name a cache row.
        for lifecycle in [Lifecycle::Forget, Lifecycle::Skip] {
            assert!(
                decide(&ContainerInput { lifecycle, ..input.clone() }, &Config::default()).is_err(),
                "{id:?} {lifecycle:?}"
            );
        }
    }
    let max = "c".repeat(MAX_ID_LEN);
    for id in ["c", "C1", "0abc", "a.b_c-d", max.as_str()] {
        let input = input(Lifecycle::Ensure, id, Some(100), &ann, None);
        let d = decide(&input, &Config::default()).unwrap();
        assert_eq!(d.group(), Some(format!("container:{id}").as_str()));
    }
}

#[test]
fn validators() {
    for ok in ["a", "0", "web", "a-b", "a.b", "a_b", "A9", &long(63)] {
        assert!(validate_group(ok).is_ok(), "{ok:?}");
    }
    for bad in ["", "-", "-a", "a-", "a.", ".a", "_a", "a_", "a/b", "a:b", "..", "é", "a b", &long(64)] {
        let e = validate_group(bad).unwrap_err().to_string();
        assert!(e.contains("is invalid"), "{bad:?}: {e}");
    }
    for ok in ["a", "tenant-a", "kube-system", "0", &"n".repeat(63)] {
        assert!(validate_namespace(ok).is_ok(), "{ok:?}");
    }
    for bad in ["", "-a", "a-", "Tenant_A", "A", "a.b", "a_b", "a/b", "é", &"n".repeat(64)] {
        assert!(validate_namespace(bad).is_err(), "{bad:?}");
    }
    // Error messages are bounded whatever the input length.
    assert!(validate_group(&long(10_000)).unwrap_err().to_string().len() < 300);
}

#[test]
fn kube_qos_from_cgroup_parents() {
    use KubeQos::{BestEffort, Burstable, Guaranteed};
    let cases = [
        (BE_PATH, Some(BestEffort)),
        ("/kubepods/besteffort/pod1/c1", Some(BestEffort)),
        ("/KUBEPODS/BESTEFFORT/pod1/c1", Some(BestEffort)),
        (BURSTABLE_PATH, Some(Burstable)),
        ("kubepods-burstable-pod1.slice:cri-containerd:c1", Some(Burstable)),
        (GUARANTEED_PATH, Some(Guaranteed)),
        (GUARANTEED_SYSTEMD_PATH, Some(Guaranteed)),
        ("kubepods-pod1.slice:crio:c1", Some(Guaranteed)),
        (SYSTEM_PATH, None),
        ("/besteffort/c1", None),
        ("", None),
    ];
    for (path, want) in cases {
        assert_eq!(kube_qos_from_cgroup(path), want, "{path:?}");
    }
}

/// `explain`'s reason names the rule a Guaranteed pod or an LSE container follows, and why.
#[test]
fn reason_names_the_rule_followed() {
    let ann = annotations(&[(NS, "tenant-a".into()), (SB, "sb1".into())]);
    let lse = annotations(&[(NS, "tenant-a".into()), (SB, "sb1".into()), (KOORD_QOS, "LSE".into())]);
    let mut ls_disabled = cfg_lsr();
    ls_disabled.qos.insert(QosClass::Ls, rule(false, false, false));
    type Case<'a> = (&'a BTreeMap<String, String>, Option<&'a str>, fn() -> Config, &'a str);
    let cases: [Case<'_>; 6] = [
        (
            &ann,
            Some(GUARANTEED_PATH),
            cfg_lsr,
            "default group: the pod, expeller group of QoS class LSR; Guaranteed pod (kubelet cgroup parent) \
             follows the LSR rule, as in Koordinator when LSR is enabled",
        ),
        (
            &ann,
            Some(GUARANTEED_PATH),
            cfg_default,
            "default group: the pod; Guaranteed pod (kubelet cgroup parent) follows the LS rule: the config \
             enables no [qos.LSR]",
        ),
        (
            &ann,
            Some(GUARANTEED_PATH),
            cfg_lsr_off,
            "default group: the pod, expeller group of QoS class LS; Guaranteed pod (kubelet cgroup parent) \
             follows the LS rule: the config enables no [qos.LSR]",
        ),
        (
            &lse,
            None,
            cfg_lsr,
            "default group: the pod, expeller group of QoS class LSR; QoS class LSE follows the LSR rule \
             (no [qos.LSE] in the config), as in Koordinator",
        ),
        (&lse, None, cfg_lse, "default group: the pod"),
        (&ann, Some(BURSTABLE_PATH), cfg_lsr, "default group: the pod"),
    ];
    for (ann, cgroup, cfg, want) in cases {
        let input = input(Lifecycle::Ensure, "c1", Some(100), ann, cgroup);
        assert_eq!(decide(&input, &cfg()).unwrap().reason, want, "{cgroup:?} {ann:?}");
    }
    // LSR enabled and LS disabled: the Guaranteed pod follows LSR, so it keeps a cookie.
    let guaranteed = input(Lifecycle::Ensure, "c1", Some(100), &ann, Some(GUARANTEED_PATH));
    assert_eq!(decide(&guaranteed, &ls_disabled).unwrap().action.kind(), ActionKind::Ensure);
    // A disabled rule says which class's rule cleared the cookie, and why that one.
    let mut lsr_clear = Config::default();
    lsr_clear.qos.insert(QosClass::Lsr, rule(false, false, false));
    let d = decide(&ContainerInput { annotations: lse.clone(), cgroups_path: None, ..guaranteed }, &lsr_clear).unwrap();
    assert_eq!(d.action.kind(), ActionKind::Clear);
    assert_eq!(
        d.reason,
        "core scheduling is disabled for QoS class LSR by the config; QoS class LSE follows the LSR rule \
         (no [qos.LSE] in the config), as in Koordinator"
    );
}

#[test]
fn decide_is_deterministic_and_ignores_unrelated_annotations() {
    let mut ann = annotations(&[(NS, "tenant-a".into()), (SB, "sb1".into()), (ANN_GROUP, "web".into())]);
    let first = input(Lifecycle::Ensure, "c1", Some(100), &ann, None);
    let d1 = decide(&first, &Config::default()).unwrap();
    assert_eq!(d1, decide(&first, &Config::default()).unwrap());
    ann.insert("org.opencontainers.image.title".into(), "x:y/../\u{0}".into());
    ann.insert("oci-coresched-hook/other".into(), "a/b".into());
    ann.insert("io.kubernetes.container.name".into(), "Tenant_A".into());
    let d2 = decide(&input(Lifecycle::Ensure, "c1", Some(100), &ann, None), &Config::default()).unwrap();
    // The container's name is a metrics label only: it changes the labels, nothing else.
    assert_eq!(d2.pod.container_name.as_deref(), Some("Tenant_A"));
    assert_eq!(Decision { pod: d1.pod.clone(), ..d2 }, d1);
}

// ---------------------------------------------------------------------------------------------
// JSON shape (what `explain` prints).

const JSON_KEYS: [&str; 10] =
    ["action", "container_id", "pid", "policy", "group", "namespace", "qos", "sched_idle", "reason", "invalid"];

fn json_of(lifecycle: Lifecycle, pid: Option<i64>, pairs: &[(&str, String)], cfg: &Config) -> serde_json::Value {
    let ann = annotations(pairs);
    let input = input(lifecycle, "c1", pid, &ann, None);
    let v = serde_json::to_value(decide(&input, cfg).unwrap()).unwrap();
    let keys: BTreeSet<&str> = v.as_object().expect("an object").keys().map(String::as_str).collect();
    assert_eq!(keys, JSON_KEYS.into_iter().collect::<BTreeSet<_>>());
    v
}

#[test]
fn json_shape() {
    use serde_json::{Value, json};
    let pod = || vec![(NS, "tenant-a".to_string()), (SB, "sb1".to_string()), (UID, "uid-1".to_string())];

    let mut ann = pod();
    ann.push((KOORD_QOS, "BE".into()));
    let v = json_of(Lifecycle::Ensure, Some(100), &ann, &cfg_koord());
    assert_eq!(v["action"], "ensure");
    assert_eq!(v["container_id"], "c1");
    assert_eq!(v["pid"], 100);
    assert_eq!(v["policy"], "default");
    assert_eq!(v["group"], "tenant-a/pod:sb1");
    assert_eq!(v["namespace"], "tenant-a");
    assert_eq!(v["qos"], "BE");
    assert_eq!(v["sched_idle"], true);
    assert!(v["reason"].as_str().is_some_and(|r| !r.is_empty()));
    assert_eq!(v["invalid"], Value::Null);

    let mut ann = pod();
    ann.push((ANN_POLICY, "exclusive".into()));
    let v = json_of(Lifecycle::Ensure, Some(100), &ann, &cfg_default());
    assert_eq!(
        (&v["action"], &v["policy"], &v["group"]),
        (&json!("ensure"), &json!("exclusive"), &json!("tenant-a/exclusive:uid-1"))
    );
    assert_eq!((&v["qos"], &v["sched_idle"]), (&Value::Null, &json!(false)));

    let mut ann = pod();
    ann.push((ANN_POLICY, "none".into()));
    let v = json_of(Lifecycle::Ensure, Some(100), &ann, &cfg_default());
    assert_eq!((&v["action"], &v["policy"], &v["group"]), (&json!("clear"), &json!("none"), &Value::Null));

    let v = json_of(Lifecycle::Forget, None, &pod(), &cfg_default());
    assert_eq!((&v["action"], &v["pid"], &v["group"]), (&json!("forget"), &Value::Null, &Value::Null));

    let v = json_of(Lifecycle::Skip, Some(0), &[], &cfg_default());
    assert_eq!((&v["action"], &v["pid"], &v["namespace"]), (&json!("skip"), &json!(0), &Value::Null));

    let mut ann = pod();
    ann.push((ANN_GROUP, "x:y".into()));
    let v = json_of(Lifecycle::Ensure, Some(100), &ann, &cfg_default());
    assert_eq!((&v["action"], &v["group"]), (&json!("ensure"), &json!("tenant-a/container:c1")));
    assert!(v["invalid"].as_str().is_some_and(|s| s.contains("x:y")));

    // Enum values are the lowercase variant names.
    for (a, s) in [
        (ActionKind::Ensure, "ensure"),
        (ActionKind::Clear, "clear"),
        (ActionKind::Forget, "forget"),
        (ActionKind::Skip, "skip"),
    ] {
        assert_eq!(serde_json::to_value(a).unwrap(), s);
    }
    for (p, s) in [(Policy::Default, "default"), (Policy::Exclusive, "exclusive"), (Policy::None, "none")] {
        assert_eq!(serde_json::to_value(p).unwrap(), s);
    }
}

#[test]
fn the_actions_that_act_on_the_init_carry_its_pid() {
    let ann = BTreeMap::new();
    let d = decide(&input(Lifecycle::Ensure, "c1", Some(4242), &ann, None), &cfg_default()).unwrap();
    assert!(matches!(d.action, Action::Ensure { pid: 4242, .. }), "{:?}", d.action);
    let none = BTreeMap::from([(annotations::ANN_POLICY.to_string(), "none".to_string())]);
    let d = decide(&input(Lifecycle::Ensure, "c1", Some(4242), &none, None), &cfg_default()).unwrap();
    assert_eq!(d.action, Action::Clear { pid: 4242 });
    // No pid, pid 0 or 1, or a pid no kernel has: nothing that could reach prctl as "the caller".
    for pid in [None, Some(0), Some(1), Some(i64::from(i32::MAX) + 1)] {
        let d = decide(&input(Lifecycle::Ensure, "c1", pid, &ann, None), &cfg_default()).unwrap();
        assert_eq!(d.action, Action::Skip, "{pid:?}");
    }
}

#[test]
fn a_group_key_is_a_name_an_annotation_could_give_only_in_its_own_namespace() {
    let strict = Config::default();
    let open = Config { allow_cross_namespace_groups: true, ..Config::default() };
    for (key, ns, by_strict, by_open) in [
        ("tenant-a/web", Some("tenant-a"), true, true),
        ("tenant-a/web-expeller", Some("tenant-a"), true, true),
        ("tenant-b/web", Some("tenant-a"), false, false),
        ("web", Some("tenant-a"), false, true),
        ("tenant-a/pod:5f1c", Some("tenant-a"), false, false),
        ("tenant-a/exclusive:u1", Some("tenant-a"), false, false),
        ("shim:5f1c", Some("tenant-a"), false, false),
        ("container:c1", None, false, false),
        ("tenant-a/web", None, false, false),
    ] {
        assert_eq!(could_name(key, ns, &strict), by_strict, "{key} in {ns:?}");
        assert_eq!(could_name(key, ns, &open), by_open, "{key} in {ns:?}, across namespaces");
    }
    assert!(is_named("tenant-a/web") && is_named("web") && !is_named("tenant-a/pod:x") && !is_named("shim:x"));
}
