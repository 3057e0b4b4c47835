//! The bundle's `config.json` (an OCI runtime spec), read tolerantly for the few fields the hook
//! and `rebuild` use: `annotations`, `linux.cgroupsPath`, and whether `hooks` runs this hook
//! (which the audit and the follower's escape scan ask). Nothing else is looked at: the spec
//! grows (capability names newer than any crate, new seccomp actions, a newer `ociVersion`, vendor
//! fields) and runc and crun run such specs, so a value we do not know must never cost us the
//! fields we need. One reader for both callers, so the hook and `rebuild` decide alike.
//!
//! Bounded like the OCI state on stdin: at most [`MAX_CONFIG_BYTES`] are read. A field we use
//! that has the wrong type is an error naming the file and the field; the callers then go on
//! without the file (the hook with the state's annotations alone).

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

/// Largest `config.json` read: well above real specs (the captured ones are 5–20 KB, seccomp
/// profile included) and above what one can hold that a runtime still execs (arguments and
/// environment within `ARG_MAX`, 2 MiB, plus 256 KiB of Kubernetes annotations).
pub const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// Why a `config.json` could not be used. Each message names the file once; the cause is the
/// `#[source]`, said once by [`crate::error::Chain`] or `{:#}`.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// Opening or reading the file failed.
    #[error("failed to read bundle config {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        cause: std::io::Error,
    },
    /// More than [`MAX_CONFIG_BYTES`].
    #[error("failed to read bundle config {path}: it is larger than the {MAX_CONFIG_BYTES}-byte limit")]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// Not JSON, or not a JSON object.
    #[error("failed to parse bundle config {path}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        cause: serde_json::Error,
    },
    /// A field we use has the wrong type.
    #[error("failed to parse bundle config {path}: `{field}` {problem}")]
    Field {
        /// The file.
        path: PathBuf,
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

impl BundleError {
    /// True when the file does not exist (a bundle already removed).
    pub fn is_not_found(&self) -> bool {
        matches!(self, BundleError::Read { cause, .. } if cause.kind() == std::io::ErrorKind::NotFound)
    }
}

/// What the hook and `rebuild` take from a `config.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BundleConfig {
    /// `annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `linux.cgroupsPath`, when set and not empty.
    pub cgroups_path: Option<String>,
    /// `hooks` runs this hook at a stage that gives the cookie ([`names_hook`]); read only with
    /// [`Hooks::Read`], else false.
    pub names_hook: bool,
}

