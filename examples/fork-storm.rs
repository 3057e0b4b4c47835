//! A fork storm: the load under which the exec follower's cost and the exec window are measured
//! (`make bench-follow`, `make bench-exec` and the field tier's exec part). It forks children
//! that exit at once, without exec, so every fork costs the kernel a fork and an exit and the
//! follower a fork event (and an exit event where the kernel does not filter them out).
//!
//!   fork-storm [--rate N] [--seconds S]
//!
//! `--rate N`: forks per second, paced in 1 ms slots (default 0: as fast as this process can
//! fork). `--seconds S`: how long (default 10; fractions allowed). SIGCHLD is ignored, so the
//! kernel reaps the children. At the end it prints one line and exits 0:
//!
//!   forks=<n> seconds=<s> rate=<forks per second>
//!
//! It exits 2 with a message on stderr on a bad argument or when fork fails.
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn parse(args: &[String]) -> Result<(u64, Duration), String> {
    let (mut rate, mut seconds) = (0u64, 10.0f64);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
        match a.as_str() {
            "--rate" => rate = v.parse().map_err(|_| format!("--rate {v:?} is not a whole number"))?,
            "--seconds" => {
                seconds = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| format!("--seconds {v:?} is not a positive number"))?
            }
            other => return Err(format!("unknown argument {other:?} (usage: fork-storm [--rate N] [--seconds S])")),
        }
    }
    Ok((rate, Duration::from_secs_f64(seconds)))
}

/// Forks one child that exits at once.
fn fork_one() -> Result<(), std::io::Error> {
    // SAFETY: the child calls only `_exit`, which is async-signal-safe, so forking a process that
    // may have other threads is sound; the parent only reads the return value.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        0 => {
            // SAFETY: `_exit` ends the child without running the parent's destructors or atexit.
            unsafe { libc::_exit(0) }
        }
        _ => Ok(()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (rate, length) = match parse(&args) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("fork-storm: {e}");
            return ExitCode::from(2);
        }
    };
    // SAFETY: setting a signal's disposition to SIG_IGN passes no pointers.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
    let start = Instant::now();
    let mut forks = 0u64;
    let slot = Duration::from_millis(1);
    while start.elapsed() < length {
        let due = if rate == 0 {
            forks + 64
        } else {
            // Forks due by the end of the current 1 ms slot.
            let slots = (start.elapsed().as_nanos() / slot.as_nanos()) as u64 + 1;
            slots * rate / 1000
        };
        while forks < due {
            if let Err(e) = fork_one() {
                eprintln!("fork-storm: failed to fork: {e}");
                return ExitCode::from(2);
            }
            forks += 1;
        }
        if rate != 0 {
            let next = slot * (start.elapsed().as_nanos() / slot.as_nanos() + 1) as u32;
            std::thread::sleep(next.saturating_sub(start.elapsed()));
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!("forks={forks} seconds={secs:.3} rate={:.0}", forks as f64 / secs);
    ExitCode::SUCCESS
}
