//! Independent oracles for the fuzz targets: the rules of ARCHITECTURE.md (§4, "Group resolution") written
//! again, deliberately not by calling the code under test, so a target can check what the decision
//! must be and not only that it did not panic.

use std::collections::BTreeMap;

/// 1..=max characters of `[A-Za-z0-9._-]`, the first alphanumeric (container ids, pod ids).
pub fn valid_id(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
        && s.as_bytes()[0].is_ascii_alphanumeric()
}

/// A group name: an id of at most 63 characters that also ends alphanumeric.
pub fn valid_group(s: &str) -> bool {
    valid_id(s, 63) && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

/// A DNS label (a Kubernetes namespace).
pub fn valid_namespace(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The value of the first of `keys` present (an empty value counts).
pub fn first<'a>(ann: &'a BTreeMap<String, String>, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| ann.get(*k)).map(String::as_str)
}

/// The value of the first of `keys` present and non-empty.
pub fn first_set<'a>(ann: &'a BTreeMap<String, String>, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| ann.get(*k).filter(|v| !v.is_empty())).map(String::as_str)
}

/// Whether a group key (without its namespace prefix) is well formed: a valid named group
/// (optionally `-expeller`), or `pod:` / `exclusive:` / `container:` + a valid id (optionally
/// `:expeller`).
pub fn valid_key(key: &str) -> bool {
    for prefix in ["pod:", "exclusive:", "container:"] {
        if let Some(id) = key.strip_prefix(prefix) {
            let id = id.strip_suffix(":expeller").unwrap_or(id);
            return valid_id(id, 128);
        }
    }
    let name = key.strip_suffix("-expeller").filter(|n| valid_group(n)).unwrap_or(key);
    valid_group(name)
}
