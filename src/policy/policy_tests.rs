//! Tests of the decision: a table of rows covering every rule and their precedence, property
//! checks over generated annotation maps, and the JSON shape `explain` prints.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::config::{QosClass, QosRule};

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

/// One row of the decision table.
struct Row {
    name: &'static str,
    lifecycle: Lifecycle,
    pid: Option<i64>,
    ann: Vec<(&'static str, String)>,
    cgroup: Option<&'static str>,
    cfg: fn() -> Config,
    action: ActionKind,
    policy: Policy,
    group: Option<&'static str>,
    namespace: Option<&'static str>,
    qos: Option<&'static str>,
    sched_idle: bool,
    /// `Some(s)`: `invalid` is set and contains `s`; `None`: `invalid` is unset.
    invalid: Option<&'static str>,
}

impl Row {
    /// An ensure of container `c1` (pid 100) with the default config and no annotations, which
    /// gets its own cookie.
    fn new(name: &'static str) -> Self {
        Row {
            name,
            lifecycle: Lifecycle::Ensure,
            pid: Some(100),
            ann: Vec::new(),
            cgroup: None,
            cfg: cfg_default,
            action: ActionKind::Ensure,
            policy: Policy::Default,
            group: Some("container:c1"),
            namespace: None,
            qos: None,
            sched_idle: false,
            invalid: None,
        }
    }
    fn ann(mut self, k: &'static str, v: impl Into<String>) -> Self {
        self.ann.push((k, v.into()));
        self
    }
    /// Namespace `tenant-a` (kubelet key) and containerd sandbox `sb1`: the usual pod.
    fn pod(self) -> Self {
        self.ann(NS, "tenant-a").ann(SB, "sb1").ns("tenant-a").group("tenant-a/pod:sb1")
    }
    fn lifecycle(mut self, l: Lifecycle) -> Self {
        self.lifecycle = l;
        self
    }
    fn pid(mut self, p: Option<i64>) -> Self {
        self.pid = p;
        self
    }
    fn cgroup(mut self, c: &'static str) -> Self {
        self.cgroup = Some(c);
        self
    }
    fn cfg(mut self, f: fn() -> Config) -> Self {
        self.cfg = f;
        self
    }
    fn action(mut self, a: ActionKind) -> Self {
        self.action = a;
        self
    }
    fn policy(mut self, p: Policy) -> Self {
        self.policy = p;
        self
    }
    fn group(mut self, g: &'static str) -> Self {
        self.group = Some(g);
        self
    }
    fn no_group(mut self) -> Self {
        self.group = None;
        self
    }
    fn ns(mut self, n: &'static str) -> Self {
        self.namespace = Some(n);
        self
    }
    fn qos(mut self, q: &'static str) -> Self {
        self.qos = Some(q);
        self
    }
    fn idle(mut self) -> Self {
        self.sched_idle = true;
        self
    }
    fn invalid(mut self, s: &'static str) -> Self {
        self.invalid = Some(s);
        self
    }
    /// Clear: no group.
    fn clear(self) -> Self {
        self.action(ActionKind::Clear).no_group()
    }
    /// Skip: no group.
    fn skip(self) -> Self {
        self.action(ActionKind::Skip).no_group()
    }
    /// An invalid annotation: the container's own key in namespace `tenant-a`.
    fn own_invalid(self, s: &'static str) -> Self {
        self.group("tenant-a/container:c1").invalid(s)
    }
}

fn rows() -> Vec<Row> {
    use ActionKind as A;
    use Lifecycle as L;
    use Policy as P;
    vec![
        // --- default group: the pod, else the container ---
        Row::new("no annotations: the container alone, unscoped"),
        Row::new("containerd pod").pod(),
        Row::new("CRI-O pod").ann(NS, "tenant-a").ann(SB_CRIO, "crio-sb").ns("tenant-a").group("tenant-a/pod:crio-sb"),
        Row::new("containerd sandbox id wins over CRI-O's").pod().ann(SB_CRIO, "crio-sb"),
        Row::new("sandbox id wins over pod uid").pod().ann(UID, "uid-1"),
        Row::new("kubelet pod uid when no sandbox id")
            .ann(NS, "tenant-a")
            .ann(UID, "uid-1")
            .ns("tenant-a")
            .group("tenant-a/pod:uid-1"),
        Row::new("containerd sandbox uid when no sandbox id")
            .ann(NS, "tenant-a")
            .ann(UID_CRI, "uid-2")
            .ns("tenant-a")
            .group("tenant-a/pod:uid-2"),
        Row::new("kubelet pod uid wins over containerd sandbox uid")
            .ann(NS, "tenant-a")
            .ann(UID, "uid-1")
            .ann(UID_CRI, "uid-2")
            .ns("tenant-a")
            .group("tenant-a/pod:uid-1"),
        Row::new("containerd namespace key")
            .ann(NS_CRI, "tenant-b")
            .ann(SB, "sb1")
            .ns("tenant-b")
            .group("tenant-b/pod:sb1"),
        Row::new("the two namespace keys agree").pod().ann(NS_CRI, "tenant-a"),
        // A pod annotation let through an allow-list must not claim another namespace.
        Row::new("namespace keys that disagree: own cookie, no namespace")
            .ann(NS, "tenant-a")
            .ann(NS_CRI, "tenant-b")
            .ann(SB, "sb1")
            .ann(ANN_GROUP, "web")
            .group("container:c1")
            .invalid("disagree"),
        Row::new("namespace without pod: the container alone, scoped")
            .ann(NS, "tenant-a")
            .ns("tenant-a")
            .group("tenant-a/container:c1"),
        Row::new("pod without namespace: unscoped pod key").ann(SB, "sb1").group("pod:sb1"),
        // --- named groups ---
        Row::new("our group wins over the pod").pod().ann(ANN_GROUP, "web").group("tenant-a/web"),
        Row::new("Koordinator group wins over the pod").pod().ann(KOORD_GROUP, "kg").group("tenant-a/kg"),
        Row::new("our group wins over Koordinator's")
            .pod()
            .ann(KOORD_GROUP, "kg")
            .ann(ANN_GROUP, "web")
            .group("tenant-a/web"),
        Row::new("named group without namespace is unscoped").ann(ANN_GROUP, "web").group("web"),
        Row::new("63-character group is accepted")
            .ann(NS, "tenant-a")
            .ann(ANN_GROUP, long(63))
            .ns("tenant-a")
            .group("tenant-a/ggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggg"),
        Row::new("group with dots, dashes, underscores, digits")
            .pod()
            .ann(ANN_GROUP, "Web_1.prod-2")
            .group("tenant-a/Web_1.prod-2"),
        Row::new("a group named like another namespace's key stays in ours")
            .ann(NS, "tenant-b")
            .ann(ANN_GROUP, "tenant-a")
            .ns("tenant-b")
            .group("tenant-b/tenant-a"),
        // --- cross-namespace flag ---
        Row::new("cross-namespace: named group unscoped").pod().ann(ANN_GROUP, "web").cfg(cfg_cross).group("web"),
        Row::new("cross-namespace: Koordinator group unscoped").pod().ann(KOORD_GROUP, "kg").cfg(cfg_cross).group("kg"),
        Row::new("cross-namespace: pod key stays scoped").pod().cfg(cfg_cross),
        Row::new("cross-namespace: container key stays scoped")
            .ann(NS, "tenant-a")
            .cfg(cfg_cross)
            .ns("tenant-a")
            .group("tenant-a/container:c1"),
        Row::new("cross-namespace: exclusive key stays scoped")
            .pod()
            .ann(UID, "uid-1")
            .ann(ANN_POLICY, "exclusive")
            .cfg(cfg_cross)
            .policy(P::Exclusive)
            .group("tenant-a/exclusive:uid-1"),
        // --- policies ---
        Row::new("policy exclusive: the pod uid")
            .pod()
            .ann(UID, "uid-1")
            .ann(ANN_POLICY, "exclusive")
            .policy(P::Exclusive)
            .group("tenant-a/exclusive:uid-1"),
        Row::new("exclusive ignores our named group")
            .pod()
            .ann(UID, "uid-1")
            .ann(ANN_GROUP, "web")
            .ann(ANN_POLICY, "exclusive")
            .policy(P::Exclusive)
            .group("tenant-a/exclusive:uid-1"),
        Row::new("exclusive ignores even an invalid named group")
            .pod()
            .ann(UID, "uid-1")
            .ann(ANN_GROUP, "a/b")
            .ann(ANN_POLICY, "exclusive")
            .policy(P::Exclusive)
            .group("tenant-a/exclusive:uid-1"),
        Row::new("exclusive with containerd sandbox uid")
            .pod()
            .ann(UID_CRI, "uid-2")
            .ann(ANN_POLICY, "exclusive")
            .policy(P::Exclusive)
            .group("tenant-a/exclusive:uid-2"),
        Row::new("exclusive without pod uid: the container (sandbox id not used)")
            .pod()
            .ann(ANN_POLICY, "exclusive")
            .policy(P::Exclusive)
            .group("tenant-a/container:c1"),
        Row::new("Koordinator policy exclusive")
            .pod()
            .ann(UID, "uid-1")
            .ann(KOORD_POLICY, "exclusive")
            .policy(P::Exclusive)
            .group("tenant-a/exclusive:uid-1"),
        Row::new("our policy default wins over Koordinator's exclusive")
            .pod()
            .ann(UID, "uid-1")
            .ann(KOORD_POLICY, "exclusive")
            .ann(ANN_POLICY, "default"),
        Row::new("our policy none wins over Koordinator's exclusive")
            .pod()
            .ann(KOORD_POLICY, "exclusive")
            .ann(ANN_POLICY, "none")
            .policy(P::None)
            .clear(),
        Row::new("our policy exclusive wins over Koordinator's none")
            .pod()
            .ann(UID, "uid-1")
            .ann(KOORD_POLICY, "none")
            .ann(ANN_POLICY, "exclusive")
            .policy(P::Exclusive)
            .group("tenant-a/exclusive:uid-1"),
        Row::new("policy none clears").pod().ann(ANN_POLICY, "none").policy(P::None).clear(),
        Row::new("Koordinator policy none clears").pod().ann(KOORD_POLICY, "none").policy(P::None).clear(),
        Row::new("policy none ignores a named group")
            .pod()
            .ann(ANN_GROUP, "web")
            .ann(ANN_POLICY, "none")
            .policy(P::None)
            .clear(),
        Row::new("explicit policy default").pod().ann(ANN_POLICY, "default"),
        // An empty policy of ours is unset, so Koordinator's applies (here the narrower exclusive).
        Row::new("empty policy defers to Koordinator's")
            .pod()
            .ann(UID, "uid-1")
            .ann(KOORD_POLICY, "exclusive")
            .ann(ANN_POLICY, "")
            .policy(P::Exclusive)
            .group("tenant-a/exclusive:uid-1"),
        Row::new("unknown policy: own cookie")
            .pod()
            .ann(ANN_POLICY, "shared")
            .own_invalid("oci-coresched-hook/policy \"shared\""),
        Row::new("unknown Koordinator policy: own cookie")
            .pod()
            .ann(KOORD_POLICY, "gold")
            .own_invalid("koordinator.sh/core-sched-policy"),
        Row::new("policy is case-sensitive").pod().ann(ANN_POLICY, "Exclusive").own_invalid("\"Exclusive\""),
        Row::new("unknown policy with a named group: own cookie")
            .pod()
            .ann(ANN_GROUP, "web")
            .ann(ANN_POLICY, "shared")
            .own_invalid("shared"),
        // --- QoS rules ---
        Row::new("no QoS: default rule").pod().cfg(cfg_koord),
        Row::new("expeller suffix on a named group (LSR)")
            .pod()
            .ann(KOORD_QOS, "LSR")
            .ann(ANN_GROUP, "web")
            .cfg(cfg_koord)
            .qos("LSR")
            .group("tenant-a/web-expeller"),
        Row::new("expeller suffix on the pod group (LS)")
            .pod()
            .ann(KOORD_QOS, "LS")
            .cfg(cfg_koord)
            .qos("LS")
            .group("tenant-a/pod:sb1:expeller"),
        Row::new("expeller suffix on an unscoped cross-namespace group")
            .pod()
            .ann(KOORD_QOS, "LS")
            .ann(ANN_GROUP, "web")
            .cfg(cfg_koord_cross)
            .qos("LS")
            .group("web-expeller"),
        Row::new("expeller suffix on the exclusive key (Koordinator's semantics)")
            .pod()
            .ann(UID, "uid-1")
            .ann(KOORD_QOS, "LSR")
            .ann(ANN_POLICY, "exclusive")
            .cfg(cfg_koord)
            .policy(P::Exclusive)
            .qos("LSR")
            .group("tenant-a/exclusive:uid-1:expeller"),
        Row::new("LSE follows the LSR rule (Koordinator)")
            .pod()
            .ann(KOORD_QOS, "LSE")
            .ann(ANN_GROUP, "web")
            .cfg(cfg_lsr)
            .qos("LSR")
            .group("tenant-a/web-expeller"),
        Row::new("LSE follows the LSR default rule when the config has neither")
            .pod()
            .ann(KOORD_QOS, "LSE")
            .ann(ANN_GROUP, "web")
            .qos("LSR")
            .group("tenant-a/web"),
        Row::new("LSE with its own rule in the config")
            .pod()
            .ann(KOORD_QOS, "LSE")
            .ann(ANN_GROUP, "web")
            .cfg(cfg_lse)
            .qos("LSE")
            .group("tenant-a/web")
            .idle(),
        Row::new("BE: sched_idle when the rule says so").pod().ann(KOORD_QOS, "BE").cfg(cfg_koord).qos("BE").idle(),
        Row::new("BE with policy none: clear, no cpu.idle")
            .pod()
            .ann(KOORD_QOS, "BE")
            .ann(ANN_POLICY, "none")
            .cfg(cfg_koord)
            .policy(P::None)
            .qos("BE")
            .clear(),
        Row::new("BE: no sched_idle under the default rule").pod().ann(KOORD_QOS, "BE").qos("BE"),
        Row::new("BE from the cgroup parent").pod().cgroup(BE_PATH).cfg(cfg_koord).qos("BE").idle(),
        Row::new("burstable cgroup parent is LS")
            .pod()
            .cgroup(BURSTABLE_PATH)
            .cfg(cfg_koord)
            .qos("LS")
            .group("tenant-a/pod:sb1:expeller"),
        Row::new("burstable cgroup parent stays LS when LSR is enabled")
            .pod()
            .cgroup(BURSTABLE_PATH)
            .cfg(cfg_lsr)
            .qos("LS")
            .group("tenant-a/pod:sb1"),
        Row::new("guaranteed cgroup parent follows the enabled LSR rule")
            .pod()
            .cgroup(GUARANTEED_PATH)
            .cfg(cfg_lsr)
            .qos("LSR")
            .group("tenant-a/pod:sb1:expeller"),
        Row::new("guaranteed systemd cgroup parent follows the enabled LSR rule")
            .pod()
            .cgroup(GUARANTEED_SYSTEMD_PATH)
            .cfg(cfg_lsr)
            .qos("LSR")
            .group("tenant-a/pod:sb1:expeller"),
        Row::new("guaranteed cgroup parent follows the LS rule when LSR is disabled")
            .pod()
            .cgroup(GUARANTEED_PATH)
            .cfg(cfg_lsr_off)
            .qos("LS")
            .group("tenant-a/pod:sb1:expeller"),
        Row::new("guaranteed cgroup parent follows the LS rule when the config has no LSR rule")
            .pod()
            .cgroup(GUARANTEED_PATH)
            .cfg(cfg_be_off)
            .qos("LS"),
        Row::new("guaranteed cgroup parent under the Koordinator-like config is LSR")
            .pod()
            .cgroup(GUARANTEED_PATH)
            .cfg(cfg_koord)
            .qos("LSR")
            .group("tenant-a/pod:sb1:expeller"),
        Row::new("no kubepods: no QoS, no rule applied").pod().cgroup(SYSTEM_PATH).cfg(cfg_be_off),
        Row::new("Koordinator QoS wins over the cgroup parent")
            .pod()
            .ann(KOORD_QOS, "LS")
            .cgroup(GUARANTEED_PATH)
            .cfg(cfg_lsr)
            .qos("LS"),
        Row::new("Koordinator QoS wins over a besteffort cgroup parent")
            .pod()
            .ann(KOORD_QOS, "LSE")
            .cgroup(BE_PATH)
            .cfg(cfg_koord)
            .qos("LSR")
            .group("tenant-a/pod:sb1:expeller"),
        Row::new("disabled class clears (and writes no cpu.idle)")
            .pod()
            .ann(KOORD_QOS, "BE")
            .cfg(cfg_be_off)
            .qos("BE")
            .clear(),
        Row::new("disabled class (from cgroup) clears even a named group")
            .pod()
            .ann(ANN_GROUP, "web")
            .cgroup(BE_PATH)
            .cfg(cfg_be_off)
            .qos("BE")
            .clear(),
        Row::new("disabled class with policy exclusive clears")
            .pod()
            .ann(UID, "uid-1")
            .ann(ANN_POLICY, "exclusive")
            .ann(KOORD_QOS, "BE")
            .cfg(cfg_be_off)
            .policy(P::Exclusive)
            .qos("BE")
            .clear(),
        Row::new("other classes unaffected by a disabled BE").pod().ann(KOORD_QOS, "LS").cfg(cfg_be_off).qos("LS"),
        Row::new("SYSTEM is skipped").pod().ann(KOORD_QOS, "SYSTEM").qos("SYSTEM").skip(),
        Row::new("SYSTEM is skipped even with policy none")
            .pod()
            .ann(ANN_POLICY, "none")
            .ann(KOORD_QOS, "SYSTEM")
            .policy(P::None)
            .qos("SYSTEM")
            .skip(),
        Row::new("SYSTEM is skipped even with an invalid group")
            .pod()
            .ann(ANN_GROUP, "a/b")
            .ann(KOORD_QOS, "SYSTEM")
            .qos("SYSTEM")
            .skip(),
        Row::new("SYSTEM is skipped even with an invalid namespace")
            .ann(NS, "Tenant_A")
            .ann(KOORD_QOS, "SYSTEM")
            .qos("SYSTEM")
            .skip(),
        // --- lifecycle and pid ---
        Row::new("no pid: skip").pod().pid(None).skip(),
        Row::new("pid 0: skip").pod().pid(Some(0)).skip(),
        Row::new("pid 1: skip").pod().pid(Some(1)).skip(),
        Row::new("negative pid: skip").pod().pid(Some(-7)).skip(),
        Row::new("pid 2 is a container init").pod().pid(Some(2)),
        Row::new("forget").pod().pid(None).lifecycle(L::Forget).action(A::Forget).no_group(),
        Row::new("forget whatever the policy")
            .pod()
            .ann(ANN_POLICY, "none")
            .lifecycle(L::Forget)
            .policy(P::None)
            .action(A::Forget)
            .no_group(),
        Row::new("forget even with invalid annotations")
            .pod()
            .ann(ANN_POLICY, "bogus")
            .lifecycle(L::Forget)
            .action(A::Forget)
            .no_group(),
        Row::new("forget even for SYSTEM")
            .pod()
            .ann(KOORD_QOS, "SYSTEM")
            .lifecycle(L::Forget)
            .qos("SYSTEM")
            .action(A::Forget)
            .no_group(),
        Row::new("skip stage").pod().lifecycle(L::Skip).skip(),
        // --- invalid group names never widen sharing ---
        // An empty group annotation is "unset": the pod group, which is the default and safe.
        Row::new("empty group is unset: the pod").pod().ann(ANN_GROUP, ""),
        Row::new("empty Koordinator group is unset: the pod").pod().ann(KOORD_GROUP, ""),
        // An empty group of ours is unset, so Koordinator's name applies.
        Row::new("empty group defers to Koordinator's")
            .pod()
            .ann(ANN_GROUP, "")
            .ann(KOORD_GROUP, "kg")
            .group("tenant-a/kg"),
        Row::new("empty group without pod: the container")
            .ann(NS, "tenant-a")
            .ann(ANN_GROUP, "")
            .ns("tenant-a")
            .group("tenant-a/container:c1"),
        Row::new("64-character group").pod().ann(ANN_GROUP, long(64)).own_invalid("oci-coresched-hook/group"),
        Row::new("1000-character group").pod().ann(ANN_GROUP, long(1000)).own_invalid("is invalid"),
        Row::new("newline in group").pod().ann(ANN_GROUP, "we\nb").own_invalid("is invalid"),
        Row::new("NUL in group").pod().ann(ANN_GROUP, "web\0").own_invalid("is invalid"),
        Row::new("tab in group").pod().ann(ANN_GROUP, "we\tb").own_invalid("is invalid"),
        Row::new("slash in group").pod().ann(ANN_GROUP, "a/b").own_invalid("\"a/b\""),
        Row::new("another namespace's key as group").pod().ann(ANN_GROUP, "tenant-b/web").own_invalid("is invalid"),
        Row::new("dot-dot group").pod().ann(ANN_GROUP, "..").own_invalid("is invalid"),
        Row::new("path traversal group").pod().ann(ANN_GROUP, "../tenant-b/web").own_invalid("is invalid"),
        Row::new("colon in group").pod().ann(ANN_GROUP, "x:y").own_invalid("\"x:y\""),
        Row::new("forged pod key as group").pod().ann(ANN_GROUP, "pod:sb2").own_invalid("is invalid"),
        Row::new("forged container key as group").pod().ann(ANN_GROUP, "container:c2").own_invalid("is invalid"),
        Row::new("unicode group").pod().ann(ANN_GROUP, "wéb").own_invalid("is invalid"),
        Row::new("unicode look-alike group").pod().ann(ANN_GROUP, "wеb").own_invalid("is invalid"),
        Row::new("leading dash").pod().ann(ANN_GROUP, "-web").own_invalid("is invalid"),
        Row::new("trailing dash").pod().ann(ANN_GROUP, "web-").own_invalid("is invalid"),
        Row::new("leading dot").pod().ann(ANN_GROUP, ".web").own_invalid("is invalid"),
        Row::new("whitespace").pod().ann(ANN_GROUP, " web").own_invalid("is invalid"),
        Row::new("invalid Koordinator group")
            .pod()
            .ann(KOORD_GROUP, "a/b")
            .own_invalid("koordinator.sh/core-sched-group-id"),
        Row::new("valid our group hides an invalid Koordinator group")
            .pod()
            .ann(KOORD_GROUP, "a/b")
            .ann(ANN_GROUP, "web")
            .group("tenant-a/web"),
        Row::new("invalid group under cross-namespace: still own, still scoped")
            .pod()
            .ann(ANN_GROUP, "x:y")
            .cfg(cfg_cross)
            .own_invalid("is invalid"),
        Row::new("invalid group: no expeller suffix")
            .pod()
            .ann(ANN_GROUP, "x:y")
            .ann(KOORD_QOS, "LS")
            .cfg(cfg_koord)
            .qos("LS")
            .own_invalid("is invalid"),
        Row::new("invalid group: sched_idle still follows the class")
            .pod()
            .ann(ANN_GROUP, "x:y")
            .ann(KOORD_QOS, "BE")
            .cfg(cfg_koord)
            .qos("BE")
            .idle()
            .own_invalid("is invalid"),
        // A disabled class never looks at the group (like policy none), so a bad name is moot;
        // a bad policy, namespace or QoS is found first and still gives the container its own cookie.
        Row::new("invalid group in a disabled class: clear, group not read")
            .pod()
            .ann(ANN_GROUP, "x:y")
            .ann(KOORD_QOS, "BE")
            .cfg(cfg_be_off)
            .qos("BE")
            .clear(),
        Row::new("invalid policy in a disabled class: own cookie")
            .pod()
            .ann(ANN_POLICY, "shared")
            .ann(KOORD_QOS, "BE")
            .cfg(cfg_be_off)
            .qos("BE")
            .idle()
            .own_invalid("shared"),
        Row::new("invalid group without namespace: unscoped own key")
            .ann(SB, "sb1")
            .ann(ANN_GROUP, "x:y")
            .group("container:c1")
            .invalid("is invalid"),
        // --- invalid namespace, QoS, ids ---
        Row::new("invalid namespace Tenant_A")
            .ann(NS, "Tenant_A")
            .ann(SB, "sb1")
            .group("container:c1")
            .invalid("namespace \"Tenant_A\""),
        Row::new("invalid namespace with a named group")
            .ann(NS, "Tenant_A")
            .ann(ANN_GROUP, "web")
            .group("container:c1")
            .invalid("Tenant_A"),
        Row::new("invalid namespace under cross-namespace")
            .ann(NS, "Tenant_A")
            .ann(ANN_GROUP, "web")
            .cfg(cfg_cross)
            .group("container:c1")
            .invalid("Tenant_A"),
        Row::new("invalid containerd namespace")
            .ann(NS_CRI, "-x")
            .ann(SB, "sb1")
            .group("container:c1")
            .invalid("namespace"),
        Row::new("invalid namespace with a slash")
            .ann(NS, "a/b")
            .ann(SB, "sb1")
            .group("container:c1")
            .invalid("namespace"),
        Row::new("64-character namespace")
            .ann(NS, "n".repeat(64))
            .ann(SB, "sb1")
            .group("container:c1")
            .invalid("namespace"),
        Row::new("empty namespace").ann(NS, "").ann(SB, "sb1").group("container:c1").invalid("namespace"),
        Row::new("invalid namespace with policy none: still own")
            .ann(NS, "Tenant_A")
            .ann(ANN_POLICY, "none")
            .policy(P::None)
            .group("container:c1")
            .invalid("Tenant_A"),
        Row::new("invalid QoS gold")
            .pod()
            .ann(KOORD_QOS, "gold")
            .cfg(cfg_koord)
            .own_invalid("koordinator.sh/qosClass \"gold\""),
        Row::new("QoS is case-sensitive").pod().ann(KOORD_QOS, "be").cfg(cfg_koord).own_invalid("qosClass"),
        Row::new("invalid QoS hides the cgroup parent")
            .pod()
            .ann(KOORD_QOS, "gold")
            .cgroup(BE_PATH)
            .cfg(cfg_be_off)
            .own_invalid("gold"),
        Row::new("invalid sandbox id")
            .ann(NS, "tenant-a")
            .ann(SB, "sb/1")
            .ns("tenant-a")
            .own_invalid("io.kubernetes.cri.sandbox-id"),
        Row::new("invalid CRI-O sandbox id")
            .ann(NS, "tenant-a")
            .ann(SB_CRIO, "sb:1")
            .ns("tenant-a")
            .own_invalid("io.kubernetes.cri-o.SandboxID"),
        Row::new("invalid pod uid for the pod group")
            .ann(NS, "tenant-a")
            .ann(UID, "../x")
            .ns("tenant-a")
            .own_invalid("io.kubernetes.pod.uid"),
        Row::new("invalid pod uid for exclusive")
            .pod()
            .ann(UID, "uid:1")
            .ann(ANN_POLICY, "exclusive")
            .policy(P::Exclusive)
            .own_invalid("io.kubernetes.pod.uid"),
        Row::new("several problems are all reported")
            .pod()
            .ann(KOORD_QOS, "gold")
            .ann(ANN_POLICY, "shared")
            .own_invalid("SYSTEM; oci-coresched-hook/policy \"shared\""),
    ]
}

fn annotations(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

#[test]
fn decision_table() {
    let rows = rows();
    assert!(rows.len() >= 40, "only {} rows", rows.len());
    let mut names = BTreeSet::new();
    let mut failures = Vec::new();
    for row in &rows {
        assert!(names.insert(row.name), "duplicate row name {:?}", row.name);
        let ann = annotations(&row.ann);
        let input = input(row.lifecycle, "c1", row.pid, &ann, row.cgroup);
        let d = match decide(&input, &(row.cfg)()) {
            Ok(d) => d,
            Err(e) => {
                failures.push(format!("{}: unexpected error {e}", row.name));
                continue;
            }
        };
        let got =
            (d.action.kind(), d.policy, d.group(), d.namespace.as_deref(), d.qos.map(QosClass::as_str), d.sched_idle());
        let want = (row.action, row.policy, row.group, row.namespace, row.qos, row.sched_idle);
        if got != want {
            failures.push(format!("{}:\n   got {got:?}\n  want {want:?}\n  decision {d:?}", row.name));
        }
        match (row.invalid, &d.invalid) {
            (None, None) => {}
            (Some(s), Some(msg)) if msg.contains(s) => {}
            (want, got) => failures.push(format!("{}: invalid {got:?}, want one containing {want:?}", row.name)),
        }
        if d.container_id != "c1" || d.pid != row.pid {
            failures.push(format!("{}: container_id/pid not copied: {d:?}", row.name));
        }
        if d.reason.is_empty() {
            failures.push(format!("{}: empty reason", row.name));
        }
    }
    assert!(failures.is_empty(), "{} of {} rows failed:\n{}", failures.len(), rows.len(), failures.join("\n"));
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
// Property-style checks over generated inputs.

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
