//! `oci-coresched-hook nri`: a long-running NRI plugin, the route for runtimes that read no hooks.d
//! (containerd 1.7 with NRI enabled, containerd 2.x, CRI-O with `enable_nri`). It connects to the
//! runtime's NRI socket, registers, subscribes to `CreateContainer` and answers each with the
//! adjustment of [`adjust`]: the hook at createRuntime, poststart and poststop, and the hook's
//! annotations. The hook then gives the container its group's cookie before its first
//! instruction, exactly as on the hooks.d route. On every (re)connect, NRI's `Synchronize` lists
//! what already runs, and [`catchup`] gives those containers their cookies through the hook's
//! engine, on a thread of its own so that the runtime's 2 s request timeout is never at stake.
//!
//! [`session`] serves one connection ([`ignored`] counts what it drops); this file holds the options, the errors, the reconnect loop
//! and the signal handling. The protocol (NRI's multiplexer, ttrpc, protobuf) is implemented here,
//! in [`wire`], [`ttrpc`], [`messages`] and [`proto`], from NRI 0.6.1's API definition as the specification, with no new
//! dependency: the plugin needs nine messages and a few fields of each, about 500 lines with their
//! tests, while `prost` brings a derive macro (syn, quote) and the `ttrpc` crate an async runtime
//! and the `protobuf` crate, all linked into the one binary the runtime starts as the hook on
//! every container. Unknown fields of every wire type are skipped, so newer NRI versions (and
//! their `Synchronize` split into several requests flagged `more`) work.
//!
//! Behaviour as a node service:
//! - the socket missing or refusing: one error line naming the settings that enable NRI, then
//!   retries with a backoff (1 s doubling to 30 s; the hidden variable `OCH_NRI_BACKOFF_MS` sets
//!   the first step for tests, the cap being 30 times it), logging again only when the error
//!   changes. With `--once` the command instead exits 1 at the first failure;
//! - the connection lost: a runtime restart (the socket closed or reset, or `Shutdown`) is one
//!   info line, "runtime restarting", and a socket that is not back yet is only an error once it
//!   has stayed away for the backoff's cap (30 s); anything else (a broken frame) is a warning.
//!   Then the same backoff and a new registration;
//! - with `--listen`, an HTTP endpoint ([`crate::agent::endpoint`], [`status`]): `/readyz` is 200 while a
//!   runtime has the plugin configured (on a node that cannot isolate too, its body saying why:
//!   [`crate::agent::node`]), `/healthz` while this loop turns (it does while it waits for a
//!   restarting runtime), `/metrics` the plugin's counters, the node's families and the sched_ext
//!   guard's refusals;
//! - the sched_ext guard holding cookies off: one line when the hold starts and one when it ends
//!   ([`crate::agent::node`]); a catch-up meanwhile gives no cookie and says so in one line;
//! - registration and configuration not done within [`REGISTRATION_TIMEOUT`]: the connection
//!   ends the same way. The deadline bounds each read ([`wire::Conn::recv`]), so a runtime that
//!   trickles bytes without completing a message cannot hold the plugin past it;
//! - while it waits out a backoff, it looks at the socket file every [`SOCKET_POLL`]: a socket
//!   that appears, or is created anew (a restarted runtime binds a new one), ends the wait at
//!   once. A runtime that comes back starts creating pods right away, and until the plugin is
//!   registered again it asks no plugin about them: those containers would start without the
//!   hook, so the plugin is back within [`SOCKET_POLL`] plus a registration, not a backoff step;
//! - a malformed request: an error status for that request (for `CreateContainer`, an empty
//!   adjustment instead unless `fail_closed` is set), logged, the connection kept; an unknown method
//!   gets ttrpc's `Unimplemented`. These, and the frames the plugin drops, are logged in bursts
//!   ([`ignored`]): a few lines of each kind, then one line with the count, so a runtime cannot
//!   flood the log;
//! - every string the runtime sends (its name and version, pod names, namespaces and ids,
//!   container ids, method names) is logged escaped (`escape_debug`, `{:?}`): a newline in a pod
//!   name cannot start a log line of its own;
//! - SIGTERM or SIGINT: exit 0.

