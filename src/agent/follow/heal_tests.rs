//! The escape scan over the fake kernel: an escaped container is healed into its hook's group,
//! once; while the config cannot be parsed nothing is healed, and the first scan after the fix
//! heals.

use serde_json::json;

use super::*;
use crate::host::system::System;
use crate::ops::escapes::tests::{container, roots};
use crate::test_world::Ground;

const OURS: &str =
    r#"{"createRuntime": [{"path": "/usr/bin/oci-coresched-hook", "args": ["oci-coresched-hook", "hook"]}]}"#;

fn sys(g: &Ground) -> System<&crate::host::kernel::fake::FakeKernel> {
    System { runtime_roots: roots(g), ..g.sys(g.path("state")) }
}

#[test]
fn an_escaped_container_gets_its_groups_cookie_and_shares_it_with_its_group() {
    let g = Ground::new();
    let web = json!({"oci-coresched-hook/group": "web", "io.kubernetes.pod.namespace": "tenant-a"});
    container(&g, "a1", 100, OURS, web.clone());
    container(&g, "a2", 200, OURS, web);
    container(
        &g,
        "b1",
        300,
        OURS,
        json!({"oci-coresched-hook/group": "web", "io.kubernetes.pod.namespace": "tenant-b"}),
    );
    let mut h = Healer::new(g.path("config.toml"), false, Config::default());
    let s = sys(&g);
    assert_eq!(h.scan(&s).unwrap(), Healed { escaped: 0, healed: 3, failed: 0 });
    let cookie = |pid| g.kernel.get(pid).unwrap();
    assert_ne!(cookie(100), 0);
    assert_eq!(cookie(100), cookie(200), "one group, one cookie");
    assert_ne!(cookie(300), 0);
    assert_ne!(cookie(300), cookie(100), "another tenant's group never shares it");
    assert_eq!(h.scan(&s).unwrap(), Healed::default(), "healed once");
}

#[test]
fn nothing_is_healed_while_the_config_is_broken_and_the_fix_heals() {
    let g = Ground::new();
    let file = g.path("config.toml");
    std::fs::write(&file, "lock_timeout_ms = 1000\n").unwrap();
    let mut h = Healer::new(file.clone(), true, Config::default());
    std::fs::write(&file, "lock_timeout_ms = [\n").unwrap();
    container(&g, "a1", 100, OURS, json!({"oci-coresched-hook/group": "web"}));
    let s = sys(&g);
    assert_eq!(h.scan(&s).unwrap(), Healed { escaped: 1, healed: 0, failed: 0 });
    assert_eq!(g.kernel.get(100).unwrap(), 0);
    std::fs::write(&file, "lock_timeout_ms = 2000\n").unwrap();
    assert_eq!(h.scan(&s).unwrap(), Healed { escaped: 0, healed: 1, failed: 0 });
    assert_ne!(g.kernel.get(100).unwrap(), 0);
}

#[test]
fn a_held_lock_fails_the_heal_and_the_next_scan_heals() {
    let g = Ground::new();
    container(&g, "a1", 100, OURS, json!({}));
    container(&g, "a2", 200, OURS, json!({}));
    let mut h = Healer::new(g.path("config.toml"), false, Config { lock_timeout_ms: 50, ..Config::default() });
    let s = sys(&g);
    let dir = crate::host::state_dir::StateDir::open(&g.path("state")).unwrap();
    let held = dir.lock(std::time::Duration::from_millis(50)).unwrap();
    assert_eq!(h.scan(&s).unwrap(), Healed { escaped: 2, healed: 0, failed: 1 }, "one wait, not one per container");
    drop(held);
    assert_eq!(h.scan(&s).unwrap(), Healed { escaped: 0, healed: 2, failed: 0 });
}
