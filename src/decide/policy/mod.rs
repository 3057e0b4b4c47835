//! The decision: OCI state + annotations + config → what to do with the container's cookie.
//!
//! A pure function, so it is tested exhaustively and `explain` can print it without touching the
//! kernel or the cache. Annotations are user-controlled; anything invalid falls back to a cookie of
//! the container's own, which can never widen sharing.
//!
//! [`decide`] takes the steps of ARCHITECTURE.md "Group resolution" in order, one function each
//! (`namespace_of`, `policy_of`, `gate`, `own_cookie`, `group_key`, `scope`), and is complete when
//! it returns: the action (with the init's pid inside the actions that act on it), the pod labels,
//! `linux.cgroupsPath` and the sandbox; [`Decision::labels`] is what the cache records.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::config::{Config, QosClass};
use crate::values::{Labels, Pid};

mod annotations;
mod qos;

pub use annotations::{
    ANN_GROUP, ANN_POLICY, BadContainerId, CONTAINER_NAME, CONTAINER_TYPE, EXPELLER_SUFFIX, INTERNAL_EXPELLER_SUFFIX,
    InvalidAnnotation, KOORD_GROUP, KOORD_POLICY, KOORD_QOS, MAX_GROUP_LEN, MAX_ID_LEN, MAX_POD_LABEL_LEN, POD_NAME,
    POD_NAMESPACE, POD_UID, PodLabels, SANDBOX_ID, SandboxRef, validate_group, validate_namespace,
};
use annotations::{first, first_set, id_chars_ok, truncate};
use qos::qos_of;
pub use qos::{KubeQos, kube_qos_from_cgroup};

/// Where in its life the container is, from the stage flag or the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lifecycle {
    /// Its init exists and needs its cookie (createRuntime, prestart, poststart).
    Ensure,
    /// It has stopped.
    Forget,
    /// A stage at which there is nothing to do (startContainer, createContainer).
    Skip,
}

/// What the hook does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Give the init `pid` the cookie of `group`, and write `cpu.idle = 1` when `sched_idle`.
    Ensure {
        /// Group key in the cache (`<namespace>/<group>` when namespaced).
        group: String,
        /// Whether `cpu.idle` is written.
        sched_idle: bool,
        /// The container's init: past the pid gate, never 0 (which `prctl` reads as the caller)
        /// nor 1.
        pid: Pid,
    },
    /// Give the init `pid` cookie 0 (and leave any group).
    Clear {
        /// The container's init, as for [`Action::Ensure`].
        pid: Pid,
    },
    /// Remove the container from the cache.
    Forget,
    /// Do nothing.
    Skip,
}

/// An [`Action`] without its data: what `explain` prints as `action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ActionKind {
    /// [`Action::Ensure`].
    Ensure,
    /// [`Action::Clear`].
    Clear,
    /// [`Action::Forget`].
    Forget,
    /// [`Action::Skip`].
    Skip,
}

impl Action {
    /// The action without its data.
    pub fn kind(&self) -> ActionKind {
        match self {
            Action::Ensure { .. } => ActionKind::Ensure,
            Action::Clear { .. } => ActionKind::Clear,
            Action::Forget => ActionKind::Forget,
            Action::Skip => ActionKind::Skip,
        }
    }
}

/// The container's core-scheduling policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Share with the group (named, else the pod, else the container alone).
    Default,
    /// A cookie for the pod (or container) alone, whatever group is named.
    Exclusive,
    /// No cookie.
    None,
}

/// What [`decide`] is given about one container; [`crate::decide::input`] builds it from each place
/// that describes one (an OCI state, NRI's pod and container, a runtime's state directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerInput {
    /// Where it is in its life.
    pub lifecycle: Lifecycle,
    /// Container id (runtime-provided).
    pub id: String,
    /// Init pid, if any.
    pub pid: Option<i64>,
    /// Its annotations (the state's, completed by the bundle's config).
    pub annotations: BTreeMap<String, String>,
    /// `linux.cgroupsPath`, for the Kubernetes QoS class and the `cpu.idle` cgroup.
    pub cgroups_path: Option<String>,
}

