//! The unit tests of `src/agent/nri/ignored.rs`.

use super::*;

#[test]
fn a_burst_is_logged_then_counted_and_summed_up_once() {
    let mut ig = Ignored::default();
    let logged: Vec<bool> = (0..5).map(|_| ig.note(Kind::UnknownConn, log::Level::Warn, String::new)).collect();
    assert_eq!(logged, [true, true, true, false, false]);
    ig.note(Kind::UnknownCall, log::Level::Warn, String::new);
    let now = Instant::now();
    assert_eq!(ig.close(Kind::UnknownConn, now, false), None, "the window is still open");
    let line = ig.close(Kind::UnknownConn, now, true).expect("a summary");
    assert!(line.starts_with("ignored 5 NRI frames for connections nobody serves in the last "), "{line}");
    assert!(line.ends_with(" (the first 3 logged)"), "{line}");
    assert_eq!(ig.close(Kind::UnknownCall, now, true), None, "all of them were logged");
    assert_eq!(ig.close(Kind::UnknownConn, now, true), None, "closed once");
    assert!(ig.note(Kind::UnknownConn, log::Level::Warn, String::new), "a new window logs again");
}

#[test]
fn a_window_closes_after_its_time() {
    let mut ig = Ignored::default();
    for _ in 0..4 {
        ig.note(Kind::Oversize, log::Level::Error, String::new);
    }
    let later = Instant::now() + WINDOW;
    let line = ig.close(Kind::Oversize, later, false).expect("over");
    assert!(line.starts_with("ignored 4 ttrpc messages over the size limit in the last 60"), "{line}");
}
