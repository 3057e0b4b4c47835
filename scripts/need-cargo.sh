# Sourced by scripts/test-all.sh and tests/vm/demo.sh before anything else: both build with cargo.
# Finds a rustup install that is not on PATH yet (~/.cargo/bin, e.g. under sudo), and otherwise
# says in one line how to get Rust.
if ! command -v cargo >/dev/null 2>&1 && [[ -x ${CARGO_HOME:-$HOME/.cargo}/bin/cargo ]]; then
    export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "error: cargo not found: install Rust $(sed -n 's/^rust-version *= *"\(.*\)"/\1/p' Cargo.toml) or newer with rustup: curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh" >&2
    exit 1
fi
