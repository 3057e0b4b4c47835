#!/usr/bin/env bash
# `make bench-isolation`: isolation itself on the real CONFIG_SCHED_CORE kernel (the VM tier's
# guest, QEMU/TCG, two SMT siblings): tests/vm/isolation.sh with OCH_ISO_SECONDS (default 6) per
# measurement, and its pairs' figures written as the table between the isolation markers of
# BENCHMARKS.md. Needs root (the guest runs runc and crun) and the VM tier's kernel (built once,
# cached: tests/vm/vm.sh kernel).
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

tests/vm/vm.sh deps
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static -C link-arg=-Wl,-z,pack-relative-relocs" \
    cargo build --release --locked --target "$TRIPLE" --bin oci-coresched-hook --example corun
X=$(mktemp -d "${TMPDIR:-/tmp}/och-bench-isolation.XXXXXX")
trap 'rm -rf -- "$X"' EXIT
secs=${OCH_ISO_SECONDS:-6}
tests/vm/vm.sh run --timeout 1800 --xchg "$X" --env "OCH_ISO_SECONDS=$secs" --env "OCH_ISO_TABLE=/run/xchg/table.txt" \
    --env "OCH_BIN=$PWD/target/$TRIPLE/release/oci-coresched-hook" \
    --env "OCH_CORUN=$PWD/target/$TRIPLE/release/examples/corun" -- tests/vm/isolation.sh
[[ -s $X/table.txt ]] || { echo "bench-isolation: the guest wrote no table" >&2; exit 1; }
{
    echo "<!-- isolation-table: written by make bench-isolation, $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), ${secs} s per measurement -->"
    echo "| route | pair | wanted | both ran at once | control pair | measured |"
    echo "|---|---|---|---:|---:|---:|"
    awk -F'|' '{ want = ($3 == "together") ? ">= 50% of the control" : "<= 1%";
        printf "| %s | %s | %s | %.2f%% | %.2f%% | %s |\n", $1, $2, want, $4 * 100, $5 * 100, ($6 == 1 ? "once" : $6 " times") }' "$X/table.txt"
    echo "<!-- /isolation-table -->"
} >"$X/table.md"
python3 - "$X/table.md" BENCHMARKS.md <<'PY'
import re, sys
table, doc = open(sys.argv[1]).read(), open(sys.argv[2]).read()
new, n = re.subn(r"<!-- isolation-table.*?<!-- /isolation-table -->\n", lambda m: table, doc, flags=re.S)
if n != 1:
    sys.exit("bench-isolation: BENCHMARKS.md has no isolation-table markers")
open(sys.argv[2], "w").write(new)
PY
cat "$X/table.md"
echo "bench-isolation: the table is in BENCHMARKS.md" >&2
