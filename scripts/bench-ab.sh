#!/usr/bin/env bash
# The hook's rows of `make bench`, A/B against an earlier commit (make bench-ab BASE=<commit>):
# both builds as the package builds them (static-pie, pack-relative-relocs, release) with the fake
# kernel, timed by benches/process.rs (the share, create, lifecycle and floor scenarios) in
# alternating rounds: base, this tree, base, this tree. The base is built from a git worktree
# under target/bench-ab/<commit>, kept and reused (keyed by the commit). Prints each round's rows
# prefixed by its side and round; the lines for a scenario side by side are the A/B.
#
#   BASE (a commit, required), OCH_BENCH_RUNS (timed runs per scenario, default 200),
#   OCH_AB_ROUNDS (default 2), OCH_BENCH_ONLY (default share,create,lifecycle,floor)
set -euo pipefail
cd "$(dirname "$0")/.."

base=${BASE:?set BASE to the commit to compare with}
commit=$(git rev-parse --verify "$base^{commit}")
triple=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static -C link-arg=-Wl,-z,pack-relative-relocs"
args=(--locked --features fake-kernel --target "$triple")
root=$PWD
tree=$root/target/bench-ab/$commit
if [[ ! -x $tree/bin/oci-coresched-hook ]]; then
    rm -rf "$tree"
    mkdir -p "$tree"
    git worktree add --detach "$tree/src" "$commit" >&2
    (cd "$tree/src" && CARGO_TARGET_DIR=$root/target/bench-ab/target \
        cargo build --release "${args[@]}" --bin oci-coresched-hook)
    mkdir -p "$tree/bin"
    cp "$root/target/bench-ab/target/$triple/release/oci-coresched-hook" "$tree/bin/"
    git worktree remove --force "$tree/src"
fi
cargo build --release "${args[@]}" --bin oci-coresched-hook --example floor-empty --example floor-sqlite
# Both sides run from copies written now, alike, with the same floors beside them (benches/process.rs
# looks for them there): how a binary's pages came into the page cache (written, or read back from
# disk) moves its start-up by as much as 0.1x of /bin/true (BENCHMARKS.md, "One binary or two").
run=$root/target/bench-ab/run
rm -rf "$run"
for side in base this; do
    mkdir -p "$run/$side/examples"
    cp "$root/target/$triple/release/examples/floor-empty" "$root/target/$triple/release/examples/floor-sqlite" \
        "$run/$side/examples/"
done
cp "$tree/bin/oci-coresched-hook" "$run/base/"
cp "$root/target/$triple/release/oci-coresched-hook" "$run/this/"
a=$run/base/oci-coresched-hook
b=$run/this/oci-coresched-hook
out=$root/target/bench-ab/tables
mkdir -p "$out"
printf 'bench-ab: base %s (%s bytes) against this tree %s (%s bytes)\n' \
    "${commit:0:7}" "$(stat -c %s "$a")" "$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes)" \
    "$(stat -c %s "$b")"
rounds=${OCH_AB_ROUNDS:-2}
for ((r = 1; r <= rounds; r++)); do
    for which in a b; do
        bin=${!which}
        side=$([[ $which == a ]] && echo base || echo this)
        echo "== round $r, $side ==" >&2
        OCH_BENCH_HOOK=$bin OCH_BENCH_ONLY=${OCH_BENCH_ONLY:-share,create,lifecycle,floor} \
            cargo bench "${args[@]}" --bench process >"$out/$side-$r.txt"
        grep -E '^\| (share|create|lifecycle|floor)' "$out/$side-$r.txt" | sed "s/^/$side$r /"
    done
done
