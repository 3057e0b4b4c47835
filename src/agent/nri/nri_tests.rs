//! The unit tests of `src/agent/nri/mod.rs`.

use super::*;

#[test]
fn backoff_doubles_to_its_cap_and_resets() {
    let mut b = Backoff { first: Duration::from_secs(1), cap: Duration::from_secs(30), next: Duration::from_secs(1) };
    let steps: Vec<u64> = (0..7).map(|_| b.step().as_secs()).collect();
    assert_eq!(steps, [1, 2, 4, 8, 16, 30, 30]);
    b.reset();
    assert_eq!(b.step().as_secs(), 1);
}

#[test]
fn the_hint_names_both_runtimes_settings() {
    assert!(ENABLE_HINT.contains(r#"[plugins."io.containerd.nri.v1.nri"] disable = false"#));
    assert!(ENABLE_HINT.contains("/etc/containerd/config.toml"));
    assert!(ENABLE_HINT.contains("enable_nri = true"));
}
