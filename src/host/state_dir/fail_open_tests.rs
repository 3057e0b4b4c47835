use std::os::unix::fs::PermissionsExt;

use super::*;

#[test]
fn each_fail_open_adds_one_to_its_reason_and_the_count_survives() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    assert!(counts(dir).unwrap().values().all(|c| *c == 0), "no ledger yet: every reason 0");
    record(dir, FailureReason::LockTimeout).unwrap();
    record(dir, FailureReason::LockTimeout).unwrap();
    record(dir, FailureReason::Config).unwrap();
    let c = counts(dir).unwrap();
    assert_eq!(c[&FailureReason::LockTimeout], 2);
    assert_eq!(c[&FailureReason::Config], 1);
    assert_eq!(c[&FailureReason::StateDir], 0);
    assert_eq!(c.len(), FailureReason::ALL.len(), "every reason is listed");
    let mode = std::fs::metadata(dir.join(DIR)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn a_symlinked_ledger_or_a_missing_state_dir_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let state = tmp.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::os::unix::fs::symlink(&elsewhere, state.join(DIR)).unwrap();
    let e = record(&state, FailureReason::Kernel).unwrap_err();
    assert!(matches!(e, LedgerError::NotOurs { .. }), "{e}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "nothing written through the link");

    let e = record(&tmp.path().join("missing"), FailureReason::Kernel).unwrap_err();
    assert!(e.to_string().starts_with("failed to use the fail-open ledger"), "{e}");
    assert!(!tmp.path().join("missing").exists(), "the state dir is not created");

    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    assert!(matches!(record(&link, FailureReason::Kernel), Err(LedgerError::NotOurs { .. })));
}
