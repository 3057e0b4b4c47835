//! The configuration file (`/etc/oci-coresched-hook/config.toml` by default) and its defaults.
//!
//! Unknown keys and wrong types are errors that name the key, the file and the line: a typo in a
//! security setting must never be silently ignored.
//!
//! [`Config::rule`] gives the rule of a QoS class (`[qos.LSE|LSR|LS|BE]`; `[qos.SYSTEM]` is refused).
//! A file that cannot be parsed still says whether it sets `fail_closed = true`
//! ([`broken_config_wants_fail_closed`], [`text_wants_fail_closed`]), so that a typo elsewhere in it
//! never turns fail-closed into fail-open.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where the configuration lives unless `--config` says otherwise.
pub const DEFAULT_CONFIG: &str = "/etc/oci-coresched-hook/config.toml";

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read (or an explicitly named file is missing).
    #[error("failed to read config file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Bad TOML, unknown key, wrong type, bad value.
    #[error("invalid config file {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What the parser said, with the line.
        message: String,
    },
}

/// A Koordinator QoS class. The config has a rule for each but [`QosClass::System`], whose
/// containers are never touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QosClass {
    /// Latency-sensitive exclusive.
    Lse,
    /// Latency-sensitive reserved.
    Lsr,
    /// Latency-sensitive.
    Ls,
    /// Best effort.
    Be,
    /// System daemons: never managed.
    System,
}

/// The QoS classes the config has a rule for.
pub const QOS_CLASSES: [QosClass; 4] = [QosClass::Lse, QosClass::Lsr, QosClass::Ls, QosClass::Be];

impl QosClass {
    /// Koordinator's name (`koordinator.sh/qosClass` values, `[qos.NAME]` tables).
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Lse => "LSE",
            QosClass::Lsr => "LSR",
            QosClass::Ls => "LS",
            QosClass::Be => "BE",
            QosClass::System => "SYSTEM",
        }
    }

    /// The class named `name` exactly (Koordinator's spelling), SYSTEM included.
    pub fn from_name(name: &str) -> Option<Self> {
        QOS_CLASSES.into_iter().chain([QosClass::System]).find(|c| c.as_str() == name)
    }
}

impl std::fmt::Display for QosClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for QosClass {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for QosClass {
    /// A `[qos.NAME]` table's name: one of the classes with a rule.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        QosClass::from_name(&name).filter(|c| *c != QosClass::System).ok_or_else(|| {
            let names: Vec<&str> = QOS_CLASSES.iter().map(|c| c.as_str()).collect();
            serde::de::Error::custom(format!(
                "qos class {name:?} is not one of {} (SYSTEM is never managed)",
                names.join(", ")
            ))
        })
    }
}

/// What to do for one QoS class (Koordinator's NodeSLO CPUQOS, per class).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct QosRule {
    /// Manage cookies for this class at all; `false` clears any cookie the container inherited.
    pub enable: bool,
    /// Put the class's containers in the `-expeller` variant of their group.
    pub core_expeller: bool,
    /// Write `cpu.idle = 1` into the container's cgroup (cgroup v2).
    pub sched_idle: bool,
}

impl Default for QosRule {
    fn default() -> Self {
        Self { enable: true, core_expeller: false, sched_idle: false }
    }
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Fail the hook (and so the container start) on any error instead of logging and going on.
    pub fail_closed: bool,
    /// How long to wait for the state lock, in milliseconds.
    pub lock_timeout_ms: u64,
    /// Log level: off, error, warn, info, debug or trace.
    pub log_level: String,
    /// Also send log records to syslog (journald reads it).
    pub syslog: bool,
    /// Also append log records to this file.
    pub log_file: Option<PathBuf>,
    /// Let pods of different namespaces join one named group.
    pub allow_cross_namespace_groups: bool,
    /// The follower (`reconcile --follow`) sets `kernel.sched_schedstats = 1` when it starts, so
    /// that the kernel counts forced idle (what each group's isolation costs).
    pub enable_schedstats: bool,
    /// Refuse to make or share a cookie while a sched_ext scheduler is loaded
    /// ([`crate::host::sched_ext`]): on an SMT host running sched_ext, a cookie can hang the
    /// machine (github.com/sched-ext/scx/issues/3715). `false` only for a kernel known to be fixed.
    pub sched_ext_guard: bool,
    /// Per-QoS-class rules, keyed by LSE, LSR, LS, BE. Missing classes use the default rule.
    pub qos: BTreeMap<QosClass, QosRule>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            fail_closed: false,
            lock_timeout_ms: 3000,
            log_level: "info".into(),
            syslog: true,
            log_file: None,
            allow_cross_namespace_groups: false,
            enable_schedstats: false,
            sched_ext_guard: true,
            qos: BTreeMap::new(),
        }
    }
}

const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

impl Config {
    /// The rule for a QoS class (default rule when the config names none).
    pub fn rule(&self, class: QosClass) -> QosRule {
        self.qos.get(&class).copied().unwrap_or_default()
    }

    /// The lock timeout.
    pub fn lock_timeout(&self) -> Duration {
        Duration::from_millis(self.lock_timeout_ms)
    }

    /// Parses and validates a config document; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid { path: path.to_path_buf(), message };
        let cfg: Config = toml::from_str(text).map_err(|e| invalid(e.to_string().trim_end().replace('\n', " ")))?;
        if !LOG_LEVELS.contains(&cfg.log_level.as_str()) {
            return Err(invalid(format!("log_level {:?} is not one of {}", cfg.log_level, LOG_LEVELS.join(", "))));
        }
        if cfg.lock_timeout_ms == 0 || cfg.lock_timeout_ms > 60_000 {
            return Err(invalid(format!("lock_timeout_ms {} must be between 1 and 60000", cfg.lock_timeout_ms)));
        }
        Ok(cfg)
    }

    /// Loads the config. A missing file is the defaults only when it is the default path;
    /// a file named explicitly must exist.
    pub fn load(path: &Path, explicit: bool) -> Result<Self, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => Ok(Self::default()),
            Err(source) => Err(ConfigError::Read { path: path.to_path_buf(), source }),
        }
    }
}

/// When the config cannot be parsed, whether it still asks to fail closed. A broken file must not
/// turn a fail-closed node into a fail-open one, so this looks for a `fail_closed = true` line.
/// The file is read as bytes: invalid UTF-8 elsewhere in it must not hide that line.
pub fn broken_config_wants_fail_closed(path: &Path) -> bool {
    let Ok(bytes) = std::fs::read(path) else { return false };
    text_wants_fail_closed(&String::from_utf8_lossy(&bytes))
}

/// Whether one line of `text` sets `fail_closed = true`: a line that is on its own a TOML document
/// doing so, whatever spelling of the key TOML allows (bare, `"quoted"`, `'literal'`, escaped), or,
/// when the line is not valid TOML, one that reads `fail_closed = true` before any comment.
pub fn text_wants_fail_closed(text: &str) -> bool {
    text.lines().any(|line| match toml::from_str::<toml::Table>(line) {
        Ok(table) => table.get("fail_closed") == Some(&toml::Value::Boolean(true)),
        Err(_) => {
            let line = line.split('#').next().unwrap_or("");
            let mut parts = line.splitn(2, '=');
            matches!((parts.next(), parts.next()), (Some(k), Some(v)) if k.trim() == "fail_closed" && v.trim() == "true")
        }
    })
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
