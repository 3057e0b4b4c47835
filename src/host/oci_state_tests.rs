//! The unit tests of `src/host/oci_state.rs`.

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
