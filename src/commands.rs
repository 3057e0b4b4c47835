//! The operator commands behind the CLI (everything but `hook`, `explain` and `nri`): each opens
//! the cache of the [`System`] it is given under the lock, calls its `ops` module and prints text
//! or JSON.
//!
//! The sessions: `read_session` for `inspect`, `list` and `metrics` (nothing created, the recorded
//! stops applied); `write_existing`, a `Session::write` on the cache as it is, for `gc` and
//! `reconcile`; `rebuild` creates the state dir and the cache, and refuses a stand-in.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

use crate::config::Config;
use crate::host::runtimes::RuntimeRoot;
use crate::host::system::System;
use crate::ops;
use crate::session::{Create, Damage, Existing, Refill, Session};
use crate::store::{Store, StoreError, Txn};

fn print_out(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
}

fn json<T: serde::Serialize>(v: &T) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(v)? + "\n")
}

/// The cache for a command that only reads it: `None` when there is none yet (nothing is
/// created), the recorded stops applied first so that no container whose poststop ran shows.
fn read_session(sys: &System, config: &Config) -> anyhow::Result<Option<Session>> {
    let Some(session) =
        Session::open(sys.state_dir.as_path(), config.lock_timeout(), Existing, &Refill::of(sys, config))?
    else {
        return Ok(None);
    };
    session.apply_stops(&sys.proc)?;
    Ok(Some(session))
}

/// The groups' forced idle, updated from the members' cgroups first ([`ops::forced_idle::update`]);
/// without a cache, only the node's. An update that fails is logged and the cache's totals shown.
fn forced_idle(
    sys: &System,
    config: &Config,
    session: Option<&mut Session>,
) -> anyhow::Result<ops::forced_idle::ForcedIdle> {
    let Some(session) = session else {
        return Ok(ops::forced_idle::totals(&Store::in_memory()?, &sys.proc, &sys.cgroup_root)?);
    };
    match session.write(&Refill::of(sys, config), 1, |s| ops::forced_idle::update(s, &sys.proc, &sys.cgroup_root)) {
        Ok(f) => Ok(f),
        Err(e) => {
            log::warn!("failed to read the forced idle of the members' cgroups: {}", crate::error::Chain(&e));
            Ok(ops::forced_idle::totals(session.store(), &sys.proc, &sys.cgroup_root)?)
        }
    }
}

/// `inspect PID`.
pub fn inspect(sys: &System, config: &Config, pid: i32, as_json: bool) -> anyhow::Result<()> {
    let mut opened = read_session(sys, config)?;
    let idle = forced_idle(sys, config, opened.as_mut())?;
    let report = ops::inspect::inspect(pid, &sys.kernel, &sys.proc, opened.as_ref().map(Session::store), &idle)?;
    print_out(&if as_json { json(&report)? } else { ops::inspect::render(&report) });
    Ok(())
}

/// What `audit` found: its violations, and whether the cache could be read.
pub struct Audited {
    /// Threads off their cookie.
    pub violations: usize,
    /// The cache could not be opened (the report says why).
    pub cache_unusable: bool,
}

/// `audit`: prints the report. A cache that cannot be opened (the lock held past the timeout, a
/// state dir or file that is unusable) is said, and the rules that need no cache still run.
pub fn audit(sys: &System, config: &Config, as_json: bool) -> anyhow::Result<Audited> {
    // Read-only: the cache is read under the lock, no recorded stop is applied.
    let (session, cache_error) =
        match Session::open(sys.state_dir.as_path(), config.lock_timeout(), Existing, &Refill::of(sys, config)) {
            Ok(s) => (s, None),
            Err(e) => (None, Some(crate::error::Chain(&e).to_string())),
        };
    let mut report =
        ops::audit::audit(session.as_ref().map(Session::store), &sys.kernel, &sys.proc, &sys.runtime_roots, config)
            .context("failed to audit the node")?;
    report.cache_error = cache_error;
    print_out(&if as_json { json(&report)? } else { report.render() });
    // An escaped container is a violation even when none of its threads could be read.
    let violations = report.violations.len().max(report.escaped.len());
    Ok(Audited { violations, cache_unusable: report.cache_error.is_some() })
}

