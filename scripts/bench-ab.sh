#!/usr/bin/env bash
# The hook's rows of `make bench`, A/B against earlier commits (make bench-ab BASE=<commit>, or
# several: BASE="0.1.0=0399814 01802f8", a label before '=' naming a side): every build as the
# package builds it (static-pie, pack-relative-relocs, release) with the fake kernel, timed by
# benches/process.rs (the share, create, lifecycle and floor scenarios) in alternating rounds: each
# base in the order given, then this tree, once per round. Each base is built from a git worktree
# under target/bench-ab/<commit>, kept and reused (keyed by the commit). Prints each round's rows
# prefixed by its side and round, then one markdown table of the medians and their ratios to the
# interleaved /bin/true, a column per side and round (target/bench-ab/tables/summary.md).
#
#   BASE (one or more commits, required), OCH_BENCH_RUNS (timed runs per scenario, default 200),
#   OCH_AB_ROUNDS (default 2), OCH_BENCH_ONLY (default share,create,lifecycle,floor)
set -euo pipefail
cd "$(dirname "$0")/.."

[[ -n ${BASE:-} ]] || { echo "bench-ab: set BASE to the commit(s) to compare with" >&2; exit 2; }
command -v python3 >/dev/null || { echo "bench-ab: python3 is missing (apt-get install python3)" >&2; exit 1; }
read -ra specs <<<"$BASE"
triple=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static -C link-arg=-Wl,-z,pack-relative-relocs"
args=(--locked --features fake-kernel --target "$triple")
root=$PWD

# build COMMIT: the binary of COMMIT under target/bench-ab/<commit>/bin, built once.
build() {
    local commit=$1 tree=$root/target/bench-ab/$1
    if [[ ! -x $tree/bin/oci-coresched-hook ]]; then
        rm -rf "$tree"
        mkdir -p "$tree"
        git worktree add --detach "$tree/src" "$commit" >&2
        (cd "$tree/src" && CARGO_TARGET_DIR=$root/target/bench-ab/target \
            cargo build --release "${args[@]}" --bin oci-coresched-hook) >&2
        mkdir -p "$tree/bin"
        cp "$root/target/bench-ab/target/$triple/release/oci-coresched-hook" "$tree/bin/"
        git worktree remove --force "$tree/src"
    fi
}

labels=() bins=() names=()
for spec in "${specs[@]}"; do
    label=${spec%%=*} rev=${spec#*=}
    commit=$(git rev-parse --verify "$rev^{commit}") || { echo "bench-ab: no commit $rev" >&2; exit 2; }
    [[ $spec == *=* ]] || label=${commit:0:7}
    build "$commit"
    labels+=("$label") bins+=("$root/target/bench-ab/$commit/bin/oci-coresched-hook") names+=("${commit:0:12}")
done
cargo build --release "${args[@]}" --bin oci-coresched-hook --example floor-empty --example floor-sqlite
# OCH_AB_ROUNDS=0 only builds (make bench-instructions): the last run's tables stay.
[[ ${OCH_AB_ROUNDS:-2} != 0 ]] || exit 0
labels+=("this") bins+=("$root/target/$triple/release/oci-coresched-hook")
names+=("$(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD || echo +changes)")

# Every side runs from a copy written now, alike, with the same floors beside it (benches/process.rs
# looks for them there): how a binary's pages came into the page cache (written, or read back from
# disk) moves its start-up by as much as 0.1x of /bin/true (BENCHMARKS.md, "One binary or two").
run=$root/target/bench-ab/run
rm -rf "$run"
for i in "${!labels[@]}"; do
    mkdir -p "$run/$i/examples"
    cp "$root/target/$triple/release/examples/floor-empty" "$root/target/$triple/release/examples/floor-sqlite" \
        "$run/$i/examples/"
    cp "${bins[$i]}" "$run/$i/"
    printf 'bench-ab: %s = commit %s (%s bytes)\n' "${labels[$i]}" "${names[$i]}" "$(stat -c %s "${bins[$i]}")"
done
out=$root/target/bench-ab/tables
rm -rf "$out"
mkdir -p "$out"
rounds=${OCH_AB_ROUNDS:-2}
for ((r = 1; r <= rounds; r++)); do
    for i in "${!labels[@]}"; do
        side=${labels[$i]}
        echo "== round $r, $side ==" >&2
        OCH_BENCH_HOOK=$run/$i/oci-coresched-hook OCH_BENCH_ONLY=${OCH_BENCH_ONLY:-share,create,lifecycle,floor} \
            cargo bench "${args[@]}" --bench process >"$out/$i-$r.txt"
        grep -E '^\| (share|create|lifecycle|floor)' "$out/$i-$r.txt" | awk -v p="$side, round $r " '{print p $0}'
    done
done

# One table: a row per scenario, the hook's median (ms) of each side and round.
python3 - "$out" "$rounds" "${labels[@]}" >"$out/summary.md" <<'PY'
import sys, pathlib
out, rounds, labels = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
rows, medians = [], {}
for i, label in enumerate(labels):
    for r in range(1, rounds + 1):
        for line in (out / f"{i}-{r}.txt").read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not line.startswith("| ") or len(cells) < 2 or cells[0] in ("scenario", "") or cells[0].startswith("-"):
                continue
            try:
                float(cells[1])
            except ValueError:
                continue
            if cells[0] not in rows:
                rows.append(cells[0])
            ratio = cells[4] if len(cells) > 4 else ""
            medians[(cells[0], i, r)] = f"{cells[1]} ({ratio})" if ratio else cells[1]
print("| scenario: median ms (ratio to the interleaved /bin/true) | " + " | ".join(f"{l}, round {r}" for l in labels for r in range(1, rounds + 1)) + " |")
print("|---|" + "---:|" * (len(labels) * rounds))
for row in rows:
    cells = [medians.get((row, i, r), "") for i in range(len(labels)) for r in range(1, rounds + 1)]
    print(f"| {row} | " + " | ".join(cells) + " |")
PY
cat "$out/summary.md"
