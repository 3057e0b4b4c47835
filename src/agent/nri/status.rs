//! What the plugin shows on its endpoint ([`crate::agent::endpoint`]): ready once a runtime has
//! configured it, and a few counters as Prometheus text. Kept whether or not an endpoint serves
//! it (the cost is a lock and a short string per change).

use std::sync::{Arc, Mutex, PoisonError};

use crate::agent::endpoint::Board;
use crate::ops::metrics::{family, sample};

/// Why the plugin is not ready before its first configuration.
pub const STARTING: &str = "not connected to the runtime's NRI socket yet";

/// The plugin's status, published to a [`Board`].
#[derive(Debug)]
pub struct Status {
    board: Arc<Board>,
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    ready: bool,
    configurations: u64,
    connection_ends: u64,
    adjusted: u64,
    started_caught_up: u64,
    runtime: Option<(String, String)>,
}

impl Status {
    /// A status publishing to `board`.
    pub fn new(board: Arc<Board>) -> Self {
        let s = Self { board, counts: Mutex::new(Counts::default()) };
        s.publish(&Counts::default());
        s
    }

    /// The loop is alive.
    pub fn beat(&self) {
        self.board.beat();
    }

    fn change(&self, f: impl FnOnce(&mut Counts)) {
        let mut c = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut c);
        self.publish(&c);
    }

    /// A runtime configured the plugin: ready.
    pub fn configured(&self, runtime: &str, version: &str) {
        self.change(|c| {
            c.ready = true;
            c.configurations += 1;
            c.runtime = Some((runtime.to_string(), version.to_string()));
        });
        self.board.set_ready(Ok(()));
    }

    /// Not ready: `why`.
    pub fn not_ready(&self, why: &str) {
        self.change(|c| c.ready = false);
        self.board.set_ready(Err(why));
    }

    /// A connection that had been configured ended.
    pub fn ended(&self, why: &str) {
        self.change(|c| {
            c.ready = false;
            c.connection_ends += 1;
        });
        self.board.set_ready(Err(why));
    }

    /// The hook was injected into a container.
    pub fn adjusted(&self) {
        self.change(|c| c.adjusted += 1);
    }

    /// A container created without the hook was given its cookie at StartContainer.
    pub fn caught_up_at_start(&self) {
        self.change(|c| c.started_caught_up += 1);
    }

    fn publish(&self, c: &Counts) {
        let mut out = String::new();
        let p = "oci_coresched_hook_nri_";
        family(&mut out, &format!("{p}ready"), "gauge", "1 while a runtime has the plugin configured and connected.");
        sample(&mut out, &format!("{p}ready"), &[], if c.ready { 1.0 } else { 0.0 });
        if let Some((name, version)) = &c.runtime {
            family(&mut out, &format!("{p}runtime_info"), "gauge", "The runtime that configured the plugin last.");
            sample(&mut out, &format!("{p}runtime_info"), &[("runtime", name), ("version", version)], 1.0);
        }
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            family(out, &format!("{p}{name}"), "counter", help);
            sample(out, &format!("{p}{name}"), &[], v as f64);
        };
        counter(
            &mut out,
            "configurations_total",
            "Times a runtime configured the plugin (each (re)connection).",
            c.configurations,
        );
        counter(
            &mut out,
            "connection_ends_total",
            "Configured connections that ended (a runtime restart, Shutdown, a broken frame).",
            c.connection_ends,
        );
        counter(
            &mut out,
            "containers_adjusted_total",
            "Containers the hook was injected into at CreateContainer.",
            c.adjusted,
        );
        counter(
            &mut out,
            "start_catch_ups_total",
            "Containers created without the hook, given their cookie at StartContainer.",
            c.started_caught_up,
        );
        self.board.set_metrics(out);
    }
}
