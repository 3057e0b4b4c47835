//! Benchmark floor (`make bench`): the least a Rust hook can cost. It reads the OCI state from
//! stdin, as every hook must, and exits. Built like the hook (static-pie, same profile), so the
//! difference to `/bin/true` is process start of a Rust binary of this kind, not hook work.

use std::io::Read;

fn main() {
    let mut state = Vec::new();
    std::io::stdin().read_to_end(&mut state).expect("read stdin");
    assert!(!state.is_empty(), "floor-empty: no state on stdin");
}
