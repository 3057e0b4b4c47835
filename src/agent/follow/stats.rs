//! The follower's counters and their Prometheus text (written to `follow.prom` in the state dir,
//! which the `metrics` command appends to its own output, through [`read_page`]: the one reader
//! of that file).
//!
//! A page with a line this build's follower does not write is left out of `metrics`, which says so
//! in one line.

use std::path::{Path, PathBuf};

use crate::exposition::{family, sample};

/// The prefix of every family the follower writes.
pub const PREFIX: &str = "oci_coresched_hook_follow_";

/// Why `follow.prom` was left out.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// It could not be read.
    #[error("failed to read the follower's page {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// It holds a line the follower of this build does not write (a follower of another
    /// version, another program's file).
    #[error("the follower's page {path} is not in this build's format: line {line} is {text:?}")]
    Foreign {
        /// The file.
        path: PathBuf,
        /// The line's number, from 1.
        line: usize,
        /// The line (at most 80 characters of it).
        text: String,
    },
}

/// Upper bounds of the window histogram, seconds.
pub const WINDOW_BUCKETS: [f64; 11] = [0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.1, 1.0, 10.0];

/// What the follower counted since it started.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// 1 while process events arrive, 0 in the sweep-only fallback.
    pub events_enabled: bool,
    /// Fork events seen.
    pub forks: u64,
    /// Exec events seen.
    pub execs: u64,
    /// Times the kernel dropped events (ENOBUFS); each one is followed by a sweep.
    pub lost: u64,
    /// Processes given their group's cookie on an event.
    pub fixed_event: u64,
    /// Processes given their group's cookie by a sweep.
    pub fixed_sweep: u64,
    /// Events for processes of member cgroups that already had the cookie.
    pub already: u64,
    /// Processes that could not be fixed (the error is logged).
    pub failures: u64,
    /// Sweeps run.
    pub sweeps: u64,
    /// Sweeps that failed.
    pub sweep_failures: u64,
    /// Times the view was rebuilt from the cache.
    pub refreshes: u64,
    /// Members in the view now.
    pub members: usize,
    /// Window histogram: counts per bucket of [`WINDOW_BUCKETS`] (not cumulative), and above.
    pub window_counts: [u64; WINDOW_BUCKETS.len() + 1],
    /// Sum of windows, seconds.
    pub window_sum: f64,
    /// The longest window, seconds.
    pub window_max: f64,
    /// The follower's own CPU time (user + system), seconds.
    pub cpu_seconds: f64,
    /// Times a `sched_idle` member's `cpu.idle` was found reset and set to 1 again.
    pub idle_restored: u64,
    /// Sweeps of the groups whose cookie or members changed in the cache.
    pub group_sweeps: u64,
    /// Members removed because their init exited.
    pub members_removed: u64,
    /// Fork events of a storming parent whose child was not read ([`super::storm`]).
    pub storm_skipped: u64,
    /// Violations the audit after the last sweep found (`None` until one ran, or when the last
    /// one could not run).
    pub audit_violations: Option<u64>,
    /// Escaped containers found by the last escape scan and not healed ([`super::heal`]).
    pub escaped: usize,
    /// Escape scans run.
    pub escape_scans: u64,
    /// Escaped containers given their group's cookie.
    pub healed: u64,
    /// Heals that failed.
    pub heal_failures: u64,
    /// Calls this process's sched_ext guard refused ([`crate::host::kernel::guard::refusals`]).
    pub sched_ext_refusals: u64,
}

/// The families of the follower's page without the [`PREFIX`]: the audit's, the escapes' and the
/// sched_ext guard's refusals (a family the NRI plugin's page has too).
pub const OTHER_FAMILIES: [&str; 4] = [
    "oci_coresched_hook_audit_violations",
    "oci_coresched_hook_audit_up",
    "oci_coresched_hook_escaped_containers",
    "oci_coresched_hook_sched_ext_refusals_total",
];

/// A counter family of one sample under the follower's prefix.
fn counter(out: &mut String, name: &str, help: &str, labels: &[(&str, &str)], v: u64) {
    family(out, &format!("{PREFIX}{name}"), "counter", help);
    sample(out, &format!("{PREFIX}{name}"), labels, v as f64);
}

