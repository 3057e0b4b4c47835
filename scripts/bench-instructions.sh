#!/usr/bin/env bash
# The hook's stages counted in instructions, which the machine's load does not move
# (make bench-instructions [BASE="0.1.0=<commit> <commit>"]): each build as scripts/bench-ab.sh
# builds it (the package's flags, the fake kernel), each stage set up as benches/process.rs sets it
# up, by hand, then ONE run of the measured stage under `valgrind --tool=callgrind` (instructions)
# and once under `strace -f -c -U calls,name` (syscalls; strace 5.18 or later):
#   share      a container joining a group of 10 live members (createRuntime)
#   create     the first member of a new group
#   lifecycle  createRuntime, poststart and poststop of a container joining a group of 10
# Three warm-up containers come and go first; every run must exit 0, and the measured container's
# row must be in the cache afterwards. Prints one table, a column pair per build
# (target/bench-instructions/summary.md); each run's callgrind file stays beside it for
# callgrind_annotate.
#
#   BASE (optional: earlier commits, as for make bench-ab), OCH_BENCH_WARMUP (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in valgrind strace sqlite3; do
    command -v "$tool" >/dev/null || { echo "bench-instructions: $tool is missing (apt-get install $tool)" >&2; exit 1; }
done
root=$PWD
triple=$(rustc -vV | sed -n 's/^host: //p')
# The bases as bench-ab builds them (zero passes: build only), and this tree with the same flags.
[[ -z ${BASE:-} ]] || OCH_AB_ROUNDS=0 scripts/bench-ab.sh >/dev/null
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static -C link-arg=-Wl,-z,pack-relative-relocs" \
    cargo build --release --locked --features fake-kernel --target "$triple" --bin oci-coresched-hook
labels=() bins=()
read -ra specs <<<"${BASE:-}"
for spec in "${specs[@]}"; do
    label=${spec%%=*} commit=$(git rev-parse --verify "${spec#*=}^{commit}")
    [[ $spec == *=* ]] || label=${commit:0:7}
    labels+=("$label") bins+=("$root/target/bench-ab/$commit/bin/oci-coresched-hook")
done
labels+=("this") bins+=("$root/target/$triple/release/oci-coresched-hook")
out=$root/target/bench-instructions
rm -rf "$out"
mkdir -p "$out"
fixture=$root/tests/fixtures/states/runc-config.json
warmup=${OCH_BENCH_WARMUP:-3}

# scenario BIN NAME DIR TOOL: one scenario, its measured stage(s) under TOOL (callgrind | strace).
scenario() (
    bin=$1 name=$2 dir=$3 tool=$4
    work=$(mktemp -d /dev/shm/och-instructions-XXXXXX)
    pids=()
    trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"' EXIT
    mkdir -p "$dir" "$work/bundle"
    cp "$fixture" "$work/bundle/config.json"
    printf 'syslog = false\nlog_level = "warn"\nfail_closed = true\n' >"$work/config.toml"
    sleeper() { sleep 100000 </dev/null >/dev/null 2>&1 & pids+=($!); last=$!; }
    reap() { kill "$1"; wait "$1" 2>/dev/null || true; }
    state() { # ID STATUS PID|'' GROUP
        local pid=""
        [[ -n $3 ]] && pid="\"pid\":$3,"
        printf '{"ociVersion":"1.0.2","id":"%s","status":"%s",%s"bundle":"%s","annotations":{"oci-coresched-hook/group":"%s"}}' \
            "$1" "$2" "$pid" "$work/bundle" "$4"
    }
    hook() { # STAGE JSON [measured]
        local -a wrap=()
        if [[ -n ${3:-} ]]; then
            case $tool in
                callgrind) wrap=(valgrind --tool=callgrind --callgrind-out-file="$dir/$1.callgrind" --log-file="$dir/$1.valgrind") ;;
                strace) wrap=(strace -f -c -U calls,name -o "$dir/$1.strace") ;;
            esac
        fi
        printf '%s' "$2" | OCH_FAKE_KERNEL="$work/fake-kernel.json" "${wrap[@]}" "$bin" --config "$work/config.toml" \
            --state-dir "$work/state" hook 2>"$dir/$1.stderr" ||
            { echo "bench-instructions: $name: a hook run failed: $(cat "$dir/$1.stderr")" >&2; exit 1; }
    }
    row() { # ID: the container's row is in the cache (read without the hook, which would apply stops)
        [[ $(sqlite3 "file:$work/state/cache.db?immutable=1" "SELECT count(*) FROM members WHERE container_id = '$1'") == 1 ]] ||
            { echo "bench-instructions: $name: no row for $1 after its hook" >&2; exit 1; }
    }
    seed() { for i in $(seq 0 9); do sleeper; hook seed "$(state "live-$i" creating "$last" g)"; done; }
    case $name in
        share | create)
            [[ $name == share ]] && seed
            for i in $(seq 1 "$warmup"); do
                g=g
                [[ $name == create ]] && g=new-$i
                sleeper
                hook warm "$(state "run-$i" creating "$last" "$g")"
                hook warm "$(state "run-$i" stopped '' "$g")"
                reap "$last"
            done
            g=g
            [[ $name == create ]] && g=new-measured
            sleeper
            hook "$name" "$(state run-measured creating "$last" "$g")" measured
            row run-measured
            ;;
        lifecycle)
            seed
            for i in $(seq 1 "$warmup"); do
                sleeper
                hook warm "$(state "life-$i" creating "$last" g)"
                hook warm "$(state "life-$i" running "$last" g)"
                reap "$last"
                hook warm "$(state "life-$i" stopped '' g)"
            done
            sleeper
            p=$last
            hook createRuntime "$(state life-measured creating "$p" g)" measured
            row life-measured
            hook poststart "$(state life-measured running "$p" g)" measured
            reap "$p"
            hook poststop "$(state life-measured stopped '' g)" measured
            ;;
    esac
)

for i in "${!labels[@]}"; do
    for tool in callgrind strace; do
        for name in share create lifecycle; do
            echo "== ${labels[$i]}: $name under $tool ==" >&2
            scenario "${bins[$i]}" "$name" "$out/$i/$tool/$name" "$tool"
        done
    done
done

{
    printf '| stage |'
    for l in "${labels[@]}"; do printf ' %s: instructions | syscalls |' "$l"; done
    printf '\n|---|'
    for _ in "${labels[@]}"; do printf -- '---:|---:|'; done
    echo
    for st in share/share create/create lifecycle/createRuntime lifecycle/poststart lifecycle/poststop; do
        printf '| %s |' "${st#*/}"
        for i in "${!labels[@]}"; do
            ir=$(sed -n 's/^summary: //p' "$out/$i/callgrind/${st%/*}/${st#*/}.callgrind")
            sc=$(awk '$2 == "total" {print $1}' "$out/$i/strace/${st%/*}/${st#*/}.strace")
            printf ' %s | %s |' "$ir" "$sc"
        done
        echo
    done
} >"$out/summary.md"
cat "$out/summary.md"
