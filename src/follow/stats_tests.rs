//! The unit tests of `src/follow/stats.rs`.

use super::*;

#[test]
fn the_histogram_is_cumulative_and_counts_every_window() {
    let mut s = Stats::default();
    for w in [0.00005, 0.0003, 0.0003, 0.02, 50.0] {
        s.window(w);
    }
    let text = s.render();
    assert!(text.contains("oci_coresched_hook_follow_window_seconds_bucket{le=\"0.0001\"} 1\n"), "{text}");
    assert!(text.contains("oci_coresched_hook_follow_window_seconds_bucket{le=\"0.0005\"} 3\n"), "{text}");
    assert!(text.contains("oci_coresched_hook_follow_window_seconds_bucket{le=\"10\"} 4\n"), "{text}");
    assert!(text.contains("oci_coresched_hook_follow_window_seconds_bucket{le=\"+Inf\"} 5\n"), "{text}");
    assert!(text.contains("oci_coresched_hook_follow_window_seconds_count 5\n"), "{text}");
    assert!(text.contains("oci_coresched_hook_follow_window_max_seconds 50\n"), "{text}");
    assert!(text.contains("oci_coresched_hook_follow_events_enabled 0\n"));
    // Every family has HELP and TYPE once.
    for line in text.lines().filter(|l| l.starts_with("# TYPE")) {
        let name = line.split(' ').nth(2).unwrap();
        assert_eq!(text.matches(&format!("# TYPE {name} ")).count(), 1, "{name}");
    }
}
