//! The unit tests of `src/exit_codes.rs`.

use super::*;

#[test]
fn help_lists_every_code_once_in_order() {
    let listed: Vec<u8> =
        HELP.lines().filter_map(|l| l.trim_start().split_once("  ").and_then(|(n, _)| n.parse().ok())).collect();
    let codes: Vec<u8> = ExitCode::ALL.iter().map(|c| c.code()).collect();
    assert_eq!(listed, codes);
}