pub mod adjust;
pub mod catchup;
mod ignored;
pub mod messages;
pub mod proto;
mod session;
pub mod status;
pub mod ttrpc;
pub mod wire;

use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::agent::endpoint::Board;
use crate::agent::signals::{sleep_unless_stopped, stopping};
use crate::config::Config;
use crate::host::system::Surroundings;
use messages::event;
use session::{Connection, End};
use status::Status;
use wire::WireError;

/// The runtimes' default NRI socket.
pub const DEFAULT_SOCKET: &str = "/var/run/nri/nri.sock";
/// The hook path injected by default: where the packages install the binary on the host.
pub const DEFAULT_HOOK_PATH: &str = "/usr/bin/oci-coresched-hook";
/// What the plugin subscribes to: CreateContainer (the hook injected), and StartContainer (a
/// container created while the plugin was away, which got no hook, is given its cookie before
/// the runtime starts it).
pub const EVENTS: [u32; 2] = [event::CREATE_CONTAINER, event::START_CONTAINER];
/// How long registration and configuration may take before the plugin reconnects (NRI's own
/// limit is 5 s), however the runtime's bytes arrive.
pub(super) const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a blocked read wakes up to look at the stop flag.
pub(super) const POLL: Duration = Duration::from_millis(200);
/// The first backoff step and its cap.
const BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30));
/// The stream id of the one call the plugin makes (ttrpc clients number from 1).
pub(super) const REGISTER_STREAM: u32 = 1;
/// How often a backoff looks whether the socket file was created anew.
pub const SOCKET_POLL: Duration = Duration::from_millis(100);

/// What to do (the `nri` command line).
#[derive(Debug, Clone)]
pub struct Options {
    /// The runtime's NRI socket.
    pub socket: PathBuf,
    /// The plugin's name.
    pub plugin_name: String,
    /// Its two-digit index.
    pub plugin_index: String,
    /// The hook executable to inject, a path on the host.
    pub hook_path: PathBuf,
    /// Serve one connection; fail instead of retrying.
    pub once: bool,
    /// Where to serve `/metrics`, `/healthz` and `/readyz` ([`crate::agent::endpoint`]), if anywhere.
    pub listen: Option<SocketAddr>,
    /// Where the catch-up finds the system (the hook's state dir).
    pub surroundings: Surroundings,
}