/// The decision; its JSON form is what `explain` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// What to do.
    pub action: Action,
    /// Container id.
    pub container_id: String,
    /// Init pid.
    pub pid: Option<i64>,
    /// Policy in force.
    pub policy: Policy,
    /// Pod namespace, when known.
    pub namespace: Option<String>,
    /// QoS class whose rule applied: the container's own class, except that LSE follows LSR and
    /// a Guaranteed pod follows LSR or LS (see `reason`). `None` outside Kubernetes.
    pub qos: Option<QosClass>,
    /// Why.
    pub reason: String,
    /// An annotation that was rejected; the container then gets a cookie of its own.
    pub invalid: Option<String>,
    /// Pod and container names for metrics labels, from the same annotations. Not part of the
    /// decision proper: they never change the action, and `explain` does not print them.
    pub pod: PodLabels,
    /// The input's `linux.cgroupsPath`, for the cgroup `cpu.idle` goes to
    /// ([`crate::host::cgroup::idle_target`]). Not printed by `explain`.
    pub cgroups_path: Option<String>,
    /// The container's pod sandbox, for the pod's shim ([`crate::cookies::shim`]). Not printed by
    /// `explain`.
    pub sandbox: SandboxRef,
}

/// The JSON form of a [`Decision`]: the action's kind, its group and `sched_idle` as fields of
/// their own, in the order `explain` has always printed them.
#[derive(Serialize)]
struct DecisionJson<'a> {
    action: ActionKind,
    container_id: &'a str,
    pid: Option<i64>,
    policy: Policy,
    group: Option<&'a str>,
    namespace: Option<&'a str>,
    qos: Option<QosClass>,
    sched_idle: bool,
    reason: &'a str,
    invalid: Option<&'a str>,
}

impl Serialize for Decision {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        DecisionJson {
            action: self.action.kind(),
            container_id: &self.container_id,
            pid: self.pid,
            policy: self.policy,
            group: self.group(),
            namespace: self.namespace.as_deref(),
            qos: self.qos,
            sched_idle: self.sched_idle(),
            reason: &self.reason,
            invalid: self.invalid.as_deref(),
        }
        .serialize(s)
    }
}

impl Decision {
    /// The group of an ensure.
    pub fn group(&self) -> Option<&str> {
        match &self.action {
            Action::Ensure { group, .. } => Some(group),
            _ => None,
        }
    }

    /// Whether an ensure writes `cpu.idle = 1`.
    pub fn sched_idle(&self) -> bool {
        matches!(self.action, Action::Ensure { sched_idle: true, .. })
    }

    /// What the cache records for this container: its namespace and pod labels, with the init's
    /// cgroup as `/proc` gives it, and, when the decision has `sched_idle`, the cgroup whose
    /// `cpu.idle` is 1 ([`crate::host::cgroup::idle_target`]). The hook and a reload both record
    /// through this.
    pub fn labels(&self, cgroup: Option<String>) -> Labels {
        let idle_cgroup = cgroup
            .as_deref()
            .filter(|_| self.sched_idle())
            .map(|cg| crate::host::cgroup::idle_target(cg, self.cgroups_path.as_deref()));
        Labels {
            cgroup,
            namespace: self.namespace.clone(),
            pod_name: self.pod.name.clone(),
            pod_uid: self.pod.uid.clone(),
            container_name: self.pod.container_name.clone(),
            idle_cgroup,
        }
    }
}

