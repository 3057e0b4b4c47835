//! What the plugin ignores or refuses from the runtime (frames for connections nobody serves,
//! ttrpc messages over the size limit or of an unexpected type, calls of unknown methods,
//! undecodable requests), logged so that a runtime cannot flood the log with it: per [`Kind`],
//! the first [`BURST`] of a [`WINDOW`] get a line each, the others are only counted, and the count
//! is said in one line when the window closes or the connection ends ("ignored 20000 NRI frames
//! for connections nobody serves in the last 1.2s (the first 3 logged)").

use std::time::{Duration, Instant};

/// How many of a kind get a line of their own in one window.
pub(super) const BURST: u64 = 3;
/// How long a window lasts from its first occurrence.
pub(super) const WINDOW: Duration = Duration::from_secs(60);

/// What was ignored or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A mux frame for a logical connection nobody serves.
    UnknownConn,
    /// A ttrpc message over the size limit.
    Oversize,
    /// A ttrpc message of a type or stream the plugin does not expect.
    Unexpected,
    /// A call of a service or method the plugin does not have.
    UnknownCall,
    /// A request (or its argument) that does not decode.
    Undecodable,
    /// A `CreateContainer` request that does not decode (the container is refused or left as it is).
    BadCreate,
}

const KINDS: usize = 6;

impl Kind {
    fn what(self) -> &'static str {
        match self {
            Kind::UnknownConn => "NRI frames for connections nobody serves",
            Kind::Oversize => "ttrpc messages over the size limit",
            Kind::Unexpected => "unexpected ttrpc messages",
            Kind::UnknownCall => "calls of unknown services or methods",
            Kind::Undecodable => "undecodable requests",
            Kind::BadCreate => "undecodable CreateContainer requests",
        }
    }
}

const ALL: [Kind; KINDS] =
    [Kind::UnknownConn, Kind::Oversize, Kind::Unexpected, Kind::UnknownCall, Kind::Undecodable, Kind::BadCreate];

#[derive(Debug, Default, Clone, Copy)]
struct Window {
    start: Option<Instant>,
    count: u64,
}

/// The open windows of one connection.
#[derive(Debug, Default)]
pub(super) struct Ignored {
    windows: [Window; KINDS],
}

impl Ignored {
    /// Counts one of `kind`, and logs `line` at `level` if it is among the first [`BURST`] of its
    /// window. True when it was logged.
    pub(super) fn note(&mut self, kind: Kind, level: log::Level, line: impl FnOnce() -> String) -> bool {
        let now = Instant::now();
        if let Some(s) = self.close(kind, now, false) {
            log::warn!("{s}");
        }
        let w = &mut self.windows[kind as usize];
        w.start.get_or_insert(now);
        w.count += 1;
        let logged = w.count <= BURST;
        if logged {
            log::log!(level, "{}", line());
        }
        logged
    }

    /// Says the count of every window that is over (called between messages).
    pub(super) fn tick(&mut self) {
        let now = Instant::now();
        for line in ALL.into_iter().filter_map(|k| self.close(k, now, false)) {
            log::warn!("{line}");
        }
    }

    /// Says the count of every open window (the connection ended).
    pub(super) fn flush(&mut self) {
        let now = Instant::now();
        for line in ALL.into_iter().filter_map(|k| self.close(k, now, true)) {
            log::warn!("{line}");
        }
    }

    /// Closes `kind`'s window if it is over (or `now` with `force`), and its summary line if more
    /// happened in it than were logged.
    fn close(&mut self, kind: Kind, now: Instant, force: bool) -> Option<String> {
        let w = &mut self.windows[kind as usize];
        let start = w.start?;
        let took = now.saturating_duration_since(start);
        if !force && took < WINDOW {
            return None;
        }
        let count = std::mem::take(w).count;
        (count > BURST)
            .then(|| format!("ignored {count} {} in the last {took:.1?} (the first {BURST} logged)", kind.what()))
    }
}

#[cfg(test)]
#[path = "ignored_tests.rs"]
mod tests;
