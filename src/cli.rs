//! Command-line definitions (clap derive). The contract others script against: keep it stable.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::hook::Stage;
use crate::statedir::DEFAULT_STATE_DIR;

/// Exit codes, shown in `--help`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  done, or failed open (the error is logged and the container starts)
  1  failed: fail_closed is set (the runtime refuses the container), or a manual command
     (including `hook --state FILE`) failed
  2  usage error, or unreadable input (state, config) for a manual command";

/// Gives containers Linux core-scheduling cookies by group, as an OCI runtime hook.
#[derive(Debug, Parser)]
#[command(name = "oci-coresched-hook", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    /// Config file [default: /etc/oci-coresched-hook/config.toml; a missing default file means defaults]
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// State directory holding the lock and the cache
    #[arg(long, global = true, value_name = "DIR", default_value = DEFAULT_STATE_DIR)]
    pub state_dir: PathBuf,

    /// Log level: off, error, warn, info, debug, trace [default: from the config, else info]
    #[arg(long, global = true, value_name = "LEVEL")]
    pub log_level: Option<String>,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
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
    /// List cached groups and members, with liveness and current cookies
    #[command(visible_alias = "status")]
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Drop members whose init died or whose pid was reused, and empty groups
    Gc {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Give processes that entered a container without a hook (runc exec, nsenter) the cookie of
    /// their container's group; run by a systemd timer
    Reconcile {
        /// Only report what would be fixed
        #[arg(long)]
        dry_run: bool,
        /// Run once and exit (the default; for timers and scripts)
        #[arg(long, conflicts_with = "interval")]
        once: bool,
        /// Instead of once, repeat every SECONDS until killed
        #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=86400))]
        interval: Option<u64>,
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
    /// Print Prometheus metrics (text format, for node_exporter's textfile collector)
    Metrics {
        /// Write atomically to FILE instead of stdout (e.g. /var/lib/node_exporter/oci-coresched-hook.prom)
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions {
        /// Target shell
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write one page per command into a directory
    Man {
        /// Write oci-coresched-hook.1 and oci-coresched-hook-<command>.1 into DIR
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}
