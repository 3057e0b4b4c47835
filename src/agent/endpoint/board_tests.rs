//! The unit tests of `src/agent/endpoint/board.rs`.

use super::*;

#[test]
fn pages_follow_what_the_owner_sets() {
    let b = Board::with_stuck_after("starting", Duration::from_millis(50));
    assert_eq!(b.page("/readyz").status, 503);
    assert_eq!(&*b.page("/readyz").body, "not ready: starting\n");
    b.set_ready(Ok(()));
    assert_eq!(b.page("/readyz").status, 200);
    b.set_metrics("a 1\n".into());
    let m = b.page("/metrics");
    assert_eq!((m.status, m.content_type, &*m.body), (200, PROMETHEUS_TEXT, "a 1\n"));
    assert_eq!(b.page("/nope").status, 404);
    b.beat();
    assert_eq!(b.page("/healthz").status, 200);
    std::thread::sleep(Duration::from_millis(120));
    let h = b.page("/healthz");
    assert_eq!(h.status, 503, "{}", h.body);
    assert!(h.body.starts_with("stuck: the main loop last ran"), "{}", h.body);
    b.beat();
    assert_eq!(b.page("/healthz").status, 200);
}

#[test]
fn a_note_about_the_node_rides_on_a_ready_answer_only() {
    let b = Board::new("starting");
    b.set_note(Some("this node cannot isolate: why"));
    assert_eq!(&*b.page("/readyz").body, "not ready: starting\n");
    b.set_ready(Ok(()));
    let r = b.page("/readyz");
    assert_eq!((r.status, &*r.body), (200, "ready; this node cannot isolate: why\n"));
    b.set_note(None);
    assert_eq!(&*b.page("/readyz").body, "ready\n");
}
