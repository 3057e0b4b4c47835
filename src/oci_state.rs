//! The OCI state a runtime writes to a hook's stdin, parsed tolerantly: runc, crun, youki and
//! podman disagree on `status` names, on `pid` (absent, `0`, or the dead init) and on extra keys,
//! so only what we use is read, and each field gets a precise error when it is malformed.

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
mod tests {
    use super::*;

    #[test]
    fn runc_poststop_has_no_pid() {
        let s = parse_state(br#"{"ociVersion":"1.0.2","id":"c1","status":"stopped","bundle":"/b"}"#).unwrap();
        assert_eq!(s.pid, None);
        assert_eq!(s.status, "stopped");
        assert_eq!(s.bundle.as_deref(), Some(std::path::Path::new("/b")));
    }

    #[test]
    fn crun_starting_and_extra_keys_are_accepted() {
        let s = parse_state(
            br#"{"ociVersion":"1.0","id":"c","pid":0,"root":"/x","status":"starting","bundle":"/b","created":"2026"}"#,
        )
        .unwrap();
        assert_eq!(s.pid, Some(0));
        assert_eq!(s.status, "starting");
    }

    #[test]
    fn bad_fields_name_the_field() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "empty"),
            (b"   \n", "empty"),
            (b"[1]", "JSON object"),
            (b"{", "not valid JSON"),
            (br#"{"status":"created"}"#, "`id` is missing"),
            (br#"{"id":"","status":"created"}"#, "`id` is empty"),
            (br#"{"id":1,"status":"created"}"#, "`id` is not a string"),
            (br#"{"id":"a"}"#, "`status` is missing"),
            (br#"{"id":"a","status":"created","pid":-3}"#, "negative"),
            (br#"{"id":"a","status":"created","pid":99999999999}"#, "out of range"),
            (br#"{"id":"a","status":"created","pid":1.5}"#, "not an integer"),
            (br#"{"id":"a","status":"created","pid":"7"}"#, "not a number"),
            (br#"{"id":"a","status":"created","annotations":{"k":1}}"#, "non-string value for key \"k\""),
            (br#"{"id":"a","status":"created","annotations":[]}"#, "not an object"),
        ];
        for (input, want) in cases {
            let err = parse_state(input).unwrap_err().to_string();
            assert!(err.contains(want), "input {:?}: error {err:?} lacks {want:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn messages_are_bounded_and_say_it_once() {
        let doc = format!(r#"{{"id":"a","status":"created","annotations":{{"{}":1}}}}"#, "k".repeat(100_000));
        let err = parse_state(doc.as_bytes()).unwrap_err().to_string();
        assert!(err.len() < 200, "{} bytes", err.len());
        let err = anyhow::Error::from(parse_state(b"{").unwrap_err());
        let chain = format!("{err:#}");
        assert_eq!(chain.matches("EOF while parsing").count(), 1, "{chain}");
    }

    #[test]
    fn input_is_bounded() {
        let big = vec![b' '; (MAX_STATE_BYTES + 10) as usize];
        assert!(matches!(read_state(&big[..]), Err(StateError::TooLarge)));
    }
}
