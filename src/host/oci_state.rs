//! The OCI state a runtime writes to a hook's stdin, parsed tolerantly: runc, crun, youki and
//! podman disagree on `status` names, on `pid` (absent, `0`, or the dead init) and on extra keys,
//! so only what we use is read, and each field gets a precise error when it is malformed.
//!
//! At most [`MAX_STATE_BYTES`] are read; `pid` must lie between 0 and `i32::MAX`; messages clip the
//! strings they quote.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;

use serde_json::Value;

/// Largest state accepted on stdin or from a file.
pub const MAX_STATE_BYTES: u64 = 1024 * 1024;

/// Why a state could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Reading the input failed. (No `#[source]`: the message already ends with the cause, and
    /// `{:#}` would print it twice.)
    #[error("failed to read OCI state: {0}")]
    Read(std::io::Error),
    /// More than [`MAX_STATE_BYTES`].
    #[error("OCI state is larger than the {MAX_STATE_BYTES}-byte limit")]
    TooLarge,
    /// Nothing at all.
    #[error("OCI state is empty (expected a JSON object on stdin)")]
    Empty,
    /// Not JSON. (No `#[source]`, as for `Read`.)
    #[error("OCI state is not valid JSON: {0}")]
    Json(serde_json::Error),
    /// A field is missing or has the wrong type or value.
    #[error("OCI state field `{field}` {problem}")]
    Field {
        /// The field's name.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

impl From<std::io::Error> for StateError {
    fn from(e: std::io::Error) -> Self {
        StateError::Read(e)
    }
}

impl From<serde_json::Error> for StateError {
    fn from(e: serde_json::Error) -> Self {
        StateError::Json(e)
    }
}

/// At most 80 characters of a user-controlled string, for messages.
fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}

fn field(field: &'static str, problem: impl Into<String>) -> StateError {
    StateError::Field { field, problem: problem.into() }
}

/// The parts of an OCI state the hook uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// Container id.
    pub id: String,
    /// Runtime status as given (`creating`, `created`, `running`, `stopped`, `starting`, …).
    pub status: String,
    /// Init pid in the runtime's pid namespace; `None` when absent.
    pub pid: Option<i64>,
    /// Bundle directory holding `config.json`.
    pub bundle: Option<PathBuf>,
    /// Annotations from the state (runtimes copy the config's annotations here).
    pub annotations: BTreeMap<String, String>,
}

/// Reads at most [`MAX_STATE_BYTES`] from `input` and parses it.
pub fn read_state(input: impl Read) -> Result<State, StateError> {
    let mut buf = Vec::new();
    input.take(MAX_STATE_BYTES + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > MAX_STATE_BYTES {
        return Err(StateError::TooLarge);
    }
    parse_state(&buf)
}

/// Parses a state document.
pub fn parse_state(bytes: &[u8]) -> Result<State, StateError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(StateError::Empty);
    }
    let value: Value = serde_json::from_slice(bytes)?;
    let Value::Object(obj) = value else {
        return Err(field("(document)", "must be a JSON object"));
    };
    let id = match obj.get("id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) => return Err(field("id", "is empty")),
        Some(_) => return Err(field("id", "is not a string")),
        None => return Err(field("id", "is missing")),
    };
    let status = match obj.get("status") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(field("status", "is not a string")),
        None => return Err(field("status", "is missing")),
    };
    let pid = match obj.get("pid") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_i64() {
            Some(p) if p < 0 => return Err(field("pid", format!("is negative ({p})"))),
            Some(p) if p > i64::from(i32::MAX) => return Err(field("pid", format!("is out of range ({p})"))),
            Some(p) => Some(p),
            None => return Err(field("pid", format!("is not an integer pid ({n})"))),
        },
        Some(_) => return Err(field("pid", "is not a number")),
    };
    let bundle = match obj.get("bundle") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(PathBuf::from(s)),
        Some(_) => return Err(field("bundle", "is not a string")),
    };
    let annotations = match obj.get("annotations") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(map)) => {
            let mut out = BTreeMap::new();
            for (k, v) in map {
                match v {
                    Value::String(s) => {
                        out.insert(k.clone(), s.clone());
                    }
                    _ => {
                        return Err(field("annotations", format!("has a non-string value for key {:?}", clip(k))));
                    }
                }
            }
            out
        }
        Some(_) => return Err(field("annotations", "is not an object")),
    };
    Ok(State { id, status, pid, bundle, annotations })
}

#[cfg(test)]
#[path = "oci_state_tests.rs"]
mod tests;
