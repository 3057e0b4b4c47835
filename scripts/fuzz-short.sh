#!/usr/bin/env bash
# Bounded fuzzing of oci-coresched-hook: each cargo-fuzz target under fuzz/ runs for
# FUZZ_SECONDS (default 20) from the committed seeds in fuzz/corpus/<target> (real runc / crun /
# podman states, configs), with its dictionary. Inputs libFuzzer finds go to fuzz/corpus-run/
# (ignored by git). Any crash or failed property fails the script; the reproducer is kept in
# fuzz/artifacts/<target>/ and the log in fuzz/logs/<target>.log. Prints executions per target.
#
#   scripts/fuzz-short.sh                 # CI: ~20 s per target
#   FUZZ_SECONDS=600 scripts/fuzz-short.sh  # longer (`make fuzz`)
#   scripts/fuzz-short.sh decision        # one target
#
# Needs cargo, cargo-fuzz (installed here if missing) and a C++ compiler for libFuzzer (Debian:
# g++, which scripts/test-all.sh installs); libFuzzer's sanitizer flags are nightly-only, so on a
# stable toolchain RUSTC_BOOTSTRAP=1 is set for the fuzz build only.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."
. scripts/need-cargo.sh
cd fuzz

if ! command -v "${CXX:-c++}" >/dev/null 2>&1; then
    echo "fuzz-short: no C++ compiler (${CXX:-c++}) to build libFuzzer: apt-get install g++" >&2
    exit 1
fi

SECONDS_PER_TARGET=${FUZZ_SECONDS:-20}
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(state_json decision config)

if ! cargo fuzz --help >/dev/null 2>&1; then
    echo "fuzz-short: installing cargo-fuzz" >&2
    cargo install --locked cargo-fuzz >/dev/null
fi
if ! rustc --version | grep -q nightly; then
    export RUSTC_BOOTSTRAP=1
fi

mkdir -p logs
cargo fuzz build -O >logs/build.log 2>&1 || { cat logs/build.log >&2; exit 1; }
status=0
for t in "${TARGETS[@]}"; do
    mkdir -p "corpus-run/$t" "artifacts/$t"
    log=logs/$t.log
    if cargo fuzz run -O "$t" "corpus-run/$t" "corpus/$t" -- \
        -dict="dicts/$t.dict" -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        echo "fuzz $t: ok, ${execs:-?} executions in ${SECONDS_PER_TARGET} s, 0 crashes"
    else
        status=1
        echo "fuzz $t: FAILED (log: fuzz/$log; reproducer in fuzz/artifacts/$t/)" >&2
        grep -E "panicked at|assertion|Test unit written|SUMMARY" "$log" | head -20 >&2 || tail -40 "$log" >&2
    fi
done
exit "$status"
