use std::os::unix::fs::PermissionsExt;

use crate::config::Config;
use crate::ops::doctor::Level;
use crate::ops::doctor::tests::Fixture;

#[test]
fn the_config_is_valid_missing_or_invalid_naming_the_key() {
    let mut f = Fixture::new();
    let c = f.fact("config");
    assert_eq!((c.level, c.summary), (Level::Ok, format!("{} is valid", f.config_path.display())));
    f.config_path = f.g.path("not-there.toml");
    f.explicit = false;
    assert!(f.fact("config").summary.starts_with("no config file at "), "defaults");
    f.config_error = Some(Config::parse("[qos.LS]\nenabel = true\n", &f.config_path).unwrap_err());
    let c = f.fact("config");
    assert_eq!(c.level, Level::Fail);
    assert!(c.summary.contains("unknown field `enabel`") && c.summary.contains("fails open"), "{}", c.summary);
    f.config.fail_closed = true;
    assert!(f.fact("config").summary.contains("fails closed"));
}

#[test]
fn a_missing_state_dir_warns_and_nothing_is_created() {
    let mut f = Fixture::new();
    assert_eq!(f.fact("state_dir").level, Level::Ok);
    f.state_dir = f.g.path("mistyped");
    let s = f.fact("state_dir");
    assert_eq!(s.level, Level::Warn);
    assert!(s.summary.ends_with("no container has run the hook here yet, or --state-dir is mistyped"), "{}", s.summary);
    assert!(!f.state_dir.exists(), "doctor created the state dir");
    assert_eq!(f.report().exit_code, 1);
}

#[test]
fn an_unusable_or_unchosen_state_dir_fails() {
    let mut f = Fixture::new();
    std::fs::set_permissions(&f.state_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = f.fact("state_dir");
    assert_eq!(s.level, Level::Fail);
    assert!(s.summary.contains("lets other users in"), "{}", s.summary);
    f.state_dir_error = Some("failed to find a per-user state dir".into());
    assert_eq!(f.fact("state_dir").summary, "failed to find a per-user state dir");
}

#[test]
fn the_cache_is_current_absent_newer_or_damaged() {
    let f = Fixture::new();
    let c = f.fact("cache");
    assert_eq!(c.level, Level::Ok);
    assert!(c.summary.ends_with(&format!(
        "is current (format {}, revision {})",
        crate::store::FORMAT,
        crate::store::REVISION
    )));
    let db = f.state_dir.join("cache.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("PRAGMA user_version = 99;").unwrap();
    drop(conn);
    let c = f.fact("cache");
    assert!(c.level == Level::Warn && c.summary.contains("newer build"), "{c:?}");
    std::fs::write(&db, vec![1u8; 2048]).unwrap();
    let c = f.fact("cache");
    assert!(c.level == Level::Warn && c.summary.contains("moves it aside"), "{c:?}");
    assert_eq!(std::fs::read(&db).unwrap(), vec![1u8; 2048], "doctor changed the file");
    std::fs::remove_file(&db).unwrap();
    let c = f.fact("cache");
    assert!(c.level == Level::Info && c.summary.starts_with("no cache yet"), "{c:?}");
}
