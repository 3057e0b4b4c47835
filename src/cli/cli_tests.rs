use super::*;

#[test]
fn check_config_exit_codes_valid_defaults_invalid_unreadable() {
    let t = tempfile::tempdir().unwrap();
    let good = t.path().join("good.toml");
    std::fs::write(&good, "fail_closed = true\n").unwrap();
    assert_eq!(checked_config(&good, true).unwrap(), format!("{} is valid", good.display()));

    let absent = t.path().join("absent.toml");
    assert_eq!(
        checked_config(&absent, false).unwrap(),
        format!("no config file at {}: the defaults apply", absent.display()),
        "a missing default file is the defaults"
    );
    let (code, e) = checked_config(&absent, true).unwrap_err();
    assert_eq!(code, ExitCode::Usage, "an explicit file that is missing cannot be read");
    assert!(matches!(e, ConfigError::Read { .. }), "{e}");

    let bad = t.path().join("bad.toml");
    std::fs::write(&bad, "[qos.BE]\nsched_idel = true\n").unwrap();
    let (code, e) = checked_config(&bad, true).unwrap_err();
    assert_eq!(code, ExitCode::Failure);
    assert!(e.to_string().contains("unknown field `sched_idel`"), "{e}");
    std::fs::write(&bad, "lock_timeout_ms = 0\n").unwrap();
    let (code, e) = checked_config(&bad, false).unwrap_err();
    assert_eq!(code, ExitCode::Failure);
    assert!(e.to_string().contains("lock_timeout_ms 0"), "{e}");

    let (code, _) = checked_config(t.path(), false).unwrap_err();
    assert_eq!(code, ExitCode::Usage, "a directory cannot be read as a file");
}
