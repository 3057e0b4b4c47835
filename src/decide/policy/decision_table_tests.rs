//! The decision table: one row per rule of ARCHITECTURE §4, each a container's input and config
//! with the action, policy, group, namespace, QoS class and `sched_idle` the decision must give.

use std::collections::BTreeSet;

use super::*;

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
