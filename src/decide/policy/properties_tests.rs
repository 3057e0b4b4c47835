//! Property-style checks of the decision over generated inputs: no group crosses namespaces
//! unless the config allows it, and an invalid annotation always means the container's own key.

use super::*;

/// xorshift64*: small, deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
    /// `None` half the time, else one of `xs`.
    fn maybe<'a>(&mut self, xs: &[&'a str]) -> Option<&'a str> {
        if self.below(2) == 0 { None } else { Some(self.pick(xs)) }
    }
}

const NAMESPACES: &[&str] = &["tenant-a", "tenant-b", "kube-system", "Tenant_A", "", "-x", "a/b", "tenant-a/x"];
const SANDBOXES: &[&str] = &["sb1", "sb2", "sb1-expeller", "", "sb/1", "sb:1", "tenant-b"];
const UIDS: &[&str] = &["uid-1", "uid-2", "", "u:1", "../u"];
const GROUPS: &[&str] = &[
    "web",
    "db",
    "web-expeller",
    "tenant-a",
    "tenant-b",
    "",
    "a/b",
    "tenant-b/web",
    "x:y",
    "pod:sb1",
    "exclusive:uid-1",
    "container:c1",
    "..",
    "wéb",
    "-web",
    "web\n",
    "ggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggg",
];
const POLICIES: &[&str] = &["default", "exclusive", "none", "", "shared", "Exclusive"];
const QOS: &[&str] = &["LSE", "LSR", "LS", "BE", "SYSTEM", "gold", ""];
const CGROUPS: &[&str] = &[BE_PATH, BURSTABLE_PATH, GUARANTEED_PATH, SYSTEM_PATH];

struct Generated {
    container_id: String,
    pid: Option<i64>,
    lifecycle: Lifecycle,
    ann: BTreeMap<String, String>,
    cgroup: Option<&'static str>,
}

fn generate(rng: &mut Rng, i: usize) -> Generated {
    let mut ann = BTreeMap::new();
    let mut put = |k: &str, v: Option<&str>| {
        if let Some(v) = v {
            ann.insert(k.to_string(), v.to_string());
        }
    };
    // Namespace under one key, the other, or both (the same value: one pod has one namespace).
    let ns = rng.maybe(NAMESPACES);
    match rng.below(3) {
        0 => put(NS, ns),
        1 => put(NS_CRI, ns),
        _ => {
            put(NS, ns);
            put(NS_CRI, ns);
        }
    }
    put(SB, rng.maybe(SANDBOXES));
    put(SB_CRIO, rng.maybe(SANDBOXES));
    put(UID, rng.maybe(UIDS));
    put(UID_CRI, rng.maybe(UIDS));
    put(ANN_GROUP, rng.maybe(GROUPS));
    put(KOORD_GROUP, rng.maybe(GROUPS));
    put(ANN_POLICY, rng.maybe(POLICIES));
    put(KOORD_POLICY, rng.maybe(POLICIES));
    put(KOORD_QOS, rng.maybe(QOS));
    let cgroup = rng.maybe(CGROUPS);
    let pid = [None, Some(0), Some(1), Some(100), Some(4242), Some(100), Some(4242)][rng.below(7)];
    let lifecycle = [
        Lifecycle::Ensure,
        Lifecycle::Ensure,
        Lifecycle::Ensure,
        Lifecycle::Ensure,
        Lifecycle::Forget,
        Lifecycle::Skip,
    ][rng.below(6)];
    // Every generated container is a distinct container.
    Generated { container_id: format!("c{i}"), pid, lifecycle, ann, cgroup }
}

/// The namespace the pod really is in (raw, valid or not): the tenant boundary.
fn tenant(ann: &BTreeMap<String, String>) -> Option<String> {
    POD_NAMESPACE.iter().find_map(|k| ann.get(*k).cloned())
}

fn is_internal(key: &str) -> bool {
    ["pod:", "exclusive:", "container:"].iter().any(|p| key.starts_with(p))
}

fn configs() -> Vec<(&'static str, Config)> {
    vec![
        ("default", cfg_default()),
        ("cross", cfg_cross()),
        ("koord", cfg_koord()),
        ("koord+cross", cfg_koord_cross()),
        ("be-off", cfg_be_off()),
        ("lsr", cfg_lsr()),
        ("lsr-off", cfg_lsr_off()),
        ("lse", cfg_lse()),
    ]
}

const GENERATED: usize = 3000;

