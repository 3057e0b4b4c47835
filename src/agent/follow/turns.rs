//! The follower's loop ([`run`]): each turn looks at the node, scans for escapes, sweeps, keeps
//! `cpu.idle`, writes its page when each clock is due, then waits for process events and follows
//! them. The escape scan runs before the sweep, and a turn that heals makes the sweep and the page
//! due ([`Loop::turn`]), so that a page never shows a heal beside an audit from before it. Each
//! kind of error is logged once until it changes ([`super::report`]).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::pace::Pace;
use super::refresh::refresh_if_changed;
use super::view::Signature;
use super::{
    FALLBACK_SWEEP, FollowError, Follower, IDLE_EVERY, METRICS_EVERY, METRICS_FILE, Options, REOPEN_AFTER, Swept, heal,
    refresh, report, stats,
};
use crate::agent::endpoint::Board;
use crate::agent::node::NodeWatch;
use crate::error::Chain;
use crate::host::kernel::CoreSched;
use crate::host::proc_events::{Event, EventSource, ProcConnector};
use crate::host::procfs::ProcFs;

fn open_events(fallback: Duration) -> Option<ProcConnector> {
    match ProcConnector::open() {
        Ok(c) => Some(c),
        Err(e) => {
            log::warn!(
                "reconcile --follow: {}; exec'd processes get their cookie at the next sweep (every {} s)",
                Chain(&e),
                fallback.as_secs()
            );
            None
        }
    }
}

/// Why the follower is not ready before its first sweep.
const STARTING: &str = "starting: the first sweep has not run";

/// Ready once process events flow, or, without them, while the sweep that replaces them works.
/// While no cookie can be made on the node (`no_cookies`: the sched_ext guard holds them off, or
/// the kernel has no core scheduling or SMT is off), a sweep that fails is what the node makes of
/// it, not the follower failing its job: ready (docs/kubernetes.md).
fn readiness(events: bool, last_sweep_ok: bool, no_cookies: bool) -> Result<(), &'static str> {
    if events || last_sweep_ok || no_cookies {
        Ok(())
    } else {
        Err("no process events, and the last sweep failed (see the log)")
    }
}

/// Runs until SIGTERM or SIGINT. `sweep` is one full `reconcile` (it takes the lock itself) and
/// returns the processes it fixed; `heal` is one escape scan ([`heal::Healer::scan`]), run every
/// [`heal::HEAL_EVERY`]. With [`Options::listen`], an endpoint serves `render` (the
/// `metrics` command's families, taken every [`METRICS_EVERY`]) followed by the follower's counters.
pub fn run<K: CoreSched, E: std::fmt::Display>(
    opts: &Options,
    kernel: &K,
    proc: &ProcFs,
    mut sweep: impl FnMut() -> Result<Swept, E>,
    mut heal: impl FnMut() -> Result<heal::Healed, E>,
    mut render: impl FnMut() -> Result<String, E>,
) -> Result<(), FollowError> {
    crate::agent::signals::install().map_err(FollowError::Signals)?;
    let board = Board::new(STARTING);
    let endpoint = crate::agent::endpoint::serve_if_asked(opts.listen, &board);
    let mut l = Loop::start(opts, kernel, proc, board, endpoint.is_some());
    while !crate::agent::signals::stopping() {
        l.turn(&mut sweep, &mut heal, &mut render);
        if l.wait() {
            l.follow();
        }
    }
    l.stop();
    Ok(())
}

/// What [`run`] keeps between its turns: the follower, the node, the event source, when each
/// clock is next due, and the last error of each kind (each logged once, [`report`]).
struct Loop<'a, K: CoreSched> {
    opts: &'a Options,
    kernel: &'a K,
    proc: &'a ProcFs,
    f: Follower<'a, K>,
    board: std::sync::Arc<Board>,
    /// `--listen` serves a page: it is rendered at each metrics turn.
    serving: bool,
    node: NodeWatch,
    no_cookies: bool,
    source: Option<ProcConnector>,
    reopen_at: Instant,
    /// The cache files as last read (`None`: read them again).
    sig: Option<Signature>,
    db: PathBuf,
    metrics: PathBuf,
    last_sweep_ok: bool,
    next_sweep: Instant,
    next_metrics: Instant,
    next_idle: Instant,
    next_heal: Instant,
    errors: LastErrors,
    events: Vec<Event>,
    pace: Pace,
}

/// The last error of each kind [`run`] logs once ([`report`]).
#[derive(Default)]
struct LastErrors {
    refresh: String,
    sweep: String,
    idle: String,
    heal: String,
    render: String,
}

