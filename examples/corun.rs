//! The co-run recorder: a CPU-bound probe pinned to one CPU that records when it ran, and the
//! reader that says for how long two of them ran at the same time. Core scheduling's claim is
//! that tasks of different cookies never run on two SMT siblings of one core at once; two of these
//! probes, pinned to the two siblings, show whether they did (the isolation tests and `make demo`).
//!
//!   corun run --cpu N --seconds S (--go FIFO | --start-in-ms MS) [--out FILE]
//!   corun overlap A B
//!   corun now-plus-ms MS          CLOCK_MONOTONIC now + MS, in ns (a start time for `--go`)
//!   corun pingpong --loops N --cpu C
//!                                 two threads pinned to CPU C pass a byte back and forth over two
//!                                 pipes N times (two context switches a round trip) and print
//!                                 `pingpong loops=N ns_per_round_trip=X`: the scheduler's cost per
//!                                 switch, to compare with and without `kernel.sched_schedstats`
//!
//! `run` pins itself to CPU N, waits for the start, spins reading CLOCK_MONOTONIC until the start
//! plus S seconds, and writes (to FILE, else stdout) what it saw:
//!
//!   corun cpu=<n> pid=<pid> cookie=<0x.. | none> start_ns=<t> end_ns=<t> ran_ns=<n> spans=<k>
//!   <start_ns> <end_ns>                               one line per span
//!
//! A span is a run of clock reads less than [`GAP_NS`] apart: the probe was on its CPU throughout.
//! A longer gap means it was not (held idle by core scheduling, preempted, or its vCPU held off
//! the host's CPU). The start is an absolute CLOCK_MONOTONIC time, the same for every process of
//! the machine, so two probes' spans can be intersected: `--go FIFO` blocks on reading one line,
//! that time in nanoseconds, from a named pipe (a blocking read: no CPU while it waits, so a probe
//! that is a container's own process can be started long before the measurement);
//! `--start-in-ms MS` starts at now + MS. The cookie is the probe's own (GET on itself).
//!
//! `overlap A B` reads two such files and prints one line:
//!
//!   overlap_ns=<n> a_ran_ns=<n> b_ran_ns=<n> share=<overlap / the shorter ran_ns> a_cookie=.. b_cookie=..
//!
//! Exit status: 0; 2 with a message on stderr for a bad argument, an unreadable file, or a CPU it
//! cannot be pinned to.
use std::io::{BufRead, Write};
use std::process::ExitCode;

use oci_coresched_hook::host::kernel::{CookieHex, CoreSched, linux::Linux};

/// Consecutive clock reads at most this far apart belong to one span.
const GAP_NS: u64 = 200_000;

fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

struct Run {
    cpu: usize,
    seconds: f64,
    start: Start,
    out: Option<String>,
}

enum Start {
    Fifo(String),
    InMs(u64),
}

fn parse_run(args: &[String]) -> Result<Run, String> {
    let (mut cpu, mut seconds, mut start, mut out) = (None, None, None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
        match a.as_str() {
            "--cpu" => cpu = Some(v.parse().map_err(|_| format!("--cpu {v:?} is not a CPU number"))?),
            "--seconds" => {
                seconds = Some(
                    v.parse()
                        .ok()
                        .filter(|s: &f64| s.is_finite() && *s > 0.0 && *s <= 3600.0)
                        .ok_or_else(|| format!("--seconds {v:?} is not a number of seconds in (0, 3600]"))?,
                )
            }
            "--go" => start = Some(Start::Fifo(v.clone())),
            "--start-in-ms" => {
                start = Some(Start::InMs(v.parse().map_err(|_| format!("--start-in-ms {v:?} is not a whole number"))?))
            }
            "--out" => out = Some(v.clone()),
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(Run {
        cpu: cpu.ok_or("--cpu is required")?,
        seconds: seconds.ok_or("--seconds is required")?,
        start: start.ok_or("--go FIFO or --start-in-ms MS is required")?,
        out,
    })
}

fn run(r: &Run) -> Result<(), String> {
    pin(r.cpu)?;
    let start = match &r.start {
        Start::InMs(ms) => now_ns() + ms * 1_000_000,
        Start::Fifo(path) => {
            let f = std::fs::File::open(path).map_err(|e| format!("failed to open {path}: {e}"))?;
            let mut line = String::new();
            std::io::BufReader::new(f).read_line(&mut line).map_err(|e| format!("failed to read {path}: {e}"))?;
            line.trim().parse().map_err(|_| format!("{path} gave {:?}, not a start time in ns", line.trim()))?
        }
    };
    let end = start + (r.seconds * 1e9) as u64;
    let wait = start.saturating_sub(now_ns());
    if wait > 0 {
        std::thread::sleep(std::time::Duration::from_nanos(wait));
    }
    let mut spans: Vec<(u64, u64)> = Vec::with_capacity(1 << 16);
    let (mut first, mut last) = (now_ns(), now_ns());
    loop {
        let t = now_ns();
        if t - last > GAP_NS {
            spans.push((first, last));
            first = t;
        }
        last = t;
        if t >= end {
            break;
        }
    }
    spans.push((first, last));
    let cookie = Linux.get(0).map_or_else(|_| "none".to_string(), |c| CookieHex(c).to_string());
    let ran: u64 = spans.iter().map(|(a, b)| b - a).sum();
    let mut text = format!(
        "corun cpu={} pid={} cookie={cookie} start_ns={start} end_ns={end} ran_ns={ran} spans={}\n",
        r.cpu,
        std::process::id(),
        spans.len()
    );
    for (a, b) in &spans {
        text.push_str(&format!("{a} {b}\n"));
    }
    match &r.out {
        Some(path) => std::fs::write(path, text).map_err(|e| format!("failed to write {path}: {e}")),
        None => std::io::stdout().write_all(text.as_bytes()).map_err(|e| format!("failed to write stdout: {e}")),
    }
}

/// One probe's record: its header's cookie and its spans.
struct Record {
    cookie: String,
    spans: Vec<(u64, u64)>,
}

fn read_record(path: &str) -> Result<Record, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("failed to read {path}: {e}"))?;
    let mut lines = text.lines();
    let header =
        lines.next().filter(|h| h.starts_with("corun ")).ok_or_else(|| format!("{path} is not a corun record"))?;
    let cookie = header
        .split(' ')
        .find_map(|f| f.strip_prefix("cookie="))
        .ok_or_else(|| format!("{path}: no cookie in its header"))?
        .to_string();
    let mut spans = Vec::new();
    for (n, line) in lines.enumerate() {
        let mut f = line.split(' ').map(str::parse::<u64>);
        match (f.next(), f.next(), f.next()) {
            (Some(Ok(a)), Some(Ok(b)), None) if a <= b => spans.push((a, b)),
            _ => return Err(format!("{path}: line {} is not a span: {line:?}", n + 2)),
        }
    }
    Ok(Record { cookie, spans })
}