impl BundleConfig {
    /// Adds the annotations `annotations` lacks (a runtime's copy of them, e.g. the OCI state's,
    /// wins over the file's).
    pub fn complete(&self, annotations: &mut BTreeMap<String, String>) {
        for (k, v) in &self.annotations {
            annotations.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

/// The top level: only the two keys we use are kept; every other key's value is skipped without
/// being built (it is checked to be JSON, nothing more). A repeated key: the last one wins, as in
/// runc's Go decoder.
#[derive(Default)]
struct Doc {
    annotations: Option<Value>,
    linux: Option<Linux>,
    hooks: Option<Value>,
}

/// `linux`: only `cgroupsPath`.
#[derive(Default)]
struct Linux {
    cgroups_path: Option<Value>,
}

/// The keys of both objects we look into; any other is [`Key::Other`].
#[derive(Deserialize)]
#[serde(field_identifier)]
enum Key {
    #[serde(rename = "annotations")]
    Annotations,
    #[serde(rename = "linux")]
    Linux,
    #[serde(rename = "cgroupsPath")]
    CgroupsPath,
    #[serde(rename = "hooks")]
    Hooks,
    #[serde(other)]
    Other,
}

/// The visitors take JSON objects only: serde's derived ones would also take an array, by
/// position, and read `["/x"]` as a `linux` whose cgroupsPath is `/x`. `hooks` is kept only when
/// the caller asks ([`Hooks::Read`]): the hook itself never builds it.
struct DocVisitor(Hooks);

/// See [`DocVisitor`].
struct LinuxVisitor;

impl<'de> Visitor<'de> for DocVisitor {
    type Value = Doc;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object (an OCI runtime spec)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Doc, A::Error> {
        let mut doc = Doc::default();
        while let Some(key) = map.next_key()? {
            match key {
                Key::Annotations => doc.annotations = map.next_value()?,
                Key::Linux => doc.linux = map.next_value()?,
                Key::Hooks if self.0 == Hooks::Read => doc.hooks = map.next_value()?,
                Key::Hooks => drop(map.next_value::<IgnoredAny>()?),
                Key::CgroupsPath | Key::Other => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok(doc)
    }
}

impl<'de> Visitor<'de> for LinuxVisitor {
    type Value = Linux;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`linux` to be an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Linux, A::Error> {
        let mut linux = Linux::default();
        while let Some(key) = map.next_key()? {
            match key {
                Key::CgroupsPath => linux.cgroups_path = map.next_value()?,
                Key::Annotations | Key::Linux | Key::Hooks | Key::Other => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok(linux)
    }
}

/// A [`Doc`] read as its [`Hooks`] says.
struct DocSeed(Hooks);

impl<'de> DeserializeSeed<'de> for DocSeed {
    type Value = Doc;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Doc, D::Error> {
        d.deserialize_map(DocVisitor(self.0))
    }
}

impl<'de> Deserialize<'de> for Linux {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(LinuxVisitor)
    }
}

/// At most 80 characters of a user-controlled string, for messages.
fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}

/// Whether a read looks into `hooks` ([`BundleConfig::names_hook`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hooks {
    /// Skipped, `names_hook` false (the hook's own read: it knows it runs).
    Skip,
    /// Read (the runtimes' state, for the escape rule).
    Read,
}

/// Reads at most [`MAX_CONFIG_BYTES`] of `path` (one open, one read) and parses it.
pub fn read(path: &Path) -> Result<BundleConfig, BundleError> {
    read_with(path, Hooks::Skip)
}

/// [`read`], `hooks` looked into as `hooks` says.
pub fn read_with(path: &Path, hooks: Hooks) -> Result<BundleConfig, BundleError> {
    let read_err = |cause| BundleError::Read { path: path.to_path_buf(), cause };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1).read_to_end(&mut bytes).map_err(read_err)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(BundleError::TooLarge { path: path.to_path_buf() });
    }
    parse_with(path, &bytes, hooks)
}

/// Parses a `config.json` document; `path` only names it in errors.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<BundleConfig, BundleError> {
    parse_with(path, bytes, Hooks::Skip)
}

/// [`parse`], `hooks` looked into as `hooks` says.
pub fn parse_with(path: &Path, bytes: &[u8], hooks: Hooks) -> Result<BundleConfig, BundleError> {
    let json = |cause| BundleError::Json { path: path.to_path_buf(), cause };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let doc = DocSeed(hooks).deserialize(&mut de).map_err(json)?;
    de.end().map_err(json)?;
    let field = |field, problem: String| BundleError::Field { path: path.to_path_buf(), field, problem };
    let annotations = match doc.annotations {
        None => BTreeMap::new(),
        Some(Value::Object(map)) => {
            let mut out = BTreeMap::new();
            for (k, v) in map {
                let Value::String(v) = v else {
                    return Err(field("annotations", format!("has a non-string value for key {:?}", clip(&k))));
                };
                out.insert(k, v);
            }
            out
        }
        Some(_) => return Err(field("annotations", "is not an object".into())),
    };
    let cgroups_path = match doc.linux.and_then(|l| l.cgroups_path) {
        None => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err(field("linux.cgroupsPath", "is not a string".into())),
    };
    let names_hook = doc.hooks.as_ref().is_some_and(names_hook);
    Ok(BundleConfig { annotations, cgroups_path, names_hook })
}

/// This program's name: the file name of its path in a hook entry, or the entry's `args[0]`.
pub const HOOK_NAME: &str = "oci-coresched-hook";

/// Whether a spec's `hooks` runs this hook's `hook` command (an argument `hook` after the
/// program's name, options such as `--config` before it) at a stage that gives the cookie
/// (`createRuntime`, `prestart` or `poststart`): the container's own hook ran, or was to run, for
/// it. Anything else in `hooks` (another program, a malformed entry) is only not this hook.
pub fn names_hook(hooks: &Value) -> bool {
    ["createRuntime", "prestart", "poststart"].iter().filter_map(|stage| hooks.get(stage)?.as_array()).flatten().any(
        |h| {
            let named = |v: Option<&Value>| {
                v.and_then(Value::as_str).is_some_and(|p| Path::new(p).file_name().is_some_and(|f| f == HOOK_NAME))
            };
            let args = h.get("args").and_then(Value::as_array);
            let arg = |i: usize| args.and_then(|a| a.get(i)).and_then(Value::as_str);
            let runs_hook = args.is_some_and(|a| a.iter().skip(1).any(|v| v.as_str() == Some("hook")));
            (named(h.get("path")) || arg(0) == Some(HOOK_NAME)) && runs_hook
        },
    )
}

#[cfg(test)]
#[path = "bundle_tests.rs"]
mod tests;