impl<'a, K: CoreSched> Loop<'a, K> {
    /// The loop's start: `kernel.sched_schedstats` when asked, the event source opened, every
    /// clock due at once (the metrics file is written first after the start's sweep, so that it
    /// says at once whether events flow).
    fn start(opts: &'a Options, kernel: &'a K, proc: &'a ProcFs, board: std::sync::Arc<Board>, serving: bool) -> Self {
        if opts.config.enable_schedstats {
            match crate::ops::forced_idle::enable_schedstats(proc) {
                Ok(true) => log::info!(
                    "reconcile --follow: set kernel.sched_schedstats = 1 (enable_schedstats): forced idle is counted"
                ),
                Ok(false) => {}
                Err(e) => {
                    log::warn!("reconcile --follow: failed to set kernel.sched_schedstats = 1 (enable_schedstats): {e}")
                }
            }
        }
        let now = Instant::now();
        let mut l = Self {
            opts,
            kernel,
            proc,
            f: Follower::new(kernel, proc),
            board,
            serving,
            node: NodeWatch::new(crate::host::system::sys_root()),
            no_cookies: false,
            source: None,
            reopen_at: now + REOPEN_AFTER,
            sig: None,
            db: opts.state_dir.join(crate::host::state_dir::DB_FILE),
            metrics: opts.state_dir.join(METRICS_FILE),
            last_sweep_ok: false,
            next_sweep: now,
            next_metrics: now,
            next_idle: now,
            next_heal: now,
            errors: LastErrors::default(),
            events: Vec::with_capacity(256),
            pace: Pace::new(now),
        };
        l.source = open_events(l.every(false));
        l.f.stats.events_enabled = l.source.is_some();
        if let Some(s) = &l.source {
            log::info!(
                "reconcile --follow: following process events (proc connector, {}); a full sweep every {} s",
                if s.filtered() { "fork and exec only" } else { "every event: the kernel does not filter" },
                l.every(true).as_secs()
            );
        }
        l
    }

    /// How often a full sweep runs, with process events `on` or not.
    fn every(&self, on: bool) -> Duration {
        if on { self.opts.sweep_every } else { self.opts.sweep_every.min(FALLBACK_SWEEP) }
    }

    /// One turn's clocks, in this order: the escape scan before the sweep, and the page last. A
    /// turn that heals a container makes the sweep and the page due ([`Loop::heal_if_due`]), so
    /// its page shows the heal beside an audit run after it, never beside one from before it.
    fn turn<E: std::fmt::Display>(
        &mut self,
        sweep: &mut impl FnMut() -> Result<Swept, E>,
        heal: &mut impl FnMut() -> Result<heal::Healed, E>,
        render: &mut impl FnMut() -> Result<String, E>,
    ) {
        self.look();
        self.heal_if_due(heal);
        self.sweep_if_due(sweep);
        self.idle_if_due();
        self.metrics_if_due(render);
    }

    /// The heartbeat, then the node when due: the ready note, and a sweep and an escape scan at
    /// once when a hold ended.
    fn look(&mut self) {
        self.board.beat();
        if let Some(look) = self.node.look_if_due(self.kernel) {
            self.board.set_note(look.cannot_isolate.as_deref());
            self.no_cookies = look.no_cookies;
            if look.resumed {
                // What the hold kept from its cookie: the sweep and the escape scan see to it now.
                self.next_sweep = Instant::now();
                self.next_heal = Instant::now();
            }
            if self.f.stats.sweeps > 0 {
                self.board.set_ready(readiness(self.f.stats.events_enabled, self.last_sweep_ok, self.no_cookies));
            }
        }
    }

    /// The full sweep (and the audit after it), when due.
    fn sweep_if_due<E: std::fmt::Display>(&mut self, sweep: &mut impl FnMut() -> Result<Swept, E>) {
        if Instant::now() < self.next_sweep {
            return;
        }
        self.f.stats.sweeps += 1;
        match sweep() {
            Ok(s) => {
                self.f.stats.fixed_sweep += s.fixed as u64;
                self.f.stats.audit_violations = s.violations.map(|v| v as u64);
                self.errors.sweep.clear();
                self.last_sweep_ok = true;
            }
            Err(e) => {
                self.last_sweep_ok = false;
                self.f.stats.sweep_failures += 1;
                self.f.stats.audit_violations = None;
                report(&mut self.errors.sweep, format!("reconcile --follow: sweep: {e:#}"));
            }
        }
        self.sig = None; // refresh the cookies too
        self.next_sweep = Instant::now() + self.every(self.source.is_some());
        self.board.set_ready(readiness(self.f.stats.events_enabled, self.last_sweep_ok, self.no_cookies));
    }

    /// The escape scan and its healing, when due.
    fn heal_if_due<E: std::fmt::Display>(&mut self, heal: &mut impl FnMut() -> Result<heal::Healed, E>) {
        if Instant::now() < self.next_heal {
            return;
        }
        self.f.stats.escape_scans += 1;
        match heal() {
            Ok(h) => {
                self.f.stats.escaped = h.escaped;
                self.f.stats.healed += h.healed as u64;
                self.f.stats.heal_failures += h.failed as u64;
                self.errors.heal.clear();
                if h.healed > 0 {
                    self.sig = None; // the healed containers are members now
                    // The audit's gauge counted them: audit again now rather than in a minute,
                    // and show the heal and that audit on the page in this turn.
                    self.next_sweep = Instant::now();
                    self.next_metrics = Instant::now();
                }
            }
            Err(e) => report(&mut self.errors.heal, format!("reconcile --follow: escape scan: {e:#}")),
        }
        self.next_heal = Instant::now() + heal::HEAL_EVERY;
    }