/// `list`: first, when the kernel cannot isolate, one line saying why (text only: the JSON is an
/// array, whose shape scripts rely on).
pub fn list(sys: &System, config: &Config, as_json: bool) -> anyhow::Result<()> {
    if !as_json {
        let probe = crate::host::kernel::CoreSched::probe_kernel(&sys.kernel);
        if let Some(line) = ops::doctor::cannot_isolate(&sys.sys_root, &probe, config.sched_ext_guard) {
            print_out(&format!("{line}\n"));
        }
    }
    let mut session = read_session(sys, config)?;
    let idle = forced_idle(sys, config, session.as_mut())?;
    let groups = match &session {
        Some(session) => ops::list::list(session.store(), &sys.kernel, &sys.proc, &idle)?,
        None => Vec::new(),
    };
    print_out(&if as_json { json(&groups)? } else { ops::list::render(&groups, idle.advice().as_deref()) });
    Ok(())
}

/// `doctor` (`short`: `status`): prints the report; returns its exit status (0 or 1).
pub fn doctor<K: crate::host::kernel::CoreSched>(
    node: &ops::doctor::Node<'_, K>,
    short: bool,
    as_json: bool,
) -> anyhow::Result<u8> {
    let report = ops::doctor::examine(node)?;
    print_out(&if as_json { json(&report)? } else { ops::doctor::render(&report, short) });
    Ok(report.exit_code)
}

