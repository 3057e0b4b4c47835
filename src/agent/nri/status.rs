//! What the plugin shows on its endpoint ([`crate::agent::endpoint`]): ready once a runtime has
//! configured it, and a few counters as Prometheus text. Kept whether or not an endpoint serves
//! it (the cost is a lock and a short string per change). Watching the node
//! ([`Status::watching`]), its loop's beat also looks at the node every
//! [`crate::agent::node::LOOK_EVERY`]: the node's families ([`crate::ops::metrics::render_node`])
//! and the guard's refusals join the page, and a ready `/readyz` names why the node cannot
//! isolate, if it cannot.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use crate::agent::endpoint::Board;
use crate::agent::node::NodeWatch;
use crate::exposition::{family, sample};
use crate::host::kernel::CoreSched;
use crate::host::system::Surroundings;

/// Why the plugin is not ready before its first configuration.
pub const STARTING: &str = "not connected to the runtime's NRI socket yet";

/// The plugin's status, published to a [`Board`].
#[derive(Debug)]
pub struct Status {
    board: Arc<Board>,
    counts: Mutex<Counts>,
    node: Mutex<Option<Node>>,
}

/// The node as the plugin watches it: the kernel as the catch-up sees it (behind the guard unless
/// the config turned it off), its sysfs tree.
struct Node {
    watch: NodeWatch,
    kernel: Box<dyn CoreSched>,
    sys_root: PathBuf,
    guard: bool,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("watch", &self.watch).field("guard", &self.guard).finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct Counts {
    ready: bool,
    configurations: u64,
    connection_ends: u64,
    adjusted: u64,
    started_caught_up: u64,
    runtime: Option<(String, String)>,
    /// The node's families and the guard's refusals, as the last look rendered them.
    node: String,
}

impl Status {
    /// A status publishing to `board`.
    pub fn new(board: Arc<Board>) -> Self {
        let s = Self { board, counts: Mutex::new(Counts::default()), node: Mutex::new(None) };
        s.publish(&Counts::default());
        s
    }

    /// A status publishing to `board` that also watches the node of `surroundings` (its sysfs
    /// tree, the guard as the config sets it), looked at once now.
    pub fn watching(board: Arc<Board>, surroundings: &Surroundings) -> Self {
        let s = Self::new(board);
        let guard = surroundings.sched_ext_guard;
        let kernel = crate::host::kernel::guarded(guard.then(|| surroundings.sys_root.clone()));
        let sys_root = surroundings.sys_root.clone();
        *s.node.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(Node { watch: NodeWatch::new(sys_root.clone()), kernel, sys_root, guard });
        s.beat();
        s
    }

    /// The loop is alive; the node is looked at when a look is due.
    pub fn beat(&self) {
        self.board.beat();
        let mut node = self.node.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(n) = node.as_mut() else { return };
        let Some(look) = n.watch.look_if_due(&*n.kernel) else { return };
        self.board.set_note(look.cannot_isolate.as_deref());
        let text = crate::ops::metrics::render_node(&*n.kernel, &n.sys_root, n.guard)
            + &crate::ops::metrics::render_refusals(crate::host::kernel::guard::refusals());
        drop(node);
        self.change(|c| c.node = text);
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
        out.push_str(&c.node);
        self.board.set_metrics(out);
    }
}
