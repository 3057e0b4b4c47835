//! How a run ends: the three exit codes every command uses, the text `--help` shows for them, and
//! the conversion `main` applies once. Nothing else in the crate exits the process (clap's own
//! usage errors come back here too, through [`crate::cli::args::Cli::from_env`]).

/// The exit status of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// 0: done, or failed open (the error is logged and the container starts).
    Success,
    /// 1: failed: fail-closed (the runtime refuses the container), or a manual command failed.
    Failure,
    /// 2: a usage error, or unreadable input (state, config) for a manual command.
    Usage,
}

impl ExitCode {
    /// Every code, in numeric order.
    pub const ALL: [ExitCode; 3] = [ExitCode::Success, ExitCode::Failure, ExitCode::Usage];

    /// The number the process exits with.
    pub fn code(self) -> u8 {
        match self {
            ExitCode::Success => 0,
            ExitCode::Failure => 1,
            ExitCode::Usage => 2,
        }
    }
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(code: ExitCode) -> Self {
        std::process::ExitCode::from(code.code())
    }
}

/// The exit codes as `--help` shows them (and the README repeats).
pub const HELP: &str = "\
Exit codes:
  0  done, or failed open (the error is logged and the container starts)
  1  failed: fail_closed is set (the runtime refuses the container), or a manual command
     (including `hook --state FILE`) failed
  2  usage error, or unreadable input (state, config) for a manual command";

#[cfg(test)]
#[path = "exit_codes_tests.rs"]
mod tests;
