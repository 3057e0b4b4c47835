//! The command line: parses it ([`args`]), loads the config, sets up logging, runs a command
//! ([`crate::commands`], the hook, the NRI plugin) and maps the result to an [`ExitCode`]
//! ([`crate::exit_codes`]). Errors are printed once, here.
//!
//! The config is loaded once (`load_config`): a file that cannot be parsed gives the defaults, with
//! `fail_closed` kept when a line of it sets it (`config::broken_config_wants_fail_closed`), plus the
//! error, which is a usage error for every command but `hook`, `explain`, `doctor`, `status` and
//! `check-config`. Logging goes to syslog only for `hook`. The operator commands run through
//! `in_system` / `in_state_dir` (the state dir chosen by `state_dir::choice::choose`, a `System` over
//! it, an error printed once); `run_hook` reads the OCI state and hands it to the hook's verdict
//! ([`crate::hook::verdict`]), then prints the error the verdict carries.

pub mod args;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::commands;
use crate::config::{self, Config, ConfigError};
use crate::decide::policy;
use crate::exit_codes::ExitCode;
use crate::hook;
use crate::host::oci_state::{self, State};
use crate::host::state_dir::choice::{self, ThisProcess};
use crate::host::system::{Surroundings, System};
use crate::logging;
use args::{Cli, Command};

fn print_error(err: &anyhow::Error) {
    eprintln!("oci-coresched-hook: error: {err:#}");
    // Runtimes discard stderr; keep a copy in syslog / the log file.
    log::error!(target: logging::NO_STDERR, "{err:#}");
}

/// Loads the config; on failure returns the defaults (with `fail_closed` kept if the broken file
/// asks for it) and the error.
fn load_config(cli: &Cli) -> (Config, Option<ConfigError>) {
    let (path, explicit) = config_file(cli);
    match Config::load(&path, explicit) {
        Ok(c) => (c, None),
        Err(e) => {
            let c = Config { fail_closed: config::broken_config_wants_fail_closed(&path), ..Config::default() };
            (c, Some(e))
        }
    }
}

/// The config file and whether `--config` named it (then its absence is an error).
fn config_file(cli: &Cli) -> (PathBuf, bool) {
    match &cli.config {
        Some(p) => (p.clone(), true),
        None => (PathBuf::from(config::DEFAULT_CONFIG), false),
    }
}

fn read_input(file: Option<&Path>) -> anyhow::Result<State> {
    match file {
        Some(p) => {
            let f = std::fs::File::open(p).with_context(|| format!("failed to open state file {}", p.display()))?;
            oci_state::read_state(f).with_context(|| format!("failed to use state file {}", p.display()))
        }
        None => Ok(oci_state::read_state(std::io::stdin().lock())?),
    }
}

/// The whole program: parses the command line, runs it, and returns how it ended (`main`'s one
/// exit point). A usage error is clap's message and [`ExitCode::Usage`]; `--help` and `--version`
/// print and succeed.
pub fn main() -> ExitCode {
    match Cli::from_env() {
        Ok(cli) => run(cli),
        Err(e) => {
            let _ = e.print();
            if e.use_stderr() { ExitCode::Usage } else { ExitCode::Success }
        }
    }
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    let code = run_command(cli);
    crate::timing::mark("exit code");
    crate::timing::report();
    code
}

/// Runs the parsed command line when it is the runtime's `hook` invocation, and only then: what
/// the hook-only binary of `make bench-split` runs (everything else it refuses with a usage error),
/// so that the linker leaves out the long-running commands and clap's tree.
pub fn run_hook_only(cli: Cli) -> ExitCode {
    let Command::Hook { stage, state } = &cli.command else {
        eprintln!("oci-coresched-hook: error: this build runs the hook command only");
        return ExitCode::Usage;
    };
    let code = match prologue(&cli) {
        Ok((config, config_error)) => run_hook(&cli, &config, config_error, *stage, state.as_deref()),
        Err(code) => code,
    };
    crate::timing::report();
    code
}