impl Stats {
    /// Records the window of one process fixed on an event: from the event to the GET that
    /// showed the cookie.
    pub fn window(&mut self, seconds: f64) {
        let i = WINDOW_BUCKETS.iter().position(|b| seconds <= *b).unwrap_or(WINDOW_BUCKETS.len());
        self.window_counts[i] += 1;
        self.window_sum += seconds;
        self.window_max = self.window_max.max(seconds);
    }

    /// Prometheus text, exposition format 0.0.4.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_events(&mut out);
        self.render_repairs(&mut out);
        self.render_audit(&mut out);
        self.render_window(&mut out);
        out.push_str(&crate::ops::metrics::render_refusals(self.sched_ext_refusals));
        out
    }

    /// The event source: whether events arrive, how many of each kind, how many were lost.
    fn render_events(&self, out: &mut String) {
        let p = PREFIX;
        family(
            out,
            &format!("{p}events_enabled"),
            "gauge",
            "1 while process events arrive, 0 when only the sweep runs.",
        );
        sample(out, &format!("{p}events_enabled"), &[], if self.events_enabled { 1.0 } else { 0.0 });
        family(out, &format!("{p}events_total"), "counter", "Process events seen, by kind.");
        sample(out, &format!("{p}events_total"), &[("kind", "fork")], self.forks as f64);
        sample(out, &format!("{p}events_total"), &[("kind", "exec")], self.execs as f64);
        counter(
            out,
            "events_lost_total",
            "Times the kernel dropped process events (socket overflow); each is followed by a sweep.",
            &[],
            self.lost,
        );
    }

    /// What the follower fixed, skipped and swept.
    fn render_repairs(&self, out: &mut String) {
        let p = PREFIX;
        family(
            out,
            &format!("{p}processes_fixed_total"),
            "counter",
            "Processes given their group's cookie, by what found them.",
        );
        sample(out, &format!("{p}processes_fixed_total"), &[("via", "event")], self.fixed_event as f64);
        sample(out, &format!("{p}processes_fixed_total"), &[("via", "sweep")], self.fixed_sweep as f64);
        counter(
            out,
            "processes_already_total",
            "Events for processes of member cgroups that already had their cookie.",
            &[],
            self.already,
        );
        counter(out, "fix_failures_total", "Processes that could not be given their cookie.", &[], self.failures);
        counter(out, "sweeps_total", "Full reconcile sweeps run.", &[], self.sweeps);
        counter(
            out,
            "idle_restored_total",
            "Times a sched_idle member's cpu.idle was found reset (by its runtime or systemd) and set to 1 again.",
            &[],
            self.idle_restored,
        );
        counter(
            out,
            "storm_forks_skipped_total",
            "Forks of a parent storming outside every member cgroup whose child was not read (one in 16 is).",
            &[],
            self.storm_skipped,
        );
        counter(
            out,
            "group_sweeps_total",
            "Sweeps of the groups whose cookie or members changed in the cache, run when the view is rebuilt.",
            &[],
            self.group_sweeps,
        );
        counter(
            out,
            "members_removed_total",
            "Cached members removed because their init exited (dead, or its pid reused).",
            &[],
            self.members_removed,
        );
        counter(out, "sweep_failures_total", "Sweeps that failed.", &[], self.sweep_failures);
        counter(
            out,
            "view_refreshes_total",
            "Times the in-memory view was rebuilt from the cache.",
            &[],
            self.refreshes,
        );
    }

    /// The last audit and the escape scans.
    fn render_audit(&self, out: &mut String) {
        let [violations, up, escaped, _refusals] = OTHER_FAMILIES;
        family(
            out,
            violations,
            "gauge",
            "Threads off their cookie at the last sweep's audit (oci-coresched-hook audit); NaN when it could not run.",
        );
        sample(out, violations, &[], self.audit_violations.map_or(f64::NAN, |v| v as f64));
        family(out, up, "gauge", "1 when the last sweep's audit ran, 0 when it could not (or none ran yet).");
        sample(out, up, &[], if self.audit_violations.is_some() { 1.0 } else { 0.0 });
        family(
            out,
            escaped,
            "gauge",
            "Running containers whose hook failed open (cookie 0 where their policy gives one), not yet healed.",
        );
        sample(out, escaped, &[], self.escaped as f64);
        counter(out, "escape_scans_total", "Scans for escaped containers run.", &[], self.escape_scans);
        counter(
            out,
            "escapes_healed_total",
            "Escaped containers given their group's cookie by the follower.",
            &[],
            self.healed,
        );
        counter(out, "heal_failures_total", "Heals of escaped containers that failed.", &[], self.heal_failures);
    }

    /// The view's size, the event-to-cookie window and the follower's own CPU time.
    fn render_window(&self, out: &mut String) {
        let p = PREFIX;
        family(out, &format!("{p}members"), "gauge", "Live members with a cookie in the follower's view.");
        sample(out, &format!("{p}members"), &[], self.members as f64);
        let h = format!("{p}window_seconds");
        family(out, &h, "histogram", "From a process event to the GET that showed the process its group's cookie.");
        let mut cum = 0;
        for (b, c) in WINDOW_BUCKETS.iter().zip(self.window_counts) {
            cum += c;
            sample(out, &format!("{h}_bucket"), &[("le", &b.to_string())], cum as f64);
        }
        cum += self.window_counts[WINDOW_BUCKETS.len()];
        sample(out, &format!("{h}_bucket"), &[("le", "+Inf")], cum as f64);
        sample(out, &format!("{h}_sum"), &[], self.window_sum);
        sample(out, &format!("{h}_count"), &[], cum as f64);
        family(out, &format!("{p}window_max_seconds"), "gauge", "The longest window since the follower started.");
        sample(out, &format!("{p}window_max_seconds"), &[], self.window_max);
        family(out, &format!("{p}cpu_seconds_total"), "counter", "CPU time (user + system) the follower used.");
        sample(out, &format!("{p}cpu_seconds_total"), &[], self.cpu_seconds);
    }
}

