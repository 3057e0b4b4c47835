//! What the endpoint shows: the page a long-running command publishes (its Prometheus text), a
//! heartbeat its loop beats (`/healthz`) and whether it is ready (`/readyz`). The owner writes,
//! the endpoint's thread reads; neither ever waits on the other for more than a copy of a pointer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a loop may go without a beat before `/healthz` says it is stuck.
pub const STUCK_AFTER: Duration = Duration::from_secs(60);

/// The state one long-running command shows over HTTP.
#[derive(Debug)]
pub struct Board {
    started: Instant,
    /// Milliseconds since `started` of the last beat.
    beat_ms: AtomicU64,
    stuck_after: Duration,
    shown: Mutex<Shown>,
}

#[derive(Debug)]
struct Shown {
    metrics: Arc<str>,
    /// `Ok` when ready, else why not.
    ready: Result<(), Arc<str>>,
    /// What a ready answer adds about the node (e.g. that it cannot isolate).
    note: Option<Arc<str>>,
}

/// A page the endpoint answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The HTTP status.
    pub status: u16,
    /// Its Content-Type.
    pub content_type: &'static str,
    /// The body.
    pub body: Arc<str>,
}

/// Prometheus' text exposition format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
const PLAIN: &str = "text/plain; charset=utf-8";

impl Board {
    /// A board not ready yet (`why`), with an empty page and a beat now.
    pub fn new(why: &str) -> Arc<Self> {
        Self::with_stuck_after(why, STUCK_AFTER)
    }

    /// [`Board::new`] with another liveness bound (tests).
    pub fn with_stuck_after(why: &str, stuck_after: Duration) -> Arc<Self> {
        Arc::new(Self {
            started: Instant::now(),
            beat_ms: AtomicU64::new(0),
            stuck_after,
            shown: Mutex::new(Shown { metrics: Arc::from(""), ready: Err(Arc::from(why)), note: None }),
        })
    }

    /// The owner's loop is alive: called on each of its turns.
    pub fn beat(&self) {
        self.beat_ms.store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Replaces the Prometheus text `/metrics` serves.
    pub fn set_metrics(&self, text: String) {
        self.lock().metrics = Arc::from(text);
    }

    /// Ready (`Ok`), or not ready and why.
    pub fn set_ready(&self, ready: Result<(), &str>) {
        let mut shown = self.lock();
        match (&shown.ready, ready) {
            (Ok(()), Ok(())) => {}
            (Err(was), Err(why)) if &**was == why => {}
            (_, r) => shown.ready = r.map_err(Arc::from),
        }
    }

    /// What a ready `/readyz` says after `ready; ` (`None`: only `ready`). Readiness stays the
    /// owner's job being done; the note names what the node lets it do (docs/kubernetes.md).
    pub fn set_note(&self, note: Option<&str>) {
        let mut shown = self.lock();
        if shown.note.as_deref() != note {
            shown.note = note.map(Arc::from);
        }
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        self.lock().ready.is_ok()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shown> {
        // The data stays valid whatever a panicking holder did: each field is replaced whole.
        self.shown.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long ago the last beat was.
    pub fn since_beat(&self) -> Duration {
        let beat = Duration::from_millis(self.beat_ms.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(beat)
    }

    /// The page for a request path (the query string already cut off).
    pub fn page(&self, path: &str) -> Page {
        let text = |status, body: String| Page { status, content_type: PLAIN, body: Arc::from(body) };
        match path {
            "/metrics" => Page { status: 200, content_type: PROMETHEUS_TEXT, body: self.lock().metrics.clone() },
            "/healthz" => {
                let since = self.since_beat();
                if since <= self.stuck_after {
                    text(200, "ok\n".into())
                } else {
                    text(
                        503,
                        format!(
                            "stuck: the main loop last ran {} s ago (limit {} s)\n",
                            since.as_secs(),
                            self.stuck_after.as_secs()
                        ),
                    )
                }
            }
            "/readyz" => {
                let shown = self.lock();
                match (&shown.ready, &shown.note) {
                    (Ok(()), None) => text(200, "ready\n".into()),
                    (Ok(()), Some(note)) => text(200, format!("ready; {note}\n")),
                    (Err(why), _) => text(503, format!("not ready: {why}\n")),
                }
            }
            "/" => {
                text(200, "oci-coresched-hook: /metrics (Prometheus text), /healthz (live), /readyz (ready)\n".into())
            }
            _ => text(404, "not found: this endpoint serves /metrics, /healthz and /readyz\n".into()),
        }
    }
}

#[cfg(test)]
#[path = "board_tests.rs"]
mod tests;