/// Why the plugin stopped (with `--once`) or a connection ended.
#[derive(Debug, thiserror::Error)]
pub enum NriError {
    /// No connection to the socket (when it is missing or refusing, the message says how NRI is
    /// enabled).
    #[error("failed to connect to the NRI socket {path}{}", enable_hint(source))]
    Connect {
        /// The socket.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The connection broke.
    #[error("failed to talk to the runtime over NRI")]
    Wire(#[from] WireError),
    /// The runtime refused the registration.
    #[error("failed to register as NRI plugin {name}: the runtime answered {message:?} (code {code})")]
    Refused {
        /// `<index>-<name>`.
        name: String,
        /// The ttrpc status code.
        code: i32,
        /// Its message.
        message: String,
    },
    /// No registration answer and configuration in time.
    #[error("failed to register as NRI plugin {0}: the runtime did not configure it within {REGISTRATION_TIMEOUT:?}")]
    Timeout(String),
    /// The signal handlers could not be installed.
    #[error("failed to install the SIGTERM handler")]
    Signal(#[source] std::io::Error),
}

/// Exponential backoff: `first`, doubling, at most `cap`.
#[derive(Debug, Clone)]
struct Backoff {
    first: Duration,
    cap: Duration,
    next: Duration,
}

impl Backoff {
    fn from_env() -> Self {
        let (first, cap) = match std::env::var("OCH_NRI_BACKOFF_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
            Some(ms) if ms > 0 => (Duration::from_millis(ms), Duration::from_millis(ms.saturating_mul(30))),
            _ => BACKOFF,
        };
        Self { first, cap, next: first }
    }

    fn step(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.cap);
        d
    }

    fn reset(&mut self) {
        self.next = self.first;
    }
}

/// What the settings that turn NRI on are; said once when the socket is missing.
pub const ENABLE_HINT: &str = "is NRI enabled? containerd 1.7: set `[plugins.\"io.containerd.nri.v1.nri\"] disable = false` \
     in /etc/containerd/config.toml and restart containerd (containerd 2.x has it on by default); \
     CRI-O: `enable_nri = true` in the [crio.nri] table of crio.conf";

fn enable_hint(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => format!(" ({ENABLE_HINT})"),
        _ => String::new(),
    }
}

/// Runs the plugin until SIGTERM (exit 0), or with `--once` until its one connection ends.
pub fn run(opts: &Options, config: &Config) -> Result<(), NriError> {
    crate::agent::signals::install().map_err(NriError::Signal)?;
    let hook_path = opts.hook_path.to_string_lossy().into_owned();
    if !opts.hook_path.exists() {
        log::warn!(
            "the hook path {hook_path} does not exist here; it must be the hook's path on the host \
             (fine when this plugin runs in a container; else pass --hook-path)"
        );
    }
    let name = format!("{}-{}", opts.plugin_index, opts.plugin_name);
    log::info!(
        "NRI plugin {name} starting: socket {}, injecting hook {hook_path} at {}",
        opts.socket.display(),
        adjust::STAGES.join(", ")
    );
    let board = Board::new(status::STARTING);
    let status = Status::watching(board.clone(), &opts.surroundings);
    let _endpoint = crate::agent::endpoint::serve_if_asked(opts.listen, &board);
    let mut threads = Vec::new();
    let result = serve_until_stopped(opts, config, &hook_path, &name, &status, &mut threads);
    if threads.iter().any(|t| !t.is_finished()) {
        log::info!("waiting for the catch-up to finish");
    }
    for t in threads {
        let _ = t.join();
    }
    if result.is_ok() && stopping() {
        log::info!("NRI plugin {name} stopping on a signal");
    }
    result
}

/// Whether a connection that had been configured ended the way a runtime restart ends it: a
/// `Shutdown`, or the socket closed or reset under the plugin.
fn routine_end(result: &Result<End, NriError>) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionReset, UnexpectedEof};
    match result {
        Ok(End::Shutdown) => true,
        Err(NriError::Wire(WireError::Closed | WireError::Truncated(_))) => true,
        Err(NriError::Wire(WireError::Read(e) | WireError::Write(e))) => {
            matches!(e.kind(), ConnectionReset | BrokenPipe | UnexpectedEof)
        }
        _ => false,
    }
}

