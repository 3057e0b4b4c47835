#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and runs every test tier of oci-coresched-hook:
#   1. lints (rustfmt, clippy, rustdoc, pyflakes) 2. cargo test: unit, fake-kernel scenarios, real runc/crun/podman
#   3. packaging (tests/packaging/run.sh): .deb/.rpm/image, install, podman through the installed hook;
#      then tests/it/release_binary.rs over the packaged binary (no fake kernel or fault points in it)
#   4. the real-kernel VM tier (tests/vm/tier.sh): the same scenarios on CONFIG_SCHED_CORE, e2e with runc
#   5. the field tier (tests/field/run.sh): the same kernel with a Debian 13 root (debootstrap,
#      cached): containerd CRI pods and podman 5 with crun and runc, cookies read by coresched
# Needs root (apt-get, runtimes, QEMU) and cargo. Set OCH_SKIP_VM=1 to leave out tiers 4 and 5
# locally (never in CI). Python modules Debian does not package come from PyPI into a virtual
# environment of this script's own (never into the system Python, which Debian 12 refuses: PEP 668).
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

log() { printf '\n==> %s\n' "$*"; }

. scripts/need-cargo.sh

# Debian packages the host tiers need (the VM tier installs its own through tests/vm/vm.sh deps).
# prometheus brings promtool: the metrics unit test runs `promtool check metrics` (and fails
# under CI without it). Installed without recommends, the service does not run here.
# pyflakes3 checks the field tier's Python (a name error there would otherwise surface only in the guest).
# python3 and python3-venv make the environment below; g++ builds libFuzzer for cargo-fuzz (scripts/fuzz-short.sh).
APT_PACKAGES=(runc crun podman busybox-static uidmap sqlite3 man-db jq rpm file zsh fish prometheus pyflakes3
    python3 python3-yaml python3-venv g++)

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    log "installing Debian packages: ${missing[*]}"
    if [[ $(id -u) -ne 0 ]]; then
        echo "error: need root to install ${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Python modules of scripts/requirements-test.txt, pinned: the metrics test parses the
# exposition with Prometheus' own parser (prometheus-client), the packaging test validates the
# DaemonSet (kubernetes-validate), the chart is linted and rendered by the Helm library
# (helm-python-sdk). They go into a virtual environment made from Debian's /usr/bin/python3 and
# kept outside the clone, made anew when the requirements file changes (its sha256 is kept in the
# environment); its bin/ comes first on PATH, so every test that runs `python3` runs it.
REQUIREMENTS=scripts/requirements-test.txt
VENV=${XDG_CACHE_HOME:-$HOME/.cache}/oci-coresched-hook/venv
want=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
if [[ $(cat "$VENV/requirements.sha256" 2>/dev/null) != "$want" || ! -x $VENV/bin/python3 ]]; then
    log "making the Python environment $VENV (PyPI: $REQUIREMENTS)"
    rm -rf -- "$VENV"
    mkdir -p -- "$(dirname -- "$VENV")"
    /usr/bin/python3 -m venv "$VENV"
    "$VENV/bin/python3" -m pip install --quiet --disable-pip-version-check --no-input -r "$REQUIREMENTS"
    echo "$want" >"$VENV/requirements.sha256"
fi
export PATH="$VENV/bin:$PATH"

log "rustfmt"
cargo fmt --check
log "clippy"
cargo clippy --locked --all-targets --all-features -- -D warnings
log "rustdoc (the modules' own docs, private items included: every link resolves)"
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --all-features --document-private-items
log "pyflakes (the Python the test tiers run)"
find tests benches scripts -name '*.py' -print0 | xargs -0 pyflakes3

# --all-features: the shared fake kernel (binary-level tests of the cookie path on this host, whose
# kernel has no CONFIG_SCHED_CORE) and the test-only fault points. Release builds have neither.
log "cargo test (unit, fake-kernel scenarios, real runtimes on this host)"
cargo test --locked --all-features 2>&1

log "fuzzing (bounded: 20 s per target; \`make fuzz\` runs longer)"
scripts/fuzz-short.sh

log "packaging: .deb/.rpm/image build and contents, dpkg -i + podman/runc, remove/purge"
tests/packaging/run.sh

# Needs the binary the packaging tier just built (target/packaging/rpm/, image/), so it is
# #[ignore]d in the cargo test step above.
log "the shipped binary has no fake kernel, fault points or phase timing (tests/it/release_binary.rs)"
cargo test --locked --all-features --test it release_binary:: -- --ignored 2>&1

if [[ ${OCH_SKIP_VM:-} == 1 && -z ${CI:-} ]]; then
    log "SKIPPED: the real-kernel VM tier and the field tier (OCH_SKIP_VM=1)" >&2
else
    log "real-kernel VM tier"
    tests/vm/tier.sh
    log "field tier: Debian 13's containerd CRI, podman 5, crun and runc on the real kernel"
    tests/field/run.sh
fi
log "all tiers passed"