/// The time both ran: the sum of the intersections of two sorted span lists (linear).
fn overlap_ns(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
    let (mut i, mut j, mut sum) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if hi > lo {
            sum += hi - lo;
        }
        if a[i].1 < b[j].1 { i += 1 } else { j += 1 }
    }
    sum
}

fn overlap(a: &str, b: &str) -> Result<(), String> {
    let (ra, rb) = (read_record(a)?, read_record(b)?);
    let ran = |r: &Record| r.spans.iter().map(|(s, e)| e - s).sum::<u64>();
    let (a_ran, b_ran) = (ran(&ra), ran(&rb));
    let both = overlap_ns(&ra.spans, &rb.spans);
    let share = if a_ran.min(b_ran) == 0 { 0.0 } else { both as f64 / a_ran.min(b_ran) as f64 };
    println!(
        "overlap_ns={both} a_ran_ns={a_ran} b_ran_ns={b_ran} share={share:.6} a_cookie={} b_cookie={}",
        ra.cookie, rb.cookie
    );
    Ok(())
}

fn pin(cpu: usize) -> Result<(), String> {
    let mut set = rustix::thread::CpuSet::new();
    if cpu >= rustix::thread::CpuSet::MAX_CPU {
        return Err(format!("CPU {cpu} is out of range"));
    }
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).map_err(|e| format!("failed to pin to CPU {cpu}: {e}"))
}

fn pingpong(args: &[String]) -> Result<(), String> {
    use std::io::Read;
    let (mut loops, mut cpu) = (None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
        match a.as_str() {
            "--loops" => loops = Some(v.parse::<u64>().map_err(|_| format!("--loops {v:?} is not a whole number"))?),
            "--cpu" => cpu = Some(v.parse::<usize>().map_err(|_| format!("--cpu {v:?} is not a CPU number"))?),
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    let (loops, cpu) = (loops.ok_or("--loops is required")?, cpu.ok_or("--cpu is required")?);
    let (mut ping_r, mut ping_w) = std::io::pipe().map_err(|e| format!("failed to make a pipe: {e}"))?;
    let (mut pong_r, mut pong_w) = std::io::pipe().map_err(|e| format!("failed to make a pipe: {e}"))?;
    pin(cpu)?;
    let echo = std::thread::spawn(move || -> Result<(), String> {
        pin(cpu)?;
        let mut b = [0u8];
        for _ in 0..loops {
            ping_r.read_exact(&mut b).map_err(|e| e.to_string())?;
            pong_w.write_all(&b).map_err(|e| e.to_string())?;
        }
        Ok(())
    });
    let t0 = now_ns();
    let mut b = [0u8];
    for _ in 0..loops {
        ping_w.write_all(&b).map_err(|e| e.to_string())?;
        pong_r.read_exact(&mut b).map_err(|e| e.to_string())?;
    }
    let ns = now_ns() - t0;
    echo.join().map_err(|_| "the echo thread panicked".to_string())??;
    println!("pingpong loops={loops} ns_per_round_trip={}", ns / loops.max(1));
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("run") => parse_run(&args[1..]).and_then(|r| run(&r)),
        Some("overlap") if args.len() == 3 => overlap(&args[1], &args[2]),
        Some("pingpong") => pingpong(&args[1..]),
        Some("now-plus-ms") if args.len() == 2 => args[1]
            .parse::<u64>()
            .map(|ms| println!("{}", now_ns() + ms * 1_000_000))
            .map_err(|_| format!("now-plus-ms {:?} is not a whole number", args[1])),
        _ => {
            Err("usage: corun run --cpu N --seconds S (--go FIFO | --start-in-ms MS) [--out FILE] | corun overlap A B \
                  | corun now-plus-ms MS | corun pingpong --loops N --cpu C"
                .to_string())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("corun: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::overlap_ns;

    #[test]
    fn overlap_is_the_sum_of_the_intersections() {
        assert_eq!(overlap_ns(&[(0, 10), (20, 30)], &[(5, 25)]), 5 + 5);
        assert_eq!(overlap_ns(&[(0, 10)], &[(10, 20)]), 0);
        assert_eq!(overlap_ns(&[(0, 100)], &[(10, 20), (30, 40), (90, 200)]), 10 + 10 + 10);
        assert_eq!(overlap_ns(&[], &[(0, 1)]), 0);
    }
}
