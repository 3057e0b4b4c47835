//! `metrics`: the cache and the kernel as Prometheus text (exposition format 0.0.4, written with
//! [`crate::exposition`]), for node_exporter's textfile collector.
//!
//! Every family is named `oci_coresched_hook_…`, counters end in `_total` and units are in the
//! name (docs/metrics.md). The caller of [`render`] holds the state lock;
//! [`render_node`] (the node's families, which both agents' pages carry too) reads only sysfs and
//! the kernel.
//!
//! Without a cache, the `metrics` command renders over an in-memory one. [`render_refusals`] gives
//! the sched_ext guard's refusals, for the agents' pages.

use std::collections::BTreeMap;
use std::path::Path;

use crate::cookies::membership::{self, State};
use crate::exposition::{family, sample};
use crate::host::cpu::{self, Exposure, Smt};
use crate::host::kernel::{CookieHex, CoreSched};
use crate::host::procfs::ProcFs;
use crate::host::sched_ext::SchedExt;
use crate::store::{Store, StoreError};

/// Renders every metric. Members whose init died or whose pid was reused are left out (run `gc`);
/// a live member's cookie is read with GET, falling back to the cached one when GET fails.
pub fn render<K: CoreSched>(store: &Store, kernel: &K, proc: &ProcFs) -> Result<String, StoreError> {
    let mut out = String::new();
    let members = store.all_members()?;
    let groups = store.groups()?;

    let mut live_per_group: BTreeMap<String, u64> = groups.iter().map(|g| (g.key.clone(), 0)).collect();
    family(
        &mut out,
        "oci_coresched_hook_container_cookie",
        "gauge",
        "Core scheduling cookie of a container's init (the value loses precision above 2^53; the core_sched_cookie label is exact).",
    );
    for m in &members {
        let entry = live_per_group.entry(m.group.clone()).or_insert(0);
        let cookie = match membership::state(proc, kernel, m) {
            State::Alive(c) => c,
            State::CookieUnreadable(e) => {
                log::debug!("metrics: GET on pid {} failed ({e}); using the cached cookie", m.pid);
                m.cookie
            }
            State::Gone(_) => continue,
            State::Unreadable(e) => {
                log::warn!("metrics: skipping {} (pid {}): failed to read /proc: {e}", m.container_id, m.pid);
                continue;
            }
        };
        *entry += 1;
        let hex = CookieHex(cookie).to_string();
        let opt = |v: &Option<String>| v.clone().unwrap_or_default();
        let (pod_name, pod_ns, pod_uid, cname) =
            (opt(&m.labels.pod_name), opt(&m.labels.namespace), opt(&m.labels.pod_uid), opt(&m.labels.container_name));
        sample(
            &mut out,
            "oci_coresched_hook_container_cookie",
            &[
                ("pod_name", &pod_name),
                ("pod_namespace", &pod_ns),
                ("pod_uid", &pod_uid),
                ("container_name", &cname),
                ("container_id", &m.container_id),
                ("core_sched_group", &m.group),
                ("core_sched_cookie", &hex),
            ],
            cookie as f64,
        );
    }

    family(
        &mut out,
        "oci_coresched_hook_group_ensures_total",
        "counter",
        "Ensures of a core scheduling group by outcome since the cache was created.",
    );
    for g in &groups {
        sample(
            &mut out,
            "oci_coresched_hook_group_ensures_total",
            &[("core_sched_group", &g.key), ("status", "succeeded")],
            g.ok as f64,
        );
        sample(
            &mut out,
            "oci_coresched_hook_group_ensures_total",
            &[("core_sched_group", &g.key), ("status", "failed")],
            g.failed as f64,
        );
    }

    family(&mut out, "oci_coresched_hook_failures_total", "counter", "Hook failures by reason.");
    for (reason, count) in store.failures()? {
        sample(&mut out, "oci_coresched_hook_failures_total", &[("reason", &reason)], count as f64);
    }

    family(
        &mut out,
        "oci_coresched_hook_group_members",
        "gauge",
        "Cached members of a group whose init is still running.",
    );
    for (group, n) in &live_per_group {
        sample(&mut out, "oci_coresched_hook_group_members", &[("core_sched_group", group)], *n as f64);
    }
    Ok(out)
}

