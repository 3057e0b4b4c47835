#!/usr/bin/env bash
# The concurrency stress of tests/it/stress.rs on the real kernel (issue 7, item 4), meant for the
# VM guest (tests/vm/tier.sh runs it through `tests/vm/vm.sh run`): the hook binary built WITHOUT
# the fake kernel (target/debug/oci-coresched-hook from `cargo build --locked`, or $OCH_BIN) runs
# 200 times as separate processes, $OCH_STRESS_PARALLEL (default 8) at a time, for processes
# standing in for container inits:
#   phase 1: 100 containers in 10 groups start at once (per group one CREATE, nine SHAREs);
#   phase 2, shuffled: 30 of them stop (init killed, then poststop), 40 get their poststart,
#            30 new containers start.
# Then, with cookies read by prctl(PR_SCHED_CORE_GET) from Python (not through the hook): every
# group has exactly one cookie among its live members, equal to the cached one; no two groups share
# one; the cache lists exactly the live containers, once each; SQLite integrity_check is ok; the
# lock is free. Finally namespace scoping on the real kernel: a pod in tenant-b naming group g0
# gets another cookie than stress/g0, and one naming "stress/g0" gets a cookie of its own.
# Prints TAP-like lines and the time taken; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.."

BIN=${OCH_BIN:-$PWD/target/debug/oci-coresched-hook}
PAR=${OCH_STRESS_PARALLEL:-8}
[[ -x $BIN ]] || { echo "stress: $BIN is missing: run cargo build first" >&2; exit 2; }
PY=$(command -v /usr/bin/python3 || command -v python3)
start=$(date +%s.%N)

