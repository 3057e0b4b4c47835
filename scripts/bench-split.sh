#!/usr/bin/env bash
# One binary or two (make bench-split): the hook's stages timed as the shipped binary, which also
# holds the NRI plugin, the follower, the endpoint and the operator commands, against
# examples/hook-only.rs, the same library with only the hook reachable (what a hook-only binary of
# a two-binary package would be). Both are built as the package builds (static-pie, LTO) with the
# fake kernel, and timed by benches/process.rs (the share, create, lifecycle and floor scenarios)
# in alternating rounds: A, B, A, B. Prints each binary's size and each round's table; the rounds'
# lines for a scenario side by side are the A/B.
#
#   OCH_BENCH_RUNS (timed runs per scenario, default 200), OCH_SPLIT_ROUNDS (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."

triple=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static -C link-arg=-Wl,-z,pack-relative-relocs"
args=(--features fake-kernel --target "$triple")
cargo build --release "${args[@]}" --bin oci-coresched-hook --example hook-only --example floor-empty \
    --example floor-sqlite
a=target/$triple/release/oci-coresched-hook
b=target/$triple/release/examples/hook-only
out=target/bench-split
mkdir -p "$out"
printf 'bench-split: one binary (%s): %s bytes; hook only (%s): %s bytes\n' \
    "$a" "$(stat -c %s "$a")" "$b" "$(stat -c %s "$b")"
rounds=${OCH_SPLIT_ROUNDS:-2}
for ((r = 1; r <= rounds; r++)); do
    for which in a b; do
        bin=${!which}
        echo "== round $r, $([[ $which == a ]] && echo 'one binary' || echo 'hook only') ==" >&2
        OCH_BENCH_HOOK=$PWD/$bin OCH_BENCH_ONLY=share,create,lifecycle,floor \
            cargo bench "${args[@]}" --bench process >"$out/$which-$r.txt"
        grep -E '^\| (share|create|lifecycle|floor)' "$out/$which-$r.txt" | sed "s/^/$which$r /"
    done
done
