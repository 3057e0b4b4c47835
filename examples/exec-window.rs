//! The exec-window probe of the field tier (issue 13; tests/field/exec.sh). Run as the process of
//! a `runc exec`, `crun exec`, `podman exec` or CRI `ExecSync` in a container, it measures how
//! long the new process ran without its container's cookie: it takes CLOCK_MONOTONIC at the top of
//! main, then reads its own cookie (GET on the calling thread, through the library's only prctl
//! caller) until it is non-zero, and prints one line:
//!
//!   window_ns=<n> first=<0|1> cookie=0x<hex>    exit 0
//!   window_ns=timeout first=0 cookie=0x0        exit 1 (still no cookie after 2 s)
//!   window_ns=error error=<reason>              exit 2 (GET failed: e.g. no CONFIG_SCHED_CORE here)
//!
//! `first=1`: the very first GET, before anything else of main ran, already returned the cookie:
//! the process had it at exec (inherited at fork from a parent that had it, e.g. a containerd shim
//! that holds its pod's cookie), so no instruction of the exec'd program ran without it; its window
//! is then the cost of that one GET. `first=0`: the cookie came later (the follower gave it), and
//! the window is how long the program ran without it. Readers compare the cookie with the group's.
//!
//! The window is counted from the start of main, so the exec itself and the loader (none: it is
//! built static like the shipped binary) are not in it.
//!
//!   exec-window                     the probe
//!   exec-window --sleep SECONDS     the probe, then sleep (a process that stays for a later check)
//!   exec-window --fork N [--hold SECONDS]
//!                                   fork N children at once (before any GET), each with stdio on
//!                                   /dev/null, sleeping SECONDS (default 120) then exiting; print
//!                                   `forked=N` and exit without waiting. The caller finds the
//!                                   children in the container's cgroup and reads their cookies.
use std::process::ExitCode;
use std::time::{Duration, Instant};

use oci_coresched_hook::host::kernel::{CoreSched, linux::Linux};

const TIMEOUT: Duration = Duration::from_secs(2);

fn window(t0: Instant) -> ExitCode {
    let mut first = true;
    loop {
        match Linux.get(0) {
            Ok(0) if t0.elapsed() >= TIMEOUT => {
                println!("window_ns=timeout first=0 cookie=0x0");
                return ExitCode::from(1);
            }
            Ok(0) => first = false,
            Ok(cookie) => {
                let ns = t0.elapsed().as_nanos();
                println!("window_ns={ns} first={} cookie={cookie:#x}", u8::from(first));
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                println!("window_ns=error error={e}");
                return ExitCode::from(2);
            }
        }
    }
}

fn fork_children(n: u32, hold: Duration) -> ExitCode {
    let null = c"/dev/null";
    for i in 0..n {
        // SAFETY: the process is single-threaded here (nothing has spawned a thread), so the child
        // may run any code; it only calls open/dup2/close, sleeps and exits.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            eprintln!("exec-window: fork {i} of {n}: {}", std::io::Error::last_os_error());
            println!("forked={i}");
            return ExitCode::from(2);
        }
        if pid == 0 {
            // SAFETY: a valid NUL-terminated path; the fds are this process's own.
            unsafe {
                let fd = libc::open(null.as_ptr(), libc::O_RDWR);
                if fd >= 0 {
                    for std_fd in 0..3 {
                        libc::dup2(fd, std_fd);
                    }
                    if fd > 2 {
                        libc::close(fd);
                    }
                }
            }
            std::thread::sleep(hold);
            // SAFETY: leaves without running the parent's atexit handlers or flushing its buffers.
            unsafe { libc::_exit(0) };
        }
    }
    println!("forked={n}");
    ExitCode::SUCCESS
}

fn usage() -> ExitCode {
    eprintln!("usage: exec-window [--sleep SECONDS | --fork N [--hold SECONDS]]");
    ExitCode::from(64)
}

fn main() -> ExitCode {
    let t0 = Instant::now();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |s: &str| s.parse::<u32>().ok();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] => window(t0),
        ["--sleep", s] => match num(s) {
            Some(s) => {
                let rc = window(t0);
                std::thread::sleep(Duration::from_secs(s.into()));
                rc
            }
            None => usage(),
        },
        ["--fork", n] => num(n).map_or_else(usage, |n| fork_children(n, Duration::from_secs(120))),
        ["--fork", n, "--hold", s] => match (num(n), num(s)) {
            (Some(n), Some(s)) => fork_children(n, Duration::from_secs(s.into())),
            _ => usage(),
        },
        _ => usage(),
    }
}