/// Runs `f` on the cache under the lock in one transaction, with the recorded stops applied
/// first in the same transaction ([`Session::write`], which also moves a damaged file aside and
/// runs `f` once more): `None` when there is no cache yet (nothing is created).
fn write_existing<T, E>(
    sys: &System,
    config: &Config,
    f: impl Fn(&Txn<'_>) -> Result<T, E>,
) -> anyhow::Result<Option<T>>
where
    E: From<StoreError> + Damage + std::error::Error + Send + Sync + 'static,
{
    let refill = Refill::of(sys, config);
    match Session::open(sys.state_dir.as_path(), config.lock_timeout(), Existing, &refill)? {
        Some(mut session) => Ok(Some(session.write(&refill, 1, f)?)),
        None => Ok(None),
    }
}

/// `gc`.
pub fn gc(sys: &System, config: &Config, as_json: bool) -> anyhow::Result<()> {
    let report = write_existing(sys, config, |store| ops::gc::gc(store, &sys.proc))?.unwrap_or_default();
    print_out(&if as_json { json(&report)? } else { report.render() });
    Ok(())
}

/// The cache's and the kernel's families, forced idle included, and the fail-open ledger's
/// counts: what `metrics` prints before
/// the follower's counters, and what the follower's endpoint serves before its own. The groups'
/// forced idle is brought up to date first unless the caller just did (`idle_updated`: the
/// follower updates it in its loop before it asks for the page).
fn exposition(sys: &System, config: &Config, idle_updated: bool) -> anyhow::Result<String> {
    // The lock held past the timeout (what makes hooks fail open) still leaves the kernel's
    // families and the fail-open counts to show; an unusable state dir is an error.
    let mut session = match read_session(sys, config) {
        Ok(s) => s,
        Err(e) if lock_timed_out(&e) => {
            log::warn!("{e:#}; the cache's families are left empty");
            None
        }
        Err(e) => return Err(e),
    };
    let idle = match (&session, idle_updated) {
        (Some(session), true) => ops::forced_idle::totals(session.store(), &sys.proc, &sys.cgroup_root)?,
        _ => forced_idle(sys, config, session.as_mut())?,
    };
    let mut text = match &session {
        Some(session) => ops::metrics::render(session.store(), &sys.kernel, &sys.proc)?,
        // No cache yet: the same exposition over an empty in-memory cache.
        None => ops::metrics::render(&Store::in_memory()?, &sys.kernel, &sys.proc)?,
    };
    text.push_str(&ops::forced_idle::render(&idle));
    text.push_str(&ops::metrics::render_node(&sys.kernel, &sys.sys_root, config.sched_ext_guard));
    let ledger = crate::host::state_dir::fail_open::counts(&sys.state_dir)?;
    text.push_str(&ops::metrics::render_fail_open(&ledger));
    Ok(text)
}

/// Whether `e` is the state lock held past the timeout.
fn lock_timed_out(e: &anyhow::Error) -> bool {
    use crate::host::state_dir::DirError;
    e.chain().any(|c| {
        matches!(c.downcast_ref::<DirError>(), Some(DirError::LockTimeout { .. }))
            || matches!(
                c.downcast_ref::<crate::session::SessionError>(),
                Some(crate::session::SessionError::Dir(DirError::LockTimeout { .. }))
            )
    })
}

/// `metrics [--output FILE]`.
pub fn metrics(sys: &System, config: &Config, output: Option<&PathBuf>) -> anyhow::Result<()> {
    let mut text = exposition(sys, config, false)?;
    // The follower's counters (`reconcile --follow` rewrites them every 10 s).
    let follow = sys.state_dir.join(crate::agent::follow::METRICS_FILE);
    match crate::agent::follow::stats::read_page(&follow) {
        Ok(Some(f)) => text.push_str(&f),
        Ok(None) => {}
        Err(e) => log::warn!(
            "{}; left out of the metrics (the running follower rewrites it every {} s)",
            crate::error::Chain(&e),
            crate::agent::follow::METRICS_EVERY.as_secs()
        ),
    }
    match output {
        Some(path) => crate::textfile::write(path, &text)
            .with_context(|| format!("failed to write metrics to {}", path.display()))?,
        None => print_out(&text),
    }
    Ok(())
}

/// `reconcile [--dry-run] [--interval SECONDS]`.
pub fn reconcile(
    sys: &System,
    config: &Config,
    dry_run: bool,
    interval: Option<u64>,
    as_json: bool,
) -> anyhow::Result<()> {
    loop {
        reconcile_once(sys, config, dry_run, as_json)?;
        match interval {
            Some(secs) => std::thread::sleep(std::time::Duration::from_secs(secs)),
            None => return Ok(()),
        }
    }
}

/// The follow mode's default sweep interval, seconds.
pub const FOLLOW_SWEEP_SECS: u64 = 60;

/// `reconcile --follow [--interval SECONDS] [--listen ADDRESS:PORT]`: the follower, its sweep a
/// quiet `reconcile` and an `audit`, its escape scan healing what failed open (deciding with
/// `config_file`, read again when it changes), its endpoint's page the `metrics` families.
pub fn follow(
    sys: &System,
    config: &Config,
    config_file: (PathBuf, bool),
    interval: Option<u64>,
    listen: Option<std::net::SocketAddr>,
) -> anyhow::Result<()> {
    let opts = crate::agent::follow::Options {
        state_dir: sys.state_dir.clone(),
        lock_timeout: config.lock_timeout(),
        sweep_every: std::time::Duration::from_secs(interval.unwrap_or(FOLLOW_SWEEP_SECS)),
        cgroup_root: sys.cgroup_root.clone(),
        runtime_roots: sys.runtime_roots.clone(),
        config: config.clone(),
        listen,
    };
    let mut last_violations = 0;
    let sweep = || -> anyhow::Result<crate::agent::follow::Swept> {
        let swept = write_existing(sys, config, |store| {
            let report = ops::reconcile::reconcile(store, &sys.kernel, &sys.proc, &sys.cgroup_root, false)?;
            // After the fixes: what still is not as it should be.
            let audit = ops::audit::audit(Some(store), &sys.kernel, &sys.proc, &sys.runtime_roots, config)?;
            Ok::<_, ops::OpsError>((report, audit))
        })?;
        let (report, audit) = match swept {
            Some(done) => done,
            // No cache yet: nothing to reconcile, and the audit's rules that need no cache still run.
            None => (
                ops::reconcile::ReconcileReport { dry_run: false, converged: Vec::new(), members: Vec::new() },
                ops::audit::audit(None, &sys.kernel, &sys.proc, &sys.runtime_roots, config)?,
            ),
        };
        for e in report.members.iter().flat_map(|m| &m.errors) {
            log::warn!("reconcile --follow: sweep: {e}");
        }
        if report.fixed() > 0 {
            log::info!("reconcile --follow: the sweep gave {} processes their group's cookie", report.fixed());
        }
        let violations = audit.violations.len();
        if violations != last_violations {
            match audit.violations.first() {
                Some(v) => log::warn!(
                    "reconcile --follow: the audit after the sweep finds {violations} threads off their cookie, e.g. \
                     pid {} tid {} ({}): want {}, has {} (run `oci-coresched-hook audit`)",
                    v.pid,
                    v.tid,
                    v.comm,
                    v.want,
                    v.have
                ),
                None => log::info!("reconcile --follow: the audit after the sweep finds no thread off its cookie"),
            }
            last_violations = violations;
        }
        Ok(crate::agent::follow::Swept { fixed: report.fixed(), violations: Some(violations) })
    };
    let mut healer = crate::agent::follow::heal::Healer::new(config_file.0, config_file.1, config.clone());
    let heal = || Ok::<_, anyhow::Error>(healer.scan(sys)?);
    crate::agent::follow::run(&opts, &sys.kernel, &sys.proc, sweep, heal, || exposition(sys, config, true))?;
    Ok(())
}

fn reconcile_once(sys: &System, config: &Config, dry_run: bool, as_json: bool) -> anyhow::Result<()> {
    let reconciled = write_existing(sys, config, |store| {
        ops::reconcile::reconcile(store, &sys.kernel, &sys.proc, &sys.cgroup_root, dry_run)
    })?;
    let Some(report) = reconciled else {
        if as_json {
            print_out(&json(&ops::reconcile::ReconcileReport { dry_run, converged: Vec::new(), members: Vec::new() })?);
        } else {
            print_out("reconcile: no cache yet, nothing to do\n");
        }
        return Ok(());
    };
    if report.fixed() > 0 && !dry_run {
        log::info!("reconcile gave {} processes their group's cookie", report.fixed());
    }
    print_out(&if as_json { json(&report)? } else { report.render() });
    if report.errors() > 0 {
        anyhow::bail!("failed to reconcile {} processes (see above)", report.errors());
    }
    Ok(())
}

/// `rebuild [--runc-root DIR]... [--crun-root DIR]...`.
pub fn rebuild(sys: &System, config: &Config, runc: &[PathBuf], crun: &[PathBuf], as_json: bool) -> anyhow::Result<()> {
    let roots: Vec<RuntimeRoot> = if runc.is_empty() && crun.is_empty() {
        RuntimeRoot::defaults()
    } else {
        runc.iter().map(RuntimeRoot::runc).chain(crun.iter().map(RuntimeRoot::crun)).collect()
    };
    let mut session = Session::open(
        crate::host::state_dir::StateDir::open(&sys.state_dir)?,
        config.lock_timeout(),
        Create,
        &Refill::of(sys, config),
    )?;
    if let Some(why) = session.stand_in() {
        anyhow::bail!(
            "failed to rebuild the cache {}: {why}; it was left in place (run the newer binary's rebuild)",
            session.dir().db_path().display()
        );
    }
    let report = session.write(&Refill::of(sys, config), 1, |store| {
        crate::session::rebuild::rebuild(
            store,
            &sys.kernel,
            &sys.proc,
            &roots,
            config,
            crate::session::rebuild::Fill::All,
        )
    })?;
    print_out(&if as_json { json(&report)? } else { report.render() });
    Ok(())
}