/// The node's families: what the kernel and the CPU let core scheduling do here, and this build.
/// Read from the kernel and sysfs (`sys_root`) at every call (a few small files); `guard` is
/// whether this process's kernel calls go through the sched_ext guard (the config's
/// `sched_ext_guard`). Every family is always present:
///
/// * `oci_coresched_hook_kernel_supported`: the kernel's own probe ([`CoreSched::probe_kernel`]),
///   beneath the guard: 1 when `PR_SCHED_CORE` works (`CONFIG_SCHED_CORE` and SMT on);
/// * `oci_coresched_hook_smt_active`: `smt/active` (no sample when it cannot be read);
/// * `oci_coresched_hook_sched_ext_enabled{scheduler}`: 1 while a sched_ext scheduler is loaded,
///   being loaded or unloaded, or the state cannot be told ([`SchedExt::blocks_cookies`]);
///   `scheduler` is `root/ops`, empty when none is attached or its name cannot be read;
/// * `oci_coresched_hook_sched_ext_guard`: 1 when `guard`;
/// * `oci_coresched_hook_cpu_vulnerable{vulnerability}`: one sample per file of
///   `vulnerabilities/`, 1 when the file reads `Vulnerable…` (or `Processor vulnerable`), or
///   when it is one core scheduling is meant for ([`cpu::CROSS_THREAD`]) and says the sibling
///   thread is still a way in (`SMT vulnerable`, `SMT Host state unknown`, `STIBP: disabled`);
///   else 0;
/// * `oci_coresched_hook_build_info{version,commit}`: 1.
pub fn render_node<K: CoreSched + ?Sized>(kernel: &K, sys_root: &Path, guard: bool) -> String {
    let mut out = String::new();
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    let name = "oci_coresched_hook_kernel_supported";
    family(
        &mut out,
        name,
        "gauge",
        "1 when the kernel can do core scheduling (CONFIG_SCHED_CORE and SMT on), else 0; the kernel's own answer, whatever the sched_ext guard holds off.",
    );
    let supported = match kernel.probe_kernel() {
        Ok(()) => true,
        Err(e) => {
            log::debug!("metrics: core scheduling probe failed: {e}");
            false
        }
    };
    sample(&mut out, name, &[], flag(supported));

    let name = "oci_coresched_hook_smt_active";
    family(&mut out, name, "gauge", "1 while some core has two online SMT siblings (smt/active), else 0.");
    if let Some(active) = Smt::read(sys_root).active {
        sample(&mut out, name, &[], flag(active));
    }

    let ext = SchedExt::read(sys_root);
    let name = "oci_coresched_hook_sched_ext_enabled";
    family(
        &mut out,
        name,
        "gauge",
        "1 while a sched_ext scheduler is loaded (or being loaded or unloaded, or the state cannot be told), else 0; scheduler is its name.",
    );
    let scheduler = if ext.blocks_cookies() { ext.ops.clone().unwrap_or_default() } else { String::new() };
    sample(&mut out, name, &[("scheduler", &scheduler)], flag(ext.blocks_cookies()));

    let name = "oci_coresched_hook_sched_ext_guard";
    family(
        &mut out,
        name,
        "gauge",
        "1 when the sched_ext guard holds every cookie off while a sched_ext scheduler is loaded (sched_ext_guard), 0 when the config turned it off.",
    );
    sample(&mut out, name, &[], flag(guard));

    let name = "oci_coresched_hook_cpu_vulnerable";
    family(
        &mut out,
        name,
        "gauge",
        "Per CPU vulnerability file: 1 when it reads Vulnerable, or when it is one core scheduling is meant for and the SMT sibling is still a way in; else 0.",
    );
    match cpu::vulnerabilities(sys_root) {
        Ok(Some(list)) => {
            for v in list {
                let vulnerable = v.exposure == Exposure::Vulnerable || (v.cross_thread && v.smt_exposed);
                sample(&mut out, name, &[("vulnerability", &v.name)], flag(vulnerable));
            }
        }
        Ok(None) => {}
        Err(e) => log::debug!("metrics: failed to read the CPU's vulnerabilities: {e}"),
    }

    let name = "oci_coresched_hook_build_info";
    family(&mut out, name, "gauge", "1, labelled with the version and the commit this binary was built from.");
    sample(&mut out, name, &[("version", env!("CARGO_PKG_VERSION")), ("commit", env!("OCH_COMMIT"))], 1.0);
    out
}

/// `oci_coresched_hook_sched_ext_refusals_total`: the calls this process's sched_ext guard
/// refused ([`crate::host::kernel::guard::refusals`]), for the long-running commands' pages.
pub fn render_refusals(refusals: u64) -> String {
    let mut out = String::new();
    let name = "oci_coresched_hook_sched_ext_refusals_total";
    family(
        &mut out,
        name,
        "counter",
        "Calls that would make or share a core scheduling cookie which the sched_ext guard refused in this process.",
    );
    sample(&mut out, name, &[], refusals as f64);
    out
}

/// `oci_coresched_hook_fail_open_total{reason}`: the fail-open ledger's counts
/// ([`crate::host::state_dir::fail_open`]), every reason present.
pub fn render_fail_open(counts: &BTreeMap<crate::error::FailureReason, u64>) -> String {
    let mut out = String::new();
    let name = "oci_coresched_hook_fail_open_total";
    family(
        &mut out,
        name,
        "counter",
        "Hook runs that failed open (the container ran without the cookie its policy asks for), by reason.",
    );
    for (reason, count) in counts {
        sample(&mut out, name, &[("reason", reason.as_str())], *count as f64);
    }
    out
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
pub(crate) mod tests;