#[test]
fn property_no_group_crosses_namespaces_unless_allowed() {
    for (cfg_name, cfg) in configs() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        // group key → the tenants whose containers were put in it
        let mut tenants: BTreeMap<String, BTreeSet<Option<String>>> = BTreeMap::new();
        let mut ensured = 0;
        for i in 0..GENERATED {
            let g = generate(&mut rng, i);
            let input = input(g.lifecycle, &g.container_id, g.pid, &g.ann, g.cgroup);
            let d = decide(&input, &cfg).unwrap_or_else(|e| panic!("{cfg_name} #{i}: {e}"));
            let ctx = || format!("{cfg_name} #{i}: {:?} → {d:?}", g.ann);
            if d.action.kind() != ActionKind::Ensure {
                assert_eq!(d.group(), None, "{}", ctx());
                continue;
            }
            ensured += 1;
            let group = d.group().map(str::to_string).unwrap_or_else(|| panic!("ensure without group: {}", ctx()));
            tenants.entry(group.clone()).or_default().insert(tenant(&g.ann));
            // A known namespace scopes every key but a named group under the cross-namespace flag.
            let rest = match &d.namespace {
                Some(ns) => match group.strip_prefix(&format!("{ns}/")) {
                    Some(rest) => rest.to_string(),
                    None => {
                        assert!(cfg.allow_cross_namespace_groups && !group.contains(':'), "unscoped key: {}", ctx());
                        group.clone()
                    }
                },
                None => group.clone(),
            };
            // Whatever is left is an internal key or a valid group name (maybe with the suffix).
            if !is_internal(&rest) {
                let name = rest.strip_suffix(EXPELLER_SUFFIX).unwrap_or(&rest);
                assert!(validate_group(name).is_ok() || validate_group(&rest).is_ok(), "bad named key: {}", ctx());
            }
            assert!(!rest.contains('/'), "nested scope: {}", ctx());
        }
        assert!(ensured > GENERATED / 4, "{cfg_name}: only {ensured} ensures generated");
        let mut shared_named = 0;
        for (group, ts) in &tenants {
            if ts.len() > 1 {
                assert!(
                    cfg.allow_cross_namespace_groups && !group.contains(':') && !group.contains('/'),
                    "{cfg_name}: group {group:?} is shared by tenants {ts:?}"
                );
                shared_named += 1;
            }
        }
        // The generator does reach the cross-namespace case, so the check above is not vacuous.
        assert_eq!(shared_named > 0, cfg.allow_cross_namespace_groups, "{cfg_name}");
    }
}

#[test]
fn property_invalid_means_own_key() {
    let mut invalid_seen = 0;
    for (cfg_name, cfg) in configs() {
        let mut rng = Rng(0x0123_4567_89ab_cdef);
        for i in 0..GENERATED {
            let g = generate(&mut rng, i);
            let input = input(g.lifecycle, &g.container_id, g.pid, &g.ann, g.cgroup);
            let d = decide(&input, &cfg).unwrap();
            let ctx = || format!("{cfg_name} #{i}: {:?} → {d:?}", g.ann);
            if d.invalid.is_some() {
                invalid_seen += 1;
                let own = match &d.namespace {
                    Some(ns) => format!("{ns}/container:{}", g.container_id),
                    None => format!("container:{}", g.container_id),
                };
                assert_eq!(d.action.kind(), ActionKind::Ensure, "{}", ctx());
                assert_eq!(d.group(), Some(own.as_str()), "{}", ctx());
            }
            // A namespace annotation that was not accepted is a problem, never silently dropped.
            if tenant(&g.ann).is_some() && d.namespace.is_none() && d.action.kind() == ActionKind::Ensure {
                assert!(d.invalid.is_some(), "namespace dropped without invalid: {}", ctx());
            }
            // SYSTEM is never touched while the container runs.
            if g.ann.get(KOORD_QOS).map(String::as_str) == Some("SYSTEM") && g.lifecycle == Lifecycle::Ensure {
                assert_eq!(d.action.kind(), ActionKind::Skip, "{}", ctx());
            }
            // No pid to act on: never touched.
            if g.lifecycle == Lifecycle::Ensure && g.pid.is_none_or(|p| p <= 1) {
                assert_eq!(d.action.kind(), ActionKind::Skip, "{}", ctx());
            }
            // sched_idle only ever when the class's rule asks for it.
            if d.sched_idle() {
                assert_eq!(d.action.kind(), ActionKind::Ensure, "cpu.idle is only written on an ensure: {}", ctx());
                let q = d.qos.unwrap_or_else(|| panic!("sched_idle without QoS: {}", ctx()));
                assert!(cfg.rule(q).sched_idle, "{}", ctx());
            }
            match g.lifecycle {
                Lifecycle::Forget => assert_eq!(d.action.kind(), ActionKind::Forget, "{}", ctx()),
                Lifecycle::Skip => assert_eq!(d.action.kind(), ActionKind::Skip, "{}", ctx()),
                Lifecycle::Ensure => assert_ne!(d.action.kind(), ActionKind::Forget, "{}", ctx()),
            }
        }
    }
    assert!(invalid_seen > 100, "only {invalid_seen} invalid decisions generated");
}
