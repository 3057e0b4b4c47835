//! The unit tests of `src/exposition.rs`.

use super::*;

#[test]
fn label_escaping() {
    assert_eq!(escape_label(r#"a"b\c"#.to_owned().as_str()), r#"a\"b\\c"#);
    assert_eq!(escape_label("x\ny"), "x\\ny");
    assert_eq!(escape_label("plain ünï"), "plain ünï");
}

#[test]
fn help_escapes_backslash_and_line_feed_only() {
    assert_eq!(escape_help(r#"a "quoted" b\c"#), r#"a "quoted" b\\c"#);
    assert_eq!(escape_help("two\nlines"), "two\\nlines");
}

#[test]
fn a_family_is_its_help_and_type_lines() {
    let mut out = String::new();
    family(&mut out, "x_total", "counter", "Things, by kind.");
    assert_eq!(out, "# HELP x_total Things, by kind.\n# TYPE x_total counter\n");
}

#[test]
fn a_sample_is_one_line_with_escaped_labels_and_the_formats_values() {
    let mut out = String::new();
    sample(&mut out, "x", &[], 1.0);
    sample(&mut out, "x", &[("a", "1"), ("b", "q\"\\\n")], 0.25);
    sample(&mut out, "x", &[], f64::NAN);
    sample(&mut out, "x", &[], f64::INFINITY);
    sample(&mut out, "x", &[], f64::NEG_INFINITY);
    sample(&mut out, "x", &[], u64::MAX as f64);
    assert_eq!(out, "x 1\nx{a=\"1\",b=\"q\\\"\\\\\\n\"} 0.25\nx NaN\nx +Inf\nx -Inf\nx 18446744073709552000\n");
}
