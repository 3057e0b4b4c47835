//! The unit tests of `src/config.rs`.

use super::*;

fn parse(s: &str) -> Result<Config, ConfigError> {
    Config::parse(s, Path::new("/etc/x.toml"))
}

#[test]
fn empty_is_defaults() {
    assert_eq!(parse("").unwrap(), Config::default());
    assert_eq!(Config::default().rule(QosClass::Be), QosRule::default());
}

#[test]
fn full_file() {
    let c = parse(
        "fail_closed = true\nlock_timeout_ms = 500\nlog_level = \"debug\"\nsyslog = false\n\
             log_file = \"/var/log/h.log\"\nallow_cross_namespace_groups = true\n\
             [qos.BE]\nenable = true\nsched_idle = true\n[qos.LS]\ncore_expeller = true\n",
    )
    .unwrap();
    assert!(c.fail_closed && c.allow_cross_namespace_groups && !c.syslog);
    assert_eq!(c.lock_timeout(), Duration::from_millis(500));
    assert!(c.rule(QosClass::Be).sched_idle && !c.rule(QosClass::Be).core_expeller);
    assert!(c.rule(QosClass::Ls).core_expeller && c.rule(QosClass::Ls).enable);
}

#[test]
fn errors_name_the_problem() {
    let cases = [
        ("fail_closed = tru", "invalid config file /etc/x.toml"),
        ("fail_close = true", "fail_close"),
        ("fail_closed = \"yes\"", "fail_closed"),
        ("lock_timeout_ms = 0", "between 1 and 60000"),
        ("log_level = \"loud\"", "\"loud\""),
        ("[qos.SYSTEM]\nenable = true", "SYSTEM"),
        ("[qos.BE]\nidle = true", "idle"),
    ];
    for (text, want) in cases {
        let err = parse(text).unwrap_err().to_string();
        assert!(err.contains(want), "{text:?}: {err:?} lacks {want:?}");
    }
}

#[test]
fn missing_default_file_is_defaults_but_explicit_is_an_error() {
    let p = Path::new("/nonexistent/oci-coresched-hook.toml");
    assert_eq!(Config::load(p, false).unwrap(), Config::default());
    assert!(Config::load(p, true).unwrap_err().to_string().contains("failed to read config file"));
}

#[test]
fn broken_file_keeps_fail_closed() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    std::fs::write(&p, "fail_closed = true # keep\nlog_level = [\n").unwrap();
    assert!(parse(&std::fs::read_to_string(&p).unwrap()).is_err());
    assert!(broken_config_wants_fail_closed(&p));
    std::fs::write(&p, "# fail_closed = true\nlog_level = [\n").unwrap();
    assert!(!broken_config_wants_fail_closed(&p));
    // Every spelling TOML allows for the key (found by the config fuzz target), and a file
    // that is not even UTF-8.
    for text in ["\"fail_closed\" = true", "'fail_closed' = true", "\"fail\\u005fclosed\" = true", "fail_closed=true"] {
        let broken = format!("{text}\nlog_level = [\n");
        assert!(parse(text).unwrap().fail_closed, "{text}");
        assert!(text_wants_fail_closed(&broken), "{broken:?}");
    }
    std::fs::write(&p, b"fail_closed = true\nlog_file = \"\xff\"\n").unwrap();
    assert!(broken_config_wants_fail_closed(&p));
    assert!(!text_wants_fail_closed("fail_closed = false\nx = [\n"));
}
