//! Logging to stderr (env_logger) plus syslog/journald and an optional file: runtimes throw a
//! hook's stderr away (crun) or show it only inside an error (runc), so stderr alone is not enough.
//!
//! Syslog is `/dev/log`, facility daemon; a line logged with target [`NO_STDERR`] stays off stderr.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::Mutex;

use log::{Level, LevelFilter, Log, Metadata, Record};

/// Records logged with this target skip stderr (the caller already printed them there).
pub const NO_STDERR: &str = "oci_coresched_hook::no_stderr";

const IDENT: &str = "oci-coresched-hook";

#[derive(Debug)]
struct Sinks {
    stderr: env_logger::Logger,
    syslog: Option<Mutex<Option<UnixDatagram>>>,
    file: Option<Mutex<File>>,
    level: LevelFilter,
}

fn syslog_severity(level: Level) -> u8 {
    match level {
        Level::Error => 3,
        Level::Warn => 4,
        Level::Info => 6,
        Level::Debug | Level::Trace => 7,
    }
}

impl Log for Sinks {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= self.level
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        if record.target() != NO_STDERR {
            self.stderr.log(record);
        }
        let pid = std::process::id();
        if let Some(sock) = &self.syslog {
            let mut guard = sock.lock().unwrap_or_else(|e| e.into_inner());
            if guard.is_none() {
                // Connected lazily: a quiet run never touches /dev/log.
                *guard = UnixDatagram::unbound().ok().filter(|s| s.connect("/dev/log").is_ok());
            }
            if let Some(s) = guard.as_ref() {
                // facility daemon (3)
                let pri = 3 * 8 + syslog_severity(record.level());
                let _ = s.send(format!("<{pri}>{IDENT}[{pid}]: {}", record.args()).as_bytes());
            }
        }
        if let Some(file) = &self.file {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0);
            let line = format!("{now:.3} {} {IDENT}[{pid}]: {}\n", record.level(), record.args());
            let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
            let _ = f.write_all(line.as_bytes());
        }
    }

    fn flush(&self) {}
}

/// The log file could not be opened (logging still works on the other sinks).
#[derive(Debug, thiserror::Error)]
#[error("failed to open log file {}", path.display())]
pub struct LogFileError {
    /// The configured log file.
    pub path: std::path::PathBuf,
    /// Why it could not be opened.
    #[source]
    pub source: std::io::Error,
}

/// Installs the logger. Returns an error when the log file cannot be opened (logging still works
/// on the other sinks).
pub fn init(level: LevelFilter, syslog: bool, file: Option<&Path>) -> Result<(), LogFileError> {
    let stderr = env_logger::Builder::new()
        .filter_level(level)
        .format(|buf, record| {
            writeln!(buf, "{IDENT}: {}: {}", record.level().as_str().to_ascii_lowercase(), record.args())
        })
        .target(env_logger::Target::Stderr)
        .build();
    let mut problem = None;
    let file = file.and_then(|p| match OpenOptions::new().create(true).append(true).open(p) {
        Ok(f) => Some(Mutex::new(f)),
        Err(source) => {
            problem = Some(LogFileError { path: p.to_path_buf(), source });
            None
        }
    });
    let sinks = Sinks { stderr, syslog: syslog.then(|| Mutex::new(None)), file, level };
    if log::set_boxed_logger(Box::new(sinks)).is_ok() {
        log::set_max_level(level);
    }
    problem.map_or(Ok(()), Err)
}

/// Parses a level name (off, error, warn, info, debug, trace).
pub fn parse_level(s: &str) -> Option<LevelFilter> {
    s.parse().ok()
}
