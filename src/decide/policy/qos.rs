//! The QoS class of a container and the config rule it follows: Koordinator's annotation, else
//! the kubelet cgroup parent, mapped as Koordinator's core-sched rule does.
//!
//! Without the annotation, [`kube_qos_from_cgroup`] reads `linux.cgroupsPath`: a path containing
//! `kubepods` is BestEffort if it contains `besteffort`, else Burstable if it contains `burstable`,
//! else Guaranteed (Koordinator's `GetKubeQoSByCgroupParent`); no `kubepods`, no class. The rule
//! (`rule_for`): LSE follows `[qos.LSR]` unless the config has `[qos.LSE]`; LSR, LS and BE their
//! own; BestEffort → BE, Burstable → LS, Guaranteed → `[qos.LSR]` when the config enables it, else
//! LS. The decision's `qos` is the class whose rule applied, and its reason says why when that is
//! not the container's own.

use std::collections::BTreeMap;

use super::annotations::{InvalidAnnotation, KOORD_QOS, first, truncate};
use crate::config::{Config, QOS_CLASSES, QosClass, QosRule};

/// A pod's Kubernetes QoS class, as its kubelet cgroup parent shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeQos {
    /// Directly under `kubepods` (no `burstable` or `besteffort` level).
    Guaranteed,
    /// Under `kubepods/burstable` (`kubepods-burstable.slice`).
    Burstable,
    /// Under `kubepods/besteffort` (`kubepods-besteffort.slice`).
    BestEffort,
}

/// The Kubernetes QoS class implied by a kubelet cgroup parent (cgroupfs or systemd driver), as
/// Koordinator's `GetKubeQoSByCgroupParent` reads it: `besteffort`, else `burstable`, else
/// Guaranteed. `None` for a path without `kubepods` (not a kubelet pod).
pub fn kube_qos_from_cgroup(path: &str) -> Option<KubeQos> {
    let p = path.to_ascii_lowercase();
    if !p.contains("kubepods") {
        None
    } else if p.contains("besteffort") {
        Some(KubeQos::BestEffort)
    } else if p.contains("burstable") {
        Some(KubeQos::Burstable)
    } else {
        Some(KubeQos::Guaranteed)
    }
}

/// Where a container's QoS class came from.
#[derive(Debug, Clone, Copy)]
enum QosSource {
    /// `koordinator.sh/qosClass` (LSE, LSR, LS or BE; SYSTEM never gets this far).
    Koord(QosClass),
    /// The kubelet cgroup parent.
    Kube(KubeQos),
}

/// The config rule a container follows, mapped as Koordinator's core-sched rule does
/// (`coresched/rule.go`): LSE follows LSR; without a Koordinator class, BestEffort → BE, Burstable
/// → LS, and Guaranteed → LSR when LSR is enabled, else LS. Two differences, both because of this
/// config's shape: an explicit `[qos.LSE]` rule (Koordinator's NodeSLO has none) is used for LSE;
/// and "LSR enabled" means the config has a `[qos.LSR]` rule with `enable = true`, because here a
/// class without a rule gets the enabled default rule, where in Koordinator it is off.
/// Returns the class whose rule applies, the rule, and why, when that is not the class itself.
fn rule_for(src: QosSource, config: &Config) -> (QosClass, QosRule, Option<&'static str>) {
    match src {
        QosSource::Koord(QosClass::Lse) if !config.qos.contains_key(&QosClass::Lse) => (
            QosClass::Lsr,
            config.rule(QosClass::Lsr),
            Some("QoS class LSE follows the LSR rule (no [qos.LSE] in the config), as in Koordinator"),
        ),
        QosSource::Koord(class) => (class, config.rule(class), None),
        QosSource::Kube(KubeQos::BestEffort) => (QosClass::Be, config.rule(QosClass::Be), None),
        QosSource::Kube(KubeQos::Burstable) => (QosClass::Ls, config.rule(QosClass::Ls), None),
        QosSource::Kube(KubeQos::Guaranteed) => match config.qos.get(&QosClass::Lsr) {
            Some(lsr) if lsr.enable => (
                QosClass::Lsr,
                *lsr,
                Some(
                    "Guaranteed pod (kubelet cgroup parent) follows the LSR rule, as in Koordinator when LSR is enabled",
                ),
            ),
            _ => (
                QosClass::Ls,
                config.rule(QosClass::Ls),
                Some("Guaranteed pod (kubelet cgroup parent) follows the LS rule: the config enables no [qos.LSR]"),
            ),
        },
    }
}

/// The QoS class a container has and the rule that applies to it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Qos {
    /// `SYSTEM`: never touched.
    pub(super) system: bool,
    /// The class whose rule applies, the rule, and why when that is not the class itself.
    chosen: Option<(QosClass, QosRule, Option<&'static str>)>,
}

impl Qos {
    pub(super) fn class(&self) -> Option<QosClass> {
        if self.system { Some(QosClass::System) } else { self.chosen.map(|(class, ..)| class) }
    }

    pub(super) fn rule(&self) -> QosRule {
        self.chosen.map(|(_, rule, _)| rule).unwrap_or_default()
    }

    pub(super) fn why(&self) -> Option<&'static str> {
        self.chosen.and_then(|(.., why)| why)
    }
}

/// Steps 3 and 6: Koordinator's QoS annotation, else the kubelet cgroup parent, and the rule it
/// maps to ([`rule_for`]).
pub(super) fn qos_of(
    ann: &BTreeMap<String, String>,
    cgroups_path: Option<&str>,
    config: &Config,
    problems: &mut Vec<InvalidAnnotation>,
) -> Qos {
    let source = match first(ann, &[KOORD_QOS]) {
        Some((_, "SYSTEM")) => return Qos { system: true, chosen: None },
        Some((_, q)) => match QOS_CLASSES.into_iter().find(|c| c.as_str() == q) {
            Some(c) => Some(QosSource::Koord(c)),
            None => {
                problems.push(InvalidAnnotation::QosClass(truncate(q)));
                None
            }
        },
        None => cgroups_path.and_then(kube_qos_from_cgroup).map(QosSource::Kube),
    };
    Qos { system: false, chosen: source.map(|s| rule_for(s, config)) }
}