/// Decides what to do with a container, in the steps ARCHITECTURE.md §4 lists: the id, the
/// namespace, the QoS class and the policy are read (each invalid value is a problem), then the
/// lifecycle and pid gates, then the rule, then the group key and its scope. The decision is
/// complete when it returns.
pub fn decide(input: &ContainerInput, config: &Config) -> Result<Decision, BadContainerId> {
    // 1. The container id.
    if !id_chars_ok(&input.id, MAX_ID_LEN) {
        return Err(BadContainerId(truncate(&input.id)));
    }
    let ann = &input.annotations;
    let mut problems: Vec<InvalidAnnotation> = Vec::new();
    // 2-4. Namespace, QoS class, policy.
    let namespace = namespace_of(ann, &mut problems);
    let qos = qos_of(ann, input.cgroups_path.as_deref(), config, &mut problems);
    let policy = policy_of(ann, &mut problems);
    let mut d = Decision {
        action: Action::Skip,
        container_id: input.id.clone(),
        pid: input.pid,
        policy,
        namespace,
        qos: qos.class(),
        reason: String::new(),
        invalid: None,
        pod: PodLabels::from_annotations(ann),
        cgroups_path: input.cgroups_path.clone(),
        sandbox: SandboxRef::from_annotations(&input.id, ann),
    };
    // 5. The lifecycle and pid gates, then SYSTEM: whatever the annotations say.
    let pid = match gate(input.lifecycle, input.pid, qos.system) {
        Ok(pid) => pid,
        Err((action, reason)) => {
            (d.action, d.reason) = (action, reason);
            return Ok(d);
        }
    };
    // 6. The rule.
    let rule = qos.rule();
    let with_why = |reason: String| match qos.why() {
        Some(why) => format!("{reason}; {why}"),
        None => reason,
    };
    let own = format!("container:{}", input.id);
    // 7. A problem so far: a cookie of its own.
    if !problems.is_empty() {
        return Ok(own_cookie(d, own, &problems, rule.sched_idle, pid));
    }
    // 8. No cookie.
    if !rule.enable {
        d.action = Action::Clear { pid }; // `cpu.idle` is only written on an ensure
        d.reason = with_why(format!(
            "core scheduling is disabled for QoS class {} by the config",
            d.qos.map_or("-", QosClass::as_str)
        ));
        return Ok(d);
    }
    if d.policy == Policy::None {
        d.action = Action::Clear { pid };
        d.reason = "policy none: the container runs without a cookie".into();
        return Ok(d);
    }
    // 9. The group key.
    let (key, mut reason) = match group_key(d.policy, ann, &own) {
        Ok(chosen) => chosen,
        Err(problem) => return Ok(own_cookie(d, own, &[problem], rule.sched_idle, pid)),
    };
    // 10. Its scope, then the expeller suffix.
    let named = is_named(&key);
    let scoped = !(named && config.allow_cross_namespace_groups);
    let mut group = scope(d.namespace.as_deref(), key, scoped);
    if rule.core_expeller {
        // Internal keys end in an id, and ids may contain '-': ":expeller" cannot collide with one.
        group.push_str(if named { EXPELLER_SUFFIX } else { INTERNAL_EXPELLER_SUFFIX });
        reason.push_str(&format!(", expeller group of QoS class {}", d.qos.map_or("-", QosClass::as_str)));
    }
    d.action = Action::Ensure { group, sched_idle: rule.sched_idle, pid };
    d.reason = with_why(reason);
    Ok(d)
}

/// Step 2: the pod's namespace. It scopes every group key, so an invalid one is a problem, not
/// a blank. CRI-O sets the first key and containerd the second; a pod annotation passed through
/// an allow-list could add the other one, so two that disagree mean someone claims a namespace.
fn namespace_of(ann: &BTreeMap<String, String>, problems: &mut Vec<InvalidAnnotation>) -> Option<String> {
    let namespaces: Vec<&str> = POD_NAMESPACE.iter().filter_map(|k| ann.get(*k).map(String::as_str)).collect();
    if let [a, b] = namespaces[..]
        && a != b
    {
        problems.push(InvalidAnnotation::NamespacesDisagree { a: truncate(a), b: truncate(b) });
        return None;
    }
    let (_, ns) = first(ann, &POD_NAMESPACE)?;
    match validate_namespace(ns) {
        Ok(()) => Some(ns.to_string()),
        Err(e) => {
            problems.push(e);
            None
        }
    }
}

/// Step 4: ours, else Koordinator's (an empty value counts as unset).
fn policy_of(ann: &BTreeMap<String, String>, problems: &mut Vec<InvalidAnnotation>) -> Policy {
    match first_set(ann, &[ANN_POLICY, KOORD_POLICY]) {
        None | Some((_, "default")) => Policy::Default,
        Some((_, "exclusive")) => Policy::Exclusive,
        Some((_, "none")) => Policy::None,
        Some((key, other)) => {
            problems.push(InvalidAnnotation::Policy { key, value: truncate(other) });
            Policy::Default
        }
    }
}

