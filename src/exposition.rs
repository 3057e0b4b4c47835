//! The Prometheus text exposition format (0.0.4), as a writer: a family's `# HELP` and `# TYPE`
//! lines ([`family`]), one sample line ([`sample`]) with its label values escaped
//! ([`escape_label`]) and its value spelled as the format wants (`NaN`, `+Inf`, `-Inf`, finite
//! values without an exponent). Format only, a leaf: it names no family of this project and
//! nothing of the crate. `ops::metrics` and `ops::forced_idle`, the NRI plugin's page
//! (`agent::nri::status`) and the follower's (`agent::follow::stats`) write with it.

use std::fmt::Write as _;

/// Escapes a label value: backslash, double quote and line feed.
pub fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Escapes a `# HELP` text: backslash and line feed (a double quote stays as it is).
pub fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Appends a family's `# HELP name help` and `# TYPE name kind` lines to `out`.
pub fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Appends one sample line to `out`: `name{k="v",…} value`, the braces left out without labels.
pub fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape_label(v));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {}", value_text(value));
}

/// A sample's value as the format spells it.
fn value_text(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else {
        // Rust prints finite floats without exponent and parseably (e.g. 18446744073709552000).
        format!("{v}")
    }
}

#[cfg(test)]
#[path = "exposition_tests.rs"]
mod tests;
