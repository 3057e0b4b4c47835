//! Annotations + config → decision (`policy::decide`), checked against independent oracles:
//! an invalid key gives the container a key of its own; a group never leaves the pod's namespace
//! unless the config allows it; SYSTEM is never touched; pid <= 1 never is either.
//!
//! Input: byte 0 = lifecycle (bits 0-1) and `allow_cross_namespace_groups` (bit 2); byte 1 = the
//! QoS rules (enable / core_expeller / sched_idle for BE and LS); the rest an OCI state document
//! (the real ones from tests/fixtures/states are the seeds), whose optional `cgroupsPath` string
//! stands for the bundle's `linux.cgroupsPath`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oci_coresched_hook::config::{Config, QosClass, QosRule};
use oci_coresched_hook::decide::policy::{self, ActionKind, ContainerInput, Lifecycle, Policy};
use oci_coresched_hook_fuzz::{first, first_set, valid_group, valid_id, valid_key, valid_namespace};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (flags, rules, doc) = (data[0], data[1], &data[2..]);
    let Ok(state) = oci_coresched_hook::host::oci_state::parse_state(doc) else { return };
    let cgroups_path = serde_json::from_slice::<serde_json::Value>(doc)
        .ok()
        .and_then(|v| v.get("cgroupsPath").and_then(|p| p.as_str().map(str::to_string)));
    let lifecycle = match flags & 3 {
        1 => Lifecycle::Forget,
        2 => Lifecycle::Skip,
        _ => Lifecycle::Ensure,
    };
    let mut config = Config { allow_cross_namespace_groups: flags & 4 != 0, ..Config::default() };
    for (i, class) in [QosClass::Be, QosClass::Ls].into_iter().enumerate() {
        let b = rules >> (i * 4);
        if b & 8 != 0 {
            config.qos.insert(class, QosRule { enable: b & 1 == 0, core_expeller: b & 2 != 0, sched_idle: b & 4 != 0 });
        }
    }
    let ann = &state.annotations;
    let input = ContainerInput {
        lifecycle,
        id: state.id.clone(),
        pid: state.pid,
        annotations: ann.clone(),
        cgroups_path: cgroups_path.clone(),
    };
    let result = policy::decide(&input, &config);
    assert_eq!(format!("{result:?}"), format!("{:?}", policy::decide(&input, &config)), "not deterministic");
    let d = match result {
        Err(_) => {
            assert!(!valid_id(&state.id, 128), "valid container id {:?} rejected", state.id);
            return;
        }
        Ok(d) => d,
    };
    assert!(valid_id(&state.id, 128), "invalid container id {:?} accepted", state.id);
    serde_json::to_string(&d).expect("the decision serializes (explain)");

    match lifecycle {
        Lifecycle::Forget => return assert_eq!(d.action.kind(), ActionKind::Forget),
        Lifecycle::Skip => return assert_eq!(d.action.kind(), ActionKind::Skip),
        Lifecycle::Ensure => {}
    }
    if !matches!(state.pid, Some(p) if p > 1) {
        return assert_eq!(d.action.kind(), ActionKind::Skip, "pid {:?} must never be touched", state.pid);
    }
    let qos = first(ann, &[policy::KOORD_QOS]);
    if qos == Some("SYSTEM") {
        return assert_eq!(d.action.kind(), ActionKind::Skip, "a SYSTEM container was touched: {d:?}");
    }
    if d.action.kind() == ActionKind::Clear {
        assert_eq!(d.group(), None);
        assert!(!d.sched_idle());
        return;
    }
    assert_eq!(d.action.kind(), ActionKind::Ensure, "{d:?}");
    let group = d.group().expect("an ensure names a group");
    let ns_ann = first(ann, &policy::POD_NAMESPACE);
    // Both namespace keys present with different values: someone claims a namespace, so the
    // decision is invalid and scoped to no namespace at all.
    let ns_values: Vec<&str> = policy::POD_NAMESPACE.iter().filter_map(|k| ann.get(*k).map(String::as_str)).collect();
    let disagree = matches!(ns_values[..], [a, b] if a != b);
    if disagree {
        assert!(d.invalid.is_some() && d.namespace.is_none(), "disagreeing namespaces accepted: {d:?}");
    }
    let ns = ns_ann.filter(|n| !disagree && valid_namespace(n));
    let own = match ns {
        Some(ns) => format!("{ns}/container:{}", state.id),
        None => format!("container:{}", state.id),
    };

    // Anything invalid: a key of the container's own, and the reason says so.
    if d.invalid.is_some() {
        assert_eq!(group, own, "invalid input but not an own key: {d:?}");
    }
    if ns_ann.is_some() && ns.is_none() {
        assert!(d.invalid.is_some(), "invalid namespace {ns_ann:?} accepted: {d:?}");
    }
    if let Some(q) = qos
        && !["LSE", "LSR", "LS", "BE"].contains(&q)
    {
        assert!(d.invalid.is_some(), "invalid QoS {q:?} accepted: {d:?}");
    }
    let policy_ann = first_set(ann, &[policy::ANN_POLICY, policy::KOORD_POLICY]);
    match policy_ann {
        None | Some("default" | "exclusive" | "none") => {}
        Some(p) => assert!(d.invalid.is_some(), "invalid policy {p:?} accepted: {d:?}"),
    }
    let named = first_set(ann, &[policy::ANN_GROUP, policy::KOORD_GROUP]);
    if matches!(policy_ann, None | Some("default"))
        && let Some(g) = named
        && !valid_group(g)
    {
        assert_eq!(group, own, "invalid group {g:?} did not give an own key");
        assert!(d.invalid.is_some());
    }

    // Namespace scoping: the key is in the pod's namespace unless cross-namespace groups are
    // allowed (and then only a named group may leave it).
    let key = match ns {
        Some(ns) => match group.strip_prefix(&format!("{ns}/")) {
            Some(k) => k,
            None => {
                assert!(
                    config.allow_cross_namespace_groups && !group.contains(':') && !group.contains('/'),
                    "group {group:?} is outside namespace {ns:?}"
                );
                group
            }
        },
        None => {
            assert!(!group.contains('/'), "group {group:?} names a namespace the pod does not have");
            group
        }
    };
    assert!(valid_key(key), "malformed group key {key:?}");
    // Internal keys cannot be forged: `container:` always names this container.
    if let Some(id) = key.strip_prefix("container:") {
        assert_eq!(id.strip_suffix(":expeller").unwrap_or(id), state.id);
    }
    // Exclusive never joins a named group.
    if d.policy == Policy::Exclusive {
        assert!(key.starts_with("exclusive:") || key.starts_with("container:"), "exclusive in {key:?}");
    }
    if d.policy == Policy::Default && d.invalid.is_none() && key.contains(':') {
        assert!(key.starts_with("pod:") || key.starts_with("container:"), "{key:?}");
    }
});