/// What every command does first: the config loaded (a config error is kept for the hook,
/// `explain`, `doctor`, `status` and `check-config`, which decide what it means, and a usage
/// error for the other commands), the log level checked and logging started.
fn prologue(cli: &Cli) -> Result<(Config, Option<ConfigError>), ExitCode> {
    let (config, config_error) = load_config(cli);
    crate::timing::mark("config");
    let level_name = cli.log_level.clone().unwrap_or_else(|| config.log_level.clone());
    let Some(level) = logging::parse_level(&level_name) else {
        eprintln!(
            "oci-coresched-hook: error: invalid log level {level_name:?}: expected off, error, warn, info, debug or trace"
        );
        return Err(ExitCode::Usage);
    };
    let is_hook = matches!(cli.command, Command::Hook { .. });
    if let Err(e) = logging::init(level, is_hook && config.syslog, config.log_file.as_deref()) {
        eprintln!("oci-coresched-hook: warning: {}", crate::error::Chain(&e));
    }
    crate::timing::mark("logging");
    match config_error {
        Some(e)
            if !matches!(
                cli.command,
                Command::Hook { .. }
                    | Command::Explain { .. }
                    | Command::Doctor { .. }
                    | Command::Status { .. }
                    | Command::CheckConfig { .. }
            ) =>
        {
            print_error(&e.into());
            Err(ExitCode::Usage)
        }
        other => Ok((config, other)),
    }
}

fn run_command(cli: Cli) -> ExitCode {
    let (config, config_error) = match prologue(&cli) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    match &cli.command {
        Command::Inspect { pid, json } => in_system(&cli, &config, |sys| commands::inspect(&sys, &config, *pid, *json)),
        Command::List { json } => in_system(&cli, &config, |sys| commands::list(&sys, &config, *json)),
        Command::Gc { json } => in_system(&cli, &config, |sys| commands::gc(&sys, &config, *json)),
        Command::Reconcile { follow: true, interval, listen, .. } => {
            in_system(&cli, &config, |sys| commands::follow(&sys, &config, config_file(&cli), *interval, *listen))
        }
        Command::Reconcile { dry_run, once: _, interval, follow: false, json, listen: _ } => {
            in_system(&cli, &config, |sys| commands::reconcile(&sys, &config, *dry_run, *interval, *json))
        }
        Command::Rebuild { runc_root, crun_root, json } => {
            in_system(&cli, &config, |sys| commands::rebuild(&sys, &config, runc_root, crun_root, *json))
        }
        Command::Metrics { output } => {
            in_system(&cli, &config, |sys| commands::metrics(&sys, &config, output.as_ref()))
        }
        Command::Audit { json } => audit(&cli, &config, *json),
        Command::Doctor { json, host_root } => doctor(&cli, &config, config_error.as_ref(), false, *json, host_root),
        Command::Status { json, host_root } => doctor(&cli, &config, config_error.as_ref(), true, *json, host_root),
        Command::CheckConfig { file } => check_config(&cli, file.as_deref()),
        Command::Nri { socket, plugin_name, plugin_index, hook_path, once, listen } => in_state_dir(&cli, |d| {
            let opts = crate::agent::nri::Options {
                socket: socket.clone(),
                plugin_name: plugin_name.clone(),
                plugin_index: plugin_index.clone(),
                hook_path: hook_path.clone(),
                once: *once,
                listen: *listen,
                surroundings: Surroundings::of_this_process(d.to_path_buf(), &config),
            };
            Ok(crate::agent::nri::run(&opts, &config)?)
        }),
        Command::Hook { stage, state } => run_hook(&cli, &config, config_error, *stage, state.as_deref()),
        Command::Explain { stage, state } => {
            if let Some(e) = config_error {
                print_error(&e.into());
                return ExitCode::Usage;
            }
            let result =
                read_input(state.as_deref()).and_then(|s| Ok(policy::decide(&hook::input(&s, *stage)?, &config)?));
            match result {
                Ok(d) => {
                    let mut out = std::io::stdout().lock();
                    let _ = serde_json::to_writer(&mut out, &d);
                    let _ = writeln!(out);
                    ExitCode::Success
                }
                Err(e) => {
                    print_error(&e);
                    ExitCode::Usage
                }
            }
        }
    }
}

/// The `hook` command: the pipeline and its failure policy are the hook's
/// ([`hook::verdict`]); the error it returns is printed here, once.
fn run_hook(
    cli: &Cli,
    config: &Config,
    config_error: Option<ConfigError>,
    stage: Option<hook::Stage>,
    state_file: Option<&Path>,
) -> ExitCode {
    let verdict = hook::verdict::hook_command(hook::verdict::Invocation {
        state: read_input(state_file),
        stage,
        config,
        config_error,
        state_dir: cli.state_dir.as_deref(),
        manual: state_file.is_some(),
    });
    if let Some(e) = &verdict.error {
        print_error(e);
    }
    verdict.code
}

