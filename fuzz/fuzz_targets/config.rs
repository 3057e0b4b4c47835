//! Config file parsing (`Config::parse`), with properties: an accepted config is in range; a
//! rejected one gets a message naming the file; and a config that asks to fail closed still fails
//! closed once it is broken (`broken_config_wants_fail_closed`), whatever TOML spelling it used.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use oci_coresched_hook::config::{self, Config, QOS_CLASSES};

const NAME: &str = "/fuzz/config.toml";

fn scratch() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let dir = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        dir.join(format!("och-fuzz-config-{}.toml", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Config::parse(text, Path::new(NAME)) {
        Ok(cfg) => {
            assert!(["off", "error", "warn", "info", "debug", "trace"].contains(&cfg.log_level.as_str()));
            assert!((1..=60_000).contains(&cfg.lock_timeout_ms), "lock_timeout_ms {}", cfg.lock_timeout_ms);
            assert!(cfg.qos.keys().all(|k| QOS_CLASSES.contains(k)), "{:?}", cfg.qos.keys());
            if cfg.fail_closed {
                // The same file with a syntax error appended: the hook cannot parse it, and must
                // still fail closed.
                let broken = format!("{text}\nlog_level = [\n");
                assert!(Config::parse(&broken, Path::new(NAME)).is_err());
                std::fs::write(scratch(), &broken).unwrap();
                assert!(
                    config::broken_config_wants_fail_closed(scratch()),
                    "a broken config that sets fail_closed = true fails open:\n{broken}"
                );
            }
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("invalid config file {NAME}: ")), "{msg:?}");
        }
    }
});