/// Step 5: what a container gets whatever its annotations say: a stopped one is forgotten, a
/// stage with nothing to do is skipped, an init that is not there (no pid, or pid ≤ 1) is never
/// touched, nor is QoS class SYSTEM. `Ok`: the init's pid, which the actions that need one carry.
fn gate(lifecycle: Lifecycle, pid: Option<i64>, system: bool) -> Result<Pid, (Action, String)> {
    match lifecycle {
        Lifecycle::Forget => {
            return Err((Action::Forget, "container stopped: forget it and drop its group when empty".into()));
        }
        Lifecycle::Skip => return Err((Action::Skip, "nothing to do at this stage".into())),
        Lifecycle::Ensure => {}
    }
    match pid {
        None => Err((Action::Skip, "state has no pid: nothing to give a cookie to".into())),
        Some(p) if p <= 1 => {
            Err((Action::Skip, format!("pid {p} is not a container init (pid <= 1 is never touched)")))
        }
        Some(p) => match Pid::try_from(p) {
            Err(_) => Err((Action::Skip, format!("pid {p} is not a container init (no kernel has such a pid)"))),
            Ok(_) if system => Err((Action::Skip, "QoS class SYSTEM is never touched".into())),
            Ok(pid) => Ok(pid),
        },
    }
}

/// Step 7: the container's own key, in its namespace, with what was rejected.
fn own_cookie(mut d: Decision, own: String, problems: &[InvalidAnnotation], sched_idle: bool, pid: Pid) -> Decision {
    d.invalid = Some(problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "));
    d.action = Action::Ensure { group: scope(d.namespace.as_deref(), own, true), sched_idle, pid };
    d.reason = "invalid annotation: the container gets a cookie of its own".into();
    d
}

/// Step 9: the group key of an ensure, and why; `Err` for an annotation the key cannot use.
fn group_key(policy: Policy, ann: &BTreeMap<String, String>, own: &str) -> Result<(String, String), InvalidAnnotation> {
    let pod = |keys: &[&'static str]| -> Result<Option<String>, InvalidAnnotation> {
        match first(ann, keys) {
            None => Ok(None),
            Some((_, v)) if id_chars_ok(v, MAX_ID_LEN) => Ok(Some(v.to_string())),
            Some((key, v)) => Err(InvalidAnnotation::Id { key, value: truncate(v) }),
        }
    };
    if policy == Policy::Exclusive {
        return Ok(match pod(&POD_UID)? {
            Some(uid) => (format!("exclusive:{uid}"), "policy exclusive: a cookie for the pod alone".into()),
            None => (own.to_string(), "policy exclusive: a cookie for the container alone".into()),
        });
    }
    if let Some((key, g)) = first_set(ann, &[ANN_GROUP, KOORD_GROUP]) {
        return match validate_group(g) {
            Ok(()) => Ok((g.to_string(), format!("group named by {key}"))),
            Err(_) => Err(InvalidAnnotation::Group { key: Some(key), name: truncate(g) }),
        };
    }
    let sandbox = match pod(&SANDBOX_ID)? {
        Some(s) => Some(s),
        None => pod(&POD_UID)?,
    };
    Ok(match sandbox {
        Some(id) => (format!("pod:{id}"), "default group: the pod".into()),
        None => (own.to_string(), "default group: the container alone (no pod annotations)".into()),
    })
}

/// Whether a group key (scoped or not) is a name an annotation gave, rather than one of the
/// internal keys decided when none did (`pod:`, `container:`, `exclusive:`): a name carries no
/// `:`, and neither does a namespace.
pub fn is_named(key: &str) -> bool {
    !key.contains(':')
}

/// Whether an annotation of a pod in `namespace` could have named group `key`: a name, scoped to
/// that namespace, or unscoped where the config allows groups across namespaces. `false` without
/// a namespace.
pub fn could_name(key: &str, namespace: Option<&str>, config: &Config) -> bool {
    let Some(ns) = namespace else { return false };
    is_named(key)
        && match key.split_once('/') {
            Some((scope, _)) => scope == ns,
            None => config.allow_cross_namespace_groups,
        }
}

/// Step 10: `<namespace>/<key>` when a namespace is known and the key is `scoped`.
fn scope(namespace: Option<&str>, key: String, scoped: bool) -> String {
    match (namespace, scoped) {
        (Some(ns), true) => format!("{ns}/{key}"),
        _ => key,
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