/// Runs an operator command in the state dir that `--state-dir` names or
/// [`choose`](crate::host::state_dir::choice::choose) picks (the hook's rule, so that a rootless user finds the cache
/// their containers' hooks wrote).
fn in_state_dir(cli: &Cli, f: impl FnOnce(&Path) -> anyhow::Result<()>) -> ExitCode {
    finish(choice::choose(cli.state_dir.as_deref(), &ThisProcess).map_err(anyhow::Error::from).and_then(|d| f(&d)))
}

/// `audit`: 0 clean, 1 violations (printed), 2 when what it reads is unusable (the error printed;
/// a cache it cannot open, with no violation found without it, too).
fn audit(cli: &Cli, config: &crate::config::Config, json: bool) -> ExitCode {
    let d = match choice::choose(cli.state_dir.as_deref(), &ThisProcess) {
        Ok(d) => d,
        Err(e) => {
            print_error(&e.into());
            return ExitCode::Usage;
        }
    };
    match commands::audit(&System::new(Surroundings::of_this_process(d, config)), config, json) {
        Ok(a) if a.violations > 0 => ExitCode::Failure,
        Ok(a) if a.cache_unusable => ExitCode::Usage,
        Ok(_) => ExitCode::Success,
        Err(e) => {
            print_error(&e);
            ExitCode::Usage
        }
    }
}

/// `doctor` (`short`: `status`): 0 when the node isolates (or has nothing to isolate), 1 when it
/// does not or is at risk, 2 when doctor could not run (the error printed). A state dir that
/// cannot be chosen and a config that does not load are facts of the report, not errors.
fn doctor(
    cli: &Cli,
    config: &Config,
    config_error: Option<&ConfigError>,
    short: bool,
    json: bool,
    host_root: &Path,
) -> ExitCode {
    use crate::ops::doctor::{ConfigFile, Node};
    let (path, explicit) = config_file(cli);
    let (state_dir, state_dir_error) = match choice::choose(cli.state_dir.as_deref(), &ThisProcess) {
        Ok(d) => (d, None),
        Err(e) => (PathBuf::from(crate::host::state_dir::DEFAULT_STATE_DIR), Some(crate::error::Chain(&e).to_string())),
    };
    let sys = System::new(Surroundings::of_this_process(state_dir, config));
    let self_exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
    let node = Node {
        sys: &sys,
        // The kernel's own answer: the guard's refusal is the sched_ext fact.
        probe: crate::host::kernel::CoreSched::probe_kernel(&sys.kernel),
        config,
        config_file: ConfigFile { path: &path, explicit, error: config_error },
        state_dir_error,
        host_root,
        self_exe: &self_exe,
        self_pid: std::process::id() as i32,
    };
    match commands::doctor(&node, short, json) {
        Ok(0) => ExitCode::Success,
        Ok(_) => ExitCode::Failure,
        Err(e) => {
            print_error(&e);
            ExitCode::Usage
        }
    }
}

/// `check-config [FILE]`: 0 valid (or a missing default file: the defaults), 1 invalid, 2 cannot
/// be read. `FILE` defaults to `--config`, else the default path.
fn check_config(cli: &Cli, file: Option<&Path>) -> ExitCode {
    let (path, explicit) = match file {
        Some(f) => (f.to_path_buf(), true),
        None => config_file(cli),
    };
    match checked_config(&path, explicit) {
        Ok(line) => {
            println!("{line}");
            ExitCode::Success
        }
        Err((code, e)) => {
            print_error(&e.into());
            code
        }
    }
}

/// What `check-config` says of `path` (`explicit`: named on the command line, so it must exist),
/// or the error and its exit status: `Failure` for an invalid file, `Usage` for one that cannot
/// be read.
fn checked_config(path: &Path, explicit: bool) -> Result<String, (ExitCode, ConfigError)> {
    let missing = matches!(std::fs::metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
    match Config::load(path, explicit) {
        Ok(_) if missing => Ok(format!("no config file at {}: the defaults apply", path.display())),
        Ok(_) => Ok(format!("{} is valid", path.display())),
        Err(e @ ConfigError::Invalid { .. }) => Err((ExitCode::Failure, e)),
        Err(e) => Err((ExitCode::Usage, e)),
    }
}

/// [`in_state_dir`] with the [`System`] built over that state dir.
fn in_system(cli: &Cli, config: &Config, f: impl FnOnce(System) -> anyhow::Result<()>) -> ExitCode {
    in_state_dir(cli, |d| f(System::new(Surroundings::of_this_process(d.to_path_buf(), config))))
}

fn finish(r: anyhow::Result<()>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::Success,
        Err(e) => {
            print_error(&e);
            ExitCode::Failure
        }
    }
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
