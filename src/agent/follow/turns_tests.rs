//! The follower's turn: the order of its clocks, seen on its page.

use super::*;
use crate::test_world::World;

fn options(w: &World) -> Options {
    Options {
        state_dir: w.path("state"),
        lock_timeout: Duration::from_secs(1),
        sweep_every: Duration::from_secs(60),
        cgroup_root: w.path("cg"),
        runtime_roots: Vec::new(),
        config: crate::config::Config::default(),
        listen: None,
    }
}

#[test]
fn a_turn_that_heals_shows_the_heal_beside_an_audit_run_after_it() {
    let w = World::new();
    let opts = options(&w);
    std::fs::create_dir_all(&opts.state_dir).unwrap();
    let board = Board::new(STARTING);
    let mut l = Loop::start(&opts, &w.kernel, &w.proc, board.clone(), true);
    // What the node holds: one escaped container, healed at the second scan; the audit counts it
    // as a violation while it is escaped.
    let healed = std::cell::Cell::new(false);
    let scans = std::cell::Cell::new(0);
    let mut heal = || {
        scans.set(scans.get() + 1);
        let now = scans.get() >= 2;
        healed.set(now);
        Ok::<_, String>(heal::Healed { escaped: usize::from(!now), healed: usize::from(now), failed: 0 })
    };
    let mut sweep = || Ok::<_, String>(Swept { fixed: 0, violations: Some(usize::from(!healed.get())) });
    let mut render = || Ok::<_, String>(String::new());
    let page = || board.page("/metrics").body.to_string();
    let gauge = |page: &str, name: &str| {
        page.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ').map(str::to_owned)).unwrap_or_default()
    };

    l.turn(&mut sweep, &mut heal, &mut render);
    let first = page();
    assert_eq!(gauge(&first, "oci_coresched_hook_escaped_containers"), "1", "{first}");
    assert_eq!(gauge(&first, "oci_coresched_hook_audit_violations"), "1", "{first}");
    // The next scan is due in 2 s, the sweep in a minute, the page in 10 s: only the scan is made due.
    l.next_heal = Instant::now();
    l.turn(&mut sweep, &mut heal, &mut render);
    let second = page();
    assert_eq!(scans.get(), 2);
    assert_eq!(gauge(&second, "oci_coresched_hook_escaped_containers"), "0", "{second}");
    assert_eq!(gauge(&second, "oci_coresched_hook_follow_escapes_healed_total"), "1", "{second}");
    assert_eq!(gauge(&second, "oci_coresched_hook_audit_violations"), "0", "{second}");
    assert_eq!(gauge(&second, "oci_coresched_hook_audit_up"), "1", "{second}");
}