WORK=$(mktemp -d /tmp/och-stress.XXXXXX)
STATE=$WORK/state
mkdir -p "$WORK/ops"
printf 'syslog = false\nfail_closed = true\nlock_timeout_ms = 60000\nlog_level = "warn"\n' >"$WORK/config.toml"
printf 'syslog = false\nlog_level = "warn"\n' >"$WORK/open.toml"
declare -A PID GROUP
cleanup() {
    local p
    for p in "${PID[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

# Container inits: forked subshells blocked in the `read` builtin on a FIFO nobody writes to (a
# fork costs far less than an exec under TCG; each is its own single-threaded process).
mkfifo "$WORK/fifo"
exec 9<>"$WORK/fifo"
spawn() { # spawn ID GROUP
    (read -r -t 900 -u 9 _ || true) &
    PID[$1]=$!
    GROUP[$1]=$2
}

# One op per line: `ensure ID PID GROUP` or `forget ID`. Each becomes a state file; the hook reads
# it with `--state FILE` (the same parsing and decision as stdin, and any failure exits non-zero),
# started straight by xargs: under TCG every process start costs ~0.5 s, so no shell per hook.
state_file() { # state_file N OP ID [PID GROUP]
    local f=$WORK/states/$1.json
    if [[ $2 == ensure ]]; then
        printf '{"ociVersion":"1.0.2","id":"%s","status":"creating","pid":%s,"annotations":{"io.kubernetes.pod.namespace":"stress","oci-coresched-hook/group":"%s"}}' "$3" "$4" "$5" >"$f"
    else
        printf '{"ociVersion":"1.0.2","id":"%s","status":"stopped"}' "$3" >"$f"
    fi
    echo "$f"
}

run_ops() { # run_ops PHASE: every op of $WORK/PHASE concurrently, $PAR at a time
    local n=0 op id pid group
    mkdir -p "$WORK/states"
    while read -r op id pid group; do
        n=$((n + 1))
        state_file "$1-$n" "$op" "$id" "$pid" "$group"
    done <"$WORK/$1" >"$WORK/$1.files"
    if ! xargs -P "$PAR" -n 1 "$BIN" --config "$WORK/config.toml" --state-dir "$STATE" hook --state \
        <"$WORK/$1.files" 2>"$WORK/$1.err"; then
        echo "not ok - $1: a hook failed"; sed 's/^/#   /' "$WORK/$1.err" | head -20; return 1
    fi
    if [[ -s $WORK/$1.err ]]; then
        echo "not ok - $1: hooks logged warnings"; sed 's/^/#   /' "$WORK/$1.err" | head -20; return 1
    fi
    echo "ok - $1: $n hooks, $PAR at a time, all exited 0 without a warning"
}

: >"$WORK/phase1"
for i in $(seq 0 99); do
    id=$(printf 'c%03d' "$i")
    spawn "$id" "g$((i % 10))"
    echo "ensure $id ${PID[$id]} ${GROUP[$id]}" >>"$WORK/phase1"
done
run_ops phase1 || { echo "stress: phase 1 failed" >&2; exit 1; }
t1=$(date +%s.%N)
echo "# phase 1 done"

: >"$WORK/phase2"
for i in $(seq 0 3 87); do # 30 stops
    id=$(printf 'c%03d' "$i")
    kill -9 "${PID[$id]}"
    wait "${PID[$id]}" 2>/dev/null || true
    unset "PID[$id]" "GROUP[$id]"
    echo "forget $id" >>"$WORK/phase2"
done
n=0
for id in $(printf '%s\n' "${!PID[@]}" | sort | head -40); do # 40 poststarts
    echo "ensure $id ${PID[$id]} ${GROUP[$id]}" >>"$WORK/phase2"
    n=$((n + 1))
done
for i in $(seq 0 29); do # 30 new containers
    id=$(printf 'n%03d' "$i")
    spawn "$id" "g$(((i * 3) % 10))"
    echo "ensure $id ${PID[$id]} ${GROUP[$id]}" >>"$WORK/phase2"
done
yes | head -c 65536 >"$WORK/seed" || true # a fixed shuffle (no /dev/fd in the guest)
shuf --random-source="$WORK/seed" "$WORK/phase2" -o "$WORK/phase2"
total=$(($(wc -l <"$WORK/phase1") + $(wc -l <"$WORK/phase2")))
run_ops phase2 || { echo "stress: phase 2 failed" >&2; exit 1; }
t2=$(date +%s.%N)

# Expected: id pid group of every live container.
for id in "${!PID[@]}"; do echo "$id ${PID[$id]} stress/${GROUP[$id]}"; done | sort >"$WORK/expected"
"$BIN" --config "$WORK/open.toml" --state-dir "$STATE" --log-level off list --json >"$WORK/list.json"

verdict=0
"$PY" - "$WORK/expected" "$WORK/list.json" "$STATE" "$total" <<'PY' || verdict=$?
import ctypes, fcntl, json, sqlite3, sys
expected_file, list_file, state, total = sys.argv[1:]
libc = ctypes.CDLL(None, use_errno=True)
PR_SCHED_CORE, GET = 62, 0

def cookie(pid):
    c = ctypes.c_ulonglong(0)
    if libc.prctl(PR_SCHED_CORE, GET, pid, 0, ctypes.byref(c)) != 0:
        raise OSError(ctypes.get_errno(), f"prctl GET {pid}")
    return c.value

fails = []
def check(ok, what):
    print(("ok - " if ok else "not ok - ") + what)
    if not ok:
        fails.append(what)

expected = {l.split()[0]: (int(l.split()[1]), l.split()[2]) for l in open(expected_file) if l.strip()}
listing = json.load(open(list_file))
rows = [(g["group"], m["id"], m["pid"], m["live"], m["cookie_cached"]) for g in listing for m in g["members"]]
ids = [r[1] for r in rows]
check(len(ids) == len(set(ids)), f"no container cached twice ({len(ids)} rows)")
check(set(ids) == set(expected), f"the cache lists exactly the {len(expected)} live containers "
      f"(lost {sorted(set(expected) - set(ids))}, stale {sorted(set(ids) - set(expected))})")
by_group = {}
for group, cid, pid, live, cached in rows:
    want = expected.get(cid)
    if want != (pid, group):
        fails.append(f"{cid}: cached as pid {pid} in {group}, expected {want}")
    real = cookie(pid)
    if not live or real == 0 or hex(real) != cached:
        fails.append(f"{cid} (pid {pid}): live={live} kernel cookie {hex(real)} cached {cached}")
    by_group.setdefault(group, set()).add(real)
# Every live init, cached or not, has its group's cookie in the kernel.
for cid, (pid, group) in expected.items():
    by_group.setdefault(group, set()).add(cookie(pid))
check(not [f for f in fails if "cached as" in f or "kernel cookie" in f], "every cached member has the cached cookie in the kernel")
check(len(by_group) == 10 and all(len(c) == 1 for c in by_group.values()),
      f"10 groups with exactly one cookie each: { {g: [hex(x) for x in c] for g, c in sorted(by_group.items())} }")
cookies = [next(iter(c)) for c in by_group.values()]
check(len(set(cookies)) == len(cookies) and 0 not in cookies, "no two groups share a cookie, none is 0")
lock = open(f"{state}/lock", "w")
try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    check(True, "the state lock is free")
    db = sqlite3.connect(f"{state}/cache.db")
    check(db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "SQLite integrity_check is ok")
    db.close()
except BlockingIOError:
    check(False, "the state lock is free")
for f in fails[:20]:
    print("#   " + f)
print(f"# {total} hooks")
sys.exit(1 if fails else 0)
PY

# Namespace scoping on the real kernel.
ns_hook() { # ns_hook ID PID GROUP
    printf '{"ociVersion":"1.0.2","id":"%s","status":"creating","pid":%s,"annotations":{"io.kubernetes.pod.namespace":"tenant-b","oci-coresched-hook/group":"%s"}}' "$1" "$2" "$3" |
        "$BIN" --config "$WORK/open.toml" --state-dir "$STATE" --log-level off hook
}
spawn nsb g0
spawn nsx g0
ns_hook nsb "${PID[nsb]}" g0
ns_hook nsx "${PID[nsx]}" stress/g0
cookies=$("$PY" - "${PID[c010]}" "${PID[nsb]}" "${PID[nsx]}" <<'PY'
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
def cookie(pid):
    c = ctypes.c_ulonglong(0)
    assert libc.prctl(62, 0, int(pid), 0, ctypes.byref(c)) == 0, pid
    return hex(c.value)
print(*[cookie(p) for p in sys.argv[1:]])
PY
)
read -r g0 nsb nsx <<<"$cookies"
ns_ok=0
if [[ $nsb != "$g0" && $nsb != 0x0 ]]; then echo "ok - tenant-b naming group g0 gets another cookie ($nsb) than stress/g0 ($g0)"; else echo "not ok - tenant-b/g0 $nsb vs stress/g0 $g0"; ns_ok=1; fi
if [[ $nsx != "$g0" && $nsx != "$nsb" && $nsx != 0x0 ]]; then echo "ok - tenant-b naming \"stress/g0\" gets a cookie of its own ($nsx)"; else echo "not ok - tenant-b naming stress/g0 got $nsx (stress/g0 $g0)"; ns_ok=1; fi

end=$(date +%s.%N)
awk -v s="$start" -v a="$t1" -v b="$t2" -v e="$end" -v p="$PAR" 'BEGIN {
    printf "# stress: phase 1 (100 hooks) %.1f s, phase 2 (100 hooks) %.1f s, total %.1f s, %d at a time\n", a - s, b - a, e - s, p }'
if ((verdict != 0 || ns_ok != 0)); then
    echo "stress: FAILED (work dir $WORK)" >&2
    exit 1
fi
rm -rf "$WORK"
echo "stress: passed"
