//! Command-line definitions (clap derive). The contract others script against: keep it stable.
//!
//! The runtime starts the hook on every container start, so its own command line (`hook` with
//! the global options and `--stage`/`--state`) is recognised by a small exact parser first; clap
//! builds its whole command tree (about 0.12 ms per process on the benchmark machine) only for
//! everything else: other commands, `--help`, errors. A test checks that the two agree on every
//! command line the small parser accepts.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::hook::Stage;

/// What `--version` says after the name: the package version and the commit it was built from
/// (`build.rs`; `unknown` outside a git checkout).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("OCH_COMMIT"), ")");

/// Gives containers Linux core-scheduling cookies by group, as an OCI runtime hook.
#[derive(Debug, Parser)]
#[command(name = "oci-coresched-hook", version = VERSION, about, after_help = crate::exit_codes::HELP)]
pub struct Cli {
    /// Config file [default: /etc/oci-coresched-hook/config.toml; a missing default file means defaults]
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// State directory holding the lock and the cache [default: /run/oci-coresched-hook for root;
    /// for other users (rootless podman) $XDG_RUNTIME_DIR/oci-coresched-hook, else
    /// /run/user/UID/oci-coresched-hook]
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Log level: off, error, warn, info, debug, trace [default: from the config, else info]
    #[arg(long, global = true, value_name = "LEVEL")]
    pub log_level: Option<String>,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses the process's command line. `Err` is clap's usage error, or its `--help` /
    /// `--version` text, for [`crate::cli::main`] to print and exit with.
    pub fn from_env() -> Result<Self, clap::Error> {
        crate::timing::mark("start");
        let args: Vec<OsString> = std::env::args_os().collect();
        let cli = match Self::parse_hook_fast(&args) {
            Some(cli) => cli,
            None => Self::try_parse_from(args)?,
        };
        crate::timing::mark("command line");
        Ok(cli)
    }