/// The follower's own CPU time, seconds (`/proc/self/stat` utime + stime).
pub(super) fn own_cpu_seconds(proc: &crate::host::procfs::ProcFs) -> f64 {
    let hz = rustix::param::clock_ticks_per_second().max(1) as f64;
    proc.cpu_ticks(std::process::id() as crate::values::Pid).ok().flatten().map_or(0.0, |t| t as f64 / hz)
}

/// The follower's page at `path` as `metrics` appends it: `None` when there is none (no follower
/// ran since the state dir was made); an error when a line is not one the follower of this build
/// writes: a `# HELP` or `# TYPE` line of a family named [`PREFIX`]… or one of [`OTHER_FAMILIES`],
/// or a sample of one.
pub fn read_page(path: &Path) -> Result<Option<String>, PageError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(PageError::Io { path: path.to_path_buf(), source }),
    };
    let ours = |line: &str| {
        let name = line.strip_prefix("# HELP ").or_else(|| line.strip_prefix("# TYPE ")).unwrap_or(line);
        name.strip_prefix(PREFIX).is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_lowercase()))
            || OTHER_FAMILIES.iter().any(|f| name.strip_prefix(f).is_some_and(|rest| rest.starts_with([' ', '{'])))
    };
    match text.lines().position(|l| !ours(l)) {
        None if text.ends_with('\n') || text.is_empty() => Ok(Some(text)),
        None => Err(foreign(path, text.lines().count(), text.lines().last().unwrap_or_default())),
        Some(i) => Err(foreign(path, i + 1, text.lines().nth(i).unwrap_or_default())),
    }
}

fn foreign(path: &Path, line: usize, text: &str) -> PageError {
    PageError::Foreign { path: path.to_path_buf(), line, text: text.chars().take(80).collect() }
}

pub(super) fn write_metrics(path: &std::path::Path, stats: &Stats) {
    if let Err(e) = crate::textfile::write(path, &stats.render()) {
        log::debug!("reconcile --follow: failed to write {}: {e}", path.display());
    }
}

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