    /// `cpu.idle` kept at 1, and the view's inits looked at, when due.
    fn idle_if_due(&mut self) {
        if Instant::now() < self.next_idle {
            return;
        }
        self.f.keep_idle(&self.opts.cgroup_root);
        if !self.f.view.inits_alive(self.proc) {
            self.sig = None; // the refresh removes the member (exit events are not asked for)
        }
        self.next_idle = Instant::now() + IDLE_EVERY;
    }

    /// The groups' forced idle, `follow.prom` and the endpoint's page, when due.
    fn metrics_if_due<E: std::fmt::Display>(&mut self, render: &mut impl FnMut() -> Result<String, E>) {
        if Instant::now() < self.next_metrics {
            return;
        }
        refresh::update_forced_idle(&self.f, self.opts, &mut self.errors.idle);
        self.f.stats.cpu_seconds = stats::own_cpu_seconds(self.proc);
        self.f.stats.sched_ext_refusals = crate::host::kernel::guard::refusals();
        stats::write_metrics(&self.metrics, &self.f.stats);
        if self.serving {
            let page = match render() {
                Ok(page) => {
                    self.errors.render.clear();
                    page
                }
                Err(e) => {
                    report(&mut self.errors.render, format!("reconcile --follow: failed to render /metrics: {e:#}"));
                    String::new()
                }
            };
            self.board.set_metrics(page + &self.f.stats.render());
        }
        self.next_metrics = Instant::now() + METRICS_EVERY;
    }

    /// Waits for events until the next clock is due (at most 500 ms), or sleeps without an event
    /// source and tries to reopen it. `false` when the source failed now: no events to follow.
    fn wait(&mut self) -> bool {
        let wait = self
            .next_sweep
            .min(self.next_metrics)
            .min(self.next_idle)
            .min(self.next_heal)
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(500));
        match self.source.as_mut() {
            Some(s) => {
                self.events.clear();
                if let Err(e) = s.wait(wait, &mut self.events) {
                    log::warn!(
                        "reconcile --follow: {}; sweeping every {} s until it reopens",
                        Chain(&e),
                        FALLBACK_SWEEP.as_secs()
                    );
                    self.source = None;
                    self.f.stats.events_enabled = false;
                    self.board.set_ready(readiness(false, self.last_sweep_ok, self.no_cookies));
                    self.reopen_at = Instant::now() + REOPEN_AFTER;
                    self.next_sweep = self.next_sweep.min(Instant::now() + FALLBACK_SWEEP);
                    return false;
                }
            }
            None => {
                crate::agent::signals::sleep_unless_stopped(wait);
                if Instant::now() >= self.reopen_at {
                    self.reopen_at = Instant::now() + REOPEN_AFTER;
                    if let Ok(c) = ProcConnector::open() {
                        log::info!("reconcile --follow: following process events again");
                        self.source = Some(c);
                        self.f.stats.events_enabled = true;
                        self.board.set_ready(readiness(true, self.last_sweep_ok, self.no_cookies));
                        self.next_sweep = Instant::now();
                    }
                }
            }
        }
        true
    }

    /// A cache written since the last look (a container just created) is read before the events
    /// that may be its processes; then the events, paced.
    fn follow(&mut self) {
        refresh_if_changed(&mut self.f, self.opts, &self.db, &mut self.sig, &mut self.errors.refresh);
        let batch = self.events.len();
        for ev in self.events.drain(..) {
            if ev == Event::Lost && self.next_sweep > Instant::now() {
                log::warn!("reconcile --follow: the kernel dropped process events; sweeping now");
                self.next_sweep = Instant::now();
            }
            self.f.handle(ev);
        }
        self.pace.note(batch, Instant::now());
        if batch > 0 && !self.pace.gather().is_zero() {
            std::thread::sleep(self.pace.gather());
        }
    }

    /// The last `follow.prom` and one line.
    fn stop(&mut self) {
        self.f.stats.cpu_seconds = stats::own_cpu_seconds(self.proc);
        self.f.stats.sched_ext_refusals = crate::host::kernel::guard::refusals();
        stats::write_metrics(&self.metrics, &self.f.stats);
        log::info!(
            "reconcile --follow stopping on a signal: {} events, {} processes fixed on events, {} by sweeps",
            self.f.stats.forks + self.f.stats.execs,
            self.f.stats.fixed_event,
            self.f.stats.fixed_sweep
        );
    }
}

#[cfg(test)]
#[path = "turns_tests.rs"]
mod tests;