    /// The hook invocation exactly as clap would parse it, or `None` for anything else (another
    /// command, help, a repeated or unknown option, a missing or odd value), which clap then
    /// handles. `args[0]` is the program name.
    pub fn parse_hook_fast(args: &[OsString]) -> Option<Self> {
        let mut config = None;
        let mut state_dir = None;
        let mut log_level = None;
        let mut stage = None;
        let mut state = None;
        let mut saw_hook = false;
        let mut it = args.iter().skip(1);
        while let Some(arg) = it.next() {
            let arg = arg.to_str()?;
            if arg == "hook" && !saw_hook {
                saw_hook = true;
                continue;
            }
            let (name, inline) = match arg.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (arg, None),
            };
            let value = match inline {
                Some(v) => v,
                None => it.next()?.to_str()?,
            };
            // Values clap would treat differently (flags, empty) go to clap.
            if value.is_empty() || value.starts_with('-') {
                return None;
            }
            let slot = match name {
                "--config" => &mut config,
                "--state-dir" => &mut state_dir,
                "--log-level" => &mut log_level,
                "--stage" if saw_hook => &mut stage,
                "--state" if saw_hook => &mut state,
                _ => return None,
            };
            if slot.replace(value).is_some() {
                return None;
            }
        }
        if !saw_hook {
            return None;
        }
        let stage = match stage {
            Some(s) => Some(Stage::from_str(s, false).ok()?),
            None => None,
        };
        Some(Self {
            config: config.map(PathBuf::from),
            state_dir: state_dir.map(PathBuf::from),
            log_level: log_level.map(str::to_string),
            command: Command::Hook { stage, state: state.map(PathBuf::from) },
        })
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The runtime's entry point: read the OCI state and give the container its group's cookie
    Hook {
        /// Hook stage; inferred from the state's status and pid when absent
        #[arg(long, value_enum)]
        stage: Option<Stage>,
        /// Read the OCI state from FILE instead of stdin (for manual runs)
        #[arg(long, value_name = "FILE")]
        state: Option<PathBuf>,
    },
    /// Print the decision for a state as JSON, touching neither the kernel nor the cache
    Explain {
        /// Hook stage; inferred from the state when absent
        #[arg(long, value_enum)]
        stage: Option<Stage>,
        /// Read the OCI state from FILE instead of stdin
        #[arg(long, value_name = "FILE")]
        state: Option<PathBuf>,
    },
    /// Show the cookie of every thread of PID and the cached container and group it belongs to
    Inspect {
        /// Process id (host pid namespace)
        pid: i32,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// List cached groups and members, with liveness and current cookies; first, a line when the
    /// kernel cannot isolate (no core scheduling while SMT is on, or the sched_ext guard)
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Say whether this node isolates tenants with core scheduling, and why not: a verdict, then
    /// one line per fact (kernel, SMT, vulnerabilities, schedstats, sched_ext, config, state dir,
    /// cache, hooks.d, containerd, routes, follower, NRI plugin, audit, fail-opens), worst first.
    /// Read-only. Exit 0: it isolates (or SMT is off: nothing to isolate); 1: it does not, or is at
    /// risk; 2: it could not run
    Doctor {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
        /// Read the node's files (hooks.d, the engines' configs, the binaries they name) under DIR,
        /// e.g. /host in a container that mounts the node there
        #[arg(long, value_name = "DIR", default_value = "/")]
        host_root: PathBuf,
    },
    /// doctor's short form: the verdict and the facts that are not ok (fail, warn); the same exit
    /// codes and the same --json
    Status {
        /// Print JSON (the same object as doctor's)
        #[arg(long)]
        json: bool,
        /// As doctor's --host-root
        #[arg(long, value_name = "DIR", default_value = "/")]
        host_root: PathBuf,
    },
    /// Check a config file without touching anything else. Exit 0: valid (a missing default
    /// file: the defaults apply); 1: invalid (the error names the key and line); 2: it cannot be
    /// read (an explicit FILE missing, permission denied)
    CheckConfig {
        /// The file [default: --config, else /etc/oci-coresched-hook/config.toml]
        #[arg(value_name = "FILE")]
        file: Option<PathBuf>,
    },
    /// Drop members whose init died or whose pid was reused, and empty groups
    Gc {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Give processes that entered a container without a hook (runc exec, podman exec, kubectl
    /// exec, nsenter) the cookie of their container's group; `--follow` is the packaged service
    Reconcile {
        /// Only report what would be fixed
        #[arg(long, conflicts_with = "follow")]
        dry_run: bool,
        /// Run once and exit (the default; for scripts)
        #[arg(long, conflicts_with_all = ["interval", "follow"])]
        once: bool,
        /// Instead of once, repeat every SECONDS until killed; with --follow, the full sweep's
        /// interval [default with --follow: 60]
        #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=86400))]
        interval: Option<u64>,
        /// Run until SIGTERM: give each process that forks or execs into a member container its
        /// cookie at once (the kernel's proc connector), plus a full sweep at start and every
        /// --interval; without process events, a sweep every 10 s
        #[arg(long, conflicts_with = "json")]
        follow: bool,
        /// With --follow: serve /metrics (every family of `metrics` and the follower's counters),
        /// /healthz and /readyz over HTTP on ADDRESS:PORT (a bare PORT is 127.0.0.1:PORT)
        #[arg(long, value_name = "ADDRESS:PORT", requires = "follow", value_parser = crate::agent::endpoint::parse_listen)]
        listen: Option<std::net::SocketAddr>,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Reload the cache from the containers runc and crun are running (after the cache was lost)
    Rebuild {
        /// A runc-style state root to scan (repeatable) [default: /run/runc,
        /// /run/containerd/runc/k8s.io, /run/containerd/runc/default and /run/crun]
        #[arg(long, value_name = "DIR")]
        runc_root: Vec<PathBuf>,
        /// A crun state root to scan (repeatable)
        #[arg(long, value_name = "DIR")]
        crun_root: Vec<PathBuf>,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Check every thread of every process against its group's cookie, read-only: exit 0 when
    /// clean, 1 with one line per violation, 2 when /proc, the cache or the kernel cannot be read
    Audit {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Print Prometheus metrics (text format, for node_exporter's textfile collector)
    Metrics {
        /// Write atomically to FILE instead of stdout (e.g. /var/lib/node_exporter/oci-coresched-hook.prom)
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Run as an NRI plugin (containerd >= 1.7 with NRI enabled, CRI-O with enable_nri): inject
    /// the hook into every container the runtime creates, and give containers already running
    /// their cookies when (re)connected. Runs until SIGTERM, reconnecting with a backoff
    Nri {
        /// The runtime's NRI socket
        #[arg(long, value_name = "PATH", default_value = crate::agent::nri::DEFAULT_SOCKET)]
        socket: PathBuf,
        /// The plugin's name, as the runtime lists it
        #[arg(long, value_name = "NAME", default_value = "oci-coresched-hook", value_parser = plugin_name)]
        plugin_name: String,
        /// The plugin's two-digit index (its place among the runtime's NRI plugins)
        #[arg(long, value_name = "NN", default_value = "10", value_parser = plugin_index)]
        plugin_index: String,
        /// The hook executable to inject, as a path on the HOST (the runtime runs it); when the
        /// plugin runs in a container, this is not the plugin's own path
        #[arg(long, value_name = "PATH", default_value = crate::agent::nri::DEFAULT_HOOK_PATH)]
        hook_path: PathBuf,
        /// Serve one connection and exit: 1 if it cannot be made or fails, 0 when the runtime
        /// ends it (instead of reconnecting)
        #[arg(long)]
        once: bool,
        /// Serve /metrics, /healthz (live) and /readyz (configured by a runtime) over HTTP on
        /// ADDRESS:PORT (a bare PORT is 127.0.0.1:PORT)
        #[arg(long, value_name = "ADDRESS:PORT", value_parser = crate::agent::endpoint::parse_listen)]
        listen: Option<std::net::SocketAddr>,
    },
}

fn plugin_index(s: &str) -> Result<String, String> {
    if s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit()) {
        Ok(s.to_string())
    } else {
        Err("expected two digits, e.g. 10".into())
    }
}

fn plugin_name(s: &str) -> Result<String, String> {
    if !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        Ok(s.to_string())
    } else {
        Err("expected 1-64 characters of [A-Za-z0-9._-]".into())
    }
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