/// The connect-serve-reconnect loop of [`run`]; the catch-up threads it starts go to `threads`.
///
/// A configured connection that ends the way a runtime restart ends it is logged at info as
/// "runtime restarting", and its socket may stay away for the backoff's cap before that is an
/// error: a routine `systemctl restart containerd` is back well within it.
fn serve_until_stopped(
    opts: &Options,
    config: &Config,
    hook_path: &str,
    name: &str,
    status: &Status,
    threads: &mut Vec<std::thread::JoinHandle<()>>,
) -> Result<(), NriError> {
    let mut backoff = Backoff::from_env();
    let mut last_problem: Option<std::io::ErrorKind> = None;
    // Since when the runtime has been restarting (a routine end of a configured connection).
    let mut restarting: Option<Instant> = None;
    while !stopping() {
        status.beat();
        // Taken before the connect: a socket created after this look ends the next wait at once.
        let seen = SocketId::of(&opts.socket);
        let mut configured = false;
        let result = match UnixStream::connect(&opts.socket) {
            Err(source) => Err(NriError::Connect { path: opts.socket.clone(), source }),
            Ok(stream) => {
                last_problem = None;
                log::info!("connected to {}; registering as plugin {name}", opts.socket.display());
                let mut served = Connection::new(opts, config, hook_path, name, status);
                let result = served.serve(stream);
                configured = served.configured;
                if configured {
                    backoff.reset();
                    restarting = None;
                }
                threads.retain(|t| !t.is_finished());
                threads.append(&mut served.threads);
                result
            }
        };
        if matches!(result, Ok(End::Stopped)) {
            break;
        }
        if opts.once {
            return match result {
                Ok(_) => {
                    log::info!("NRI connection ended: the runtime is shutting down");
                    Ok(())
                }
                Err(e) => Err(e),
            };
        }
        let problem = match result {
            Err(NriError::Connect { path, source }) => {
                let kind = source.kind();
                let away = restarting.map(|t| t.elapsed());
                if away.is_some_and(|a| a < backoff.cap) {
                    log::debug!(
                        "runtime restarting: the NRI socket {} is not there yet ({source}); retrying",
                        path.display()
                    );
                    status
                        .not_ready(&format!("runtime restarting: the NRI socket {} is not there yet", path.display()));
                } else {
                    let e = NriError::Connect { path, source };
                    let msg = crate::error::Chain(&e).to_string();
                    if last_problem != Some(kind) {
                        let after = away.map(|a| format!(" (away for {} s)", a.as_secs())).unwrap_or_default();
                        log::error!("{msg}{after}; retrying with a backoff up to {:?}", backoff.cap);
                    } else {
                        log::debug!("the NRI socket {} is still unreachable; retrying", opts.socket.display());
                    }
                    last_problem = Some(kind);
                    status.not_ready(&msg);
                }
                wait_for_socket(&opts.socket, seen, backoff.step(), status);
                continue;
            }
            Ok(_) => "the runtime is shutting down".to_string(),
            Err(ref e) => crate::error::Chain(e).to_string(),
        };
        let wait = backoff.step();
        if configured && routine_end(&result) {
            restarting = Some(Instant::now());
            log::info!(
                "runtime restarting: NRI connection ended: {problem}; reconnecting as soon as the runtime creates its \
                 socket anew, at the latest in {wait:?}"
            );
            status.ended("runtime restarting: the NRI connection ended");
        } else {
            log::warn!(
                "NRI connection ended: {problem}; reconnecting in {wait:?}, or as soon as the runtime creates its socket anew"
            );
            status.ended(&format!("NRI connection ended: {problem}"));
        }
        wait_for_socket(&opts.socket, seen, wait, status);
    }
    Ok(())
}

/// Which file a socket path names: its device, inode and change time. A runtime that starts
/// binds a new socket file, so a new identity means a runtime that may be listening again. The
/// change time is part of it because a file system may give the new file the inode number of the
/// one just removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SocketId(Option<(u64, u64, i64, i64)>);

impl SocketId {
    fn of(path: &Path) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self(std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino(), m.ctime(), m.ctime_nsec())))
    }
}

/// Waits up to `max` (a backoff step), or until a stop signal, or until the socket at `path` is
/// there and is not the file `seen` (it appeared, or a restarted runtime created it anew).
fn wait_for_socket(path: &Path, seen: SocketId, max: Duration, status: &Status) {
    let end = Instant::now() + max;
    while !stopping() {
        status.beat();
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let now = SocketId::of(path);
        if now.0.is_some() && now != seen {
            log::info!("the NRI socket {} is there anew; reconnecting now", path.display());
            return;
        }
        sleep_unless_stopped(left.min(SOCKET_POLL));
    }
}

#[cfg(test)]
#[path = "nri_tests.rs"]
mod tests;
