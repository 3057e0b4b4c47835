//! SIGTERM and SIGINT for the long-running commands (the NRI plugin, `reconcile --follow`): one
//! stop flag, set by the handler and polled by their loops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// True once SIGTERM or SIGINT arrived.
pub fn stopping() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Installs the handlers: SIGTERM and SIGINT set the stop flag. No `SA_RESTART`: a blocked read returns at once.
pub fn install() -> std::io::Result<()> {
    // `libc`, not rustix: rustix has no stable sigaction with a handler (only its hidden,
    // libc-implementers' runtime module, whose name rotates).
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: a zeroed `sigaction` is valid (no flags, empty mask once sigemptyset ran); the
        // handler only stores to an atomic, which is async-signal-safe; the pointers are to locals
        // that outlive the calls.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_stop_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Sleeps `d` unless a stop signal comes first.
pub fn sleep_unless_stopped(d: Duration) {
    let end = Instant::now() + d;
    while !stopping() {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}
