//! Whole-process benchmark of the hook binary (issue 6, item 2): every number is the wall time of
//! spawn + wait of one process, with the OCI state already buffered in a pipe on its stdin, exactly
//! as a runtime hands it over. `/bin/true` is spawned the same way, interleaved with the hook (one
//! `true`, one hook, …) so that drift of the machine hits both alike; ratios are to that median.
//!
//! Kernel calls go to the shared fake kernel (`OCH_FAKE_KERNEL`, feature `fake-kernel`) unless
//! `OCH_BENCH_REAL=1` (the VM tier: real `prctl`). Everything else is the real code path: process
//! start, config, state parsing, bundle `config.json`, lock, SQLite, `/proc`, relay thread.
//! Containers are stand-ins: real `sleep` processes.
//!
//! Run: `make bench` (or `cargo bench --features fake-kernel --bench process`). Environment:
//! `OCH_BENCH_RUNS` (timed runs per scenario, default 200), `OCH_BENCH_BURST_ROUNDS` (default 5),
//! `OCH_BENCH_HOOK` (binary to time; default the one cargo built), `OCH_BENCH_REAL=1` (real kernel:
//! share/create path only), `OCH_BENCH_ONLY` (comma-separated scenario names), `OCH_BENCH_DIR`
//! (where the temporary state lives; default /dev/shm, a tmpfs like /run).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use oci_coresched_hook::host::kernel::CoreSched;
use oci_coresched_hook::host::kernel::fake::FakeKernel;
use oci_coresched_hook::host::procfs::ProcFs;
use oci_coresched_hook::host::state_dir::StateDir;
use oci_coresched_hook::store::{Member, Store, StoreError};
use oci_coresched_hook::values::Labels;

const TRUE: &str = "/bin/true";
/// Live members of the measured group.
const LIVE: usize = 10;
/// Hooks started at once.
const BURST: usize = 100;
/// Live members of the larger group that prices one more member.
const BIG_GROUP: usize = 50;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One finished process.
#[derive(Debug, Clone, Copy)]
struct Sample {
    wall: Duration,
    ok: bool,
    /// `ru_maxrss` of the child in KiB (see `rss_note`).
    maxrss_kib: i64,
}

/// Waits for `pid` with wait4, returning (exit ok, maxrss KiB).
fn wait4(pid: u32) -> (bool, i64) {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pid is our own unreaped child; status and ru are valid for writes.
        let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut ru) };
        if r == pid as libc::pid_t {
            break;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "wait4({pid}): {e}");
    }
    (libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, ru.ru_maxrss)
}

/// A prepared invocation: program, args, env and the bytes for stdin.
#[derive(Debug, Clone)]
struct Invocation {
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    stdin: Vec<u8>,
    stderr: Option<PathBuf>,
}

impl Invocation {
    /// Spawns it with stdin already written to a pipe (like a runtime does); returns the child
    /// and the start instant. Stdout goes to /dev/null, stderr to the given file (appended).
    fn spawn(&self) -> (Child, Instant) {
        let (r, mut w) = std::io::pipe().expect("pipe");
        w.write_all(&self.stdin).expect("fill stdin pipe");
        drop(w);
        let stderr = match &self.stderr {
            Some(p) => Stdio::from(std::fs::OpenOptions::new().create(true).append(true).open(p).expect("stderr file")),
            None => Stdio::null(),
        };
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args).stdin(r).stdout(Stdio::null()).stderr(stderr);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let t0 = Instant::now();
        let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {}: {e}", self.program.display()));
        (child, t0)
    }

    fn run(&self) -> Sample {
        let (child, t0) = self.spawn();
        let (ok, maxrss_kib) = wait4(child.id());
        Sample { wall: t0.elapsed(), ok, maxrss_kib }
    }
}

/// `sleep` processes standing in for container inits; killed on drop.
#[derive(Debug, Default)]
struct Sleepers(Vec<Child>);

impl Sleepers {
    fn spawn(&mut self) -> i32 {
        let c = Command::new("sleep")
            .arg("100000")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sleep");
        let pid = c.id() as i32;
        self.0.push(c);
        pid
    }

    fn kill(&mut self, pid: i32) {
        if let Some(i) = self.0.iter().position(|c| c.id() as i32 == pid) {
            let mut c = self.0.swap_remove(i);
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One benchmark world: a state dir, a fake kernel file, config files and a bundle.
#[derive(Debug)]
struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    hook: PathBuf,
    real: bool,
    bundle: PathBuf,
    config: PathBuf,
    default_config: PathBuf,
}

fn state_json(id: &str, status: &str, pid: Option<i32>, bundle: &Path, group: &str) -> Vec<u8> {
    let pid = pid.map(|p| format!("\"pid\":{p},")).unwrap_or_default();
    format!(
        "{{\"ociVersion\":\"1.0.2\",\"id\":\"{id}\",\"status\":\"{status}\",{pid}\"bundle\":\"{}\",\
         \"annotations\":{{\"oci-coresched-hook/group\":\"{group}\"}}}}",
        bundle.display()
    )
    .into_bytes()
}

impl World {
    fn new(hook: &Path, real: bool) -> Self {
        let base = std::env::var_os("OCH_BENCH_DIR").map(PathBuf::from).unwrap_or_else(|| {
            let shm = PathBuf::from("/dev/shm");
            if tempfile::tempdir_in(&shm).is_ok() { shm } else { std::env::temp_dir() }
        });
        let tmp = tempfile::Builder::new().prefix("och-bench-").tempdir_in(base).expect("tempdir");
        let root = tmp.path().to_path_buf();
        let bundle = root.join("bundle");
        std::fs::create_dir(&bundle).unwrap();
        // A real runc config.json (5.8 KB, Kubernetes annotations and cgroupsPath), so the bundle
        // read and its parse cost what they cost in production.
        let spec = include_str!("../tests/fixtures/states/runc-config.json");
        std::fs::write(bundle.join("config.json"), spec).unwrap();
        // fail_closed makes any failure a non-zero exit, so the benchmark cannot time a failure.
        let config = root.join("config.toml");
        std::fs::write(&config, "syslog = false\nlog_level = \"warn\"\nfail_closed = true\n").unwrap();
        // The shipped defaults (info level: two lines per run; syslog on), still fail-closed.
        let default_config = root.join("default.toml");
        std::fs::write(&default_config, "fail_closed = true\n").unwrap();
        Self { _tmp: tmp, root, hook: hook.to_path_buf(), real, bundle, config, default_config }
    }

    fn state_dir(&self) -> PathBuf {
        self.root.join("state")
    }

    fn kernel_file(&self) -> PathBuf {
        self.root.join("fake-kernel.json")
    }

    /// Starts afresh: empty state dir and fake kernel.
    fn reset(&self) {
        let _ = std::fs::remove_dir_all(self.state_dir());
        let _ = std::fs::remove_file(self.kernel_file());
        let _ = std::fs::remove_file(self.stderr_file());
    }

    fn stderr_file(&self) -> PathBuf {
        self.root.join("hook.stderr")
    }

    fn hook_inv(&self, config: &Path, state: Vec<u8>) -> Invocation {
        let mut env = vec![];
        if !self.real {
            env.push(("OCH_FAKE_KERNEL".into(), self.kernel_file().display().to_string()));
        }
        if timing_wanted() {
            env.push(("OCH_TIMING".into(), "1".into()));
        }
        Invocation {
            program: self.hook.clone(),
            args: vec![
                "--config".into(),
                config.display().to_string(),
                "--state-dir".into(),
                self.state_dir().display().to_string(),
                "hook".into(),
            ],
            env,
            stdin: state,
            stderr: Some(self.stderr_file()),
        }
    }

    fn ensure(&self, id: &str, pid: i32, group: &str) -> Invocation {
        self.hook_inv(&self.config, state_json(id, "creating", Some(pid), &self.bundle, group))
    }

    fn stop(&self, id: &str, group: &str) -> Invocation {
        self.hook_inv(&self.config, state_json(id, "stopped", None, &self.bundle, group))
    }

    /// poststart: the runtime's state once the user process runs (status `running`).
    fn poststart(&self, id: &str, pid: i32, group: &str) -> Invocation {
        self.hook_inv(&self.config, state_json(id, "running", Some(pid), &self.bundle, group))
    }

    fn stderr_text(&self) -> String {
        std::fs::read_to_string(self.stderr_file()).unwrap_or_default()
    }

    /// Runs an untimed setup invocation and insists that it worked.
    fn must(&self, inv: &Invocation) {
        let s = inv.run();
        assert!(s.ok, "setup hook failed: {}", self.stderr_text());
    }

    /// Adds `n` members on dead pids, in groups of 10 other than `g`, straight into the cache
    /// through the library (under the state lock, one transaction).
    fn seed_dead(&self, n: usize) {
        let dir = StateDir::open(&self.state_dir()).unwrap();
        let _lock = dir.lock(Duration::from_secs(10)).unwrap();
        let store = Store::open(&dir.db_path()).unwrap();
        store
            .transaction(|s| {
                for i in 0..n {
                    s.upsert_member(&Member {
                        cookie: 0x5eed_0000_0000 + i as u64,
                        labels: Labels {
                            cgroup: Some(format!("/kubepods/burstable/pod{i}/seed{i}")),
                            namespace: Some("default".into()),
                            pod_name: Some(format!("seed-{i}")),
                            pod_uid: Some(format!("uid-{i}")),
                            container_name: Some("app".into()),
                            idle_cgroup: None,
                        },
                        // Far above any pid_max: never alive, never touched (its group is never ensured).
                        ..Member::new(
                            format!("seed-{i:06}-0123456789abcdef0123456789abcdef0123456789abcdef"),
                            format!("default/seed-{}", i / 10),
                            2_000_000_000 - i as i32,
                            12345,
                        )
                    })?;
                }
                Ok::<_, StoreError>(())
            })
            .unwrap();
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Timed hook runs against interleaved `/bin/true` runs.
#[derive(Debug, Default)]
struct Measured {
    hook: Vec<Duration>,
    truth: Vec<Duration>,
    maxrss_kib: i64,
    true_maxrss_kib: i64,
    failures: usize,
}

impl Measured {
    fn hook_median(&self) -> Duration {
        median(&mut self.hook.clone())
    }
    fn true_median(&self) -> Duration {
        median(&mut self.truth.clone())
    }
    fn ratio(&self) -> f64 {
        ms(self.hook_median()) / ms(self.true_median())
    }

    /// Runs `truth` and `inv` once each, alternating which goes first (so neither always runs
    /// right after the untimed work); counts a failure of `inv` and, when `timed`, records both.
    fn run_pair(&mut self, truth: &Invocation, inv: &Invocation, i: usize, timed: bool) {
        let (t, h) = if i.is_multiple_of(2) {
            let t = truth.run();
            (t, inv.run())
        } else {
            let h = inv.run();
            (truth.run(), h)
        };
        if !h.ok {
            self.failures += 1;
        }
        if timed {
            self.hook.push(h.wall);
            self.truth.push(t.wall);
            self.maxrss_kib = self.maxrss_kib.max(h.maxrss_kib);
            self.true_maxrss_kib = self.true_maxrss_kib.max(t.maxrss_kib);
        }
    }
}

/// `/bin/true` spawned as `inv` is, with the same stdin.
fn true_like(inv: &Invocation) -> Invocation {
    Invocation { program: TRUE.into(), args: vec![], env: vec![], stdin: inv.stdin.clone(), stderr: None }
}

/// The share (or create) path: each timed run is a new container (a fresh `sleep`) joining
/// `group`; it is then stopped (untimed poststop) so the group keeps its `LIVE` members.
/// `fresh_group`: each run names a new group, so the hook creates a cookie instead.
fn measure_path(w: &World, group: &str, fresh_group: bool, runs: usize, config: Option<&Path>) -> Measured {
    let warmup = (runs / 10).clamp(3, 20);
    let mut sleepers = Sleepers::default();
    let mut m = Measured::default();
    for i in 0..warmup + runs {
        let pid = sleepers.spawn();
        let id = format!("run-{i:05}");
        let g = if fresh_group { format!("{group}-{i}") } else { group.to_string() };
        let mut inv = w.ensure(&id, pid, &g);
        if let Some(c) = config {
            inv = w.hook_inv(c, inv.stdin.clone());
        }
        m.run_pair(&true_like(&inv), &inv, i, i >= warmup);
        w.must(&w.stop(&id, &g));
        sleepers.kill(pid);
    }
    m
}

/// One container's whole life as the shipped hooks.d file wires it: createRuntime (joining
/// `group`, which has `LIVE` live members), poststart, poststop; each stage timed against its own
/// interleaved `/bin/true`.
fn measure_lifecycle(w: &World, group: &str, runs: usize) -> [Measured; 3] {
    let warmup = (runs / 10).clamp(3, 20);
    let mut sleepers = Sleepers::default();
    let mut m: [Measured; 3] = Default::default();
    for i in 0..warmup + runs {
        let pid = sleepers.spawn();
        let id = format!("life-{i:05}");
        let stages = [w.ensure(&id, pid, group), w.poststart(&id, pid, group), w.stop(&id, group)];
        for (k, inv) in stages.iter().enumerate() {
            if k == 2 {
                // The runtime runs poststop once the container has exited.
                sleepers.kill(pid);
            }
            m[k].run_pair(&true_like(inv), inv, i, i >= warmup);
        }
    }
    m
}

/// poststop alone: `last` — of the only member of a fresh group (the group row goes too); else
/// of a container the cache never had (the cache holds `group`'s `LIVE` members).
fn measure_poststop(w: &World, group: &str, last: bool, runs: usize) -> Measured {
    let warmup = (runs / 10).clamp(3, 20);
    let mut sleepers = Sleepers::default();
    let mut m = Measured::default();
    for i in 0..warmup + runs {
        let id = format!("stop-{i:05}");
        let g = if last { format!("{group}-{i}") } else { group.to_string() };
        let pid = last.then(|| sleepers.spawn());
        if let Some(pid) = pid {
            w.must(&w.ensure(&id, pid, &g));
            sleepers.kill(pid);
        }
        let inv = w.stop(&id, &g);
        m.run_pair(&true_like(&inv), &inv, i, i >= warmup);
    }
    m
}

/// `OCH_BENCH_TIMING=1` (`make bench-breakdown`, a hook built with the `phase-timing` feature):
/// the hooks report their phases and the share path gets a table of where its time goes.
fn timing_wanted() -> bool {
    std::env::var("OCH_BENCH_TIMING").is_ok_and(|v| v == "1")
}

/// Median microseconds per phase over the `och-timing` lines in `stderr` that name the phase
/// `needle` (which picks the path: `members: /proc` a share, `receipt + GET` a poststart proven
/// by its receipt, `stop recorded` a poststop), in the order the phases happen.
fn phase_table(stderr: &str, needle: &str, title: &str) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut values: std::collections::HashMap<String, Vec<u64>> = std::collections::HashMap::new();
    let mut runs = 0;
    for line in stderr.lines().filter(|l| l.starts_with("och-timing:") && l.contains(needle)) {
        runs += 1;
        for field in line["och-timing:".len()..].split(';') {
            let Some((name, value)) = field.trim().rsplit_once('=') else { continue };
            if !order.iter().any(|n| n == name) {
                order.push(name.to_string());
            }
            values.entry(name.to_string()).or_default().push(value.parse().unwrap_or(0));
        }
    }
    let mut out = format!("\n| {title}, phase (median of {runs} runs; in-process, after exec) | µs |\n|---|---:|\n");
    for name in order {
        let v = values.get_mut(&name).expect("recorded");
        v.sort_unstable();
        let _ = writeln!(out, "| {name} | {} |", v[v.len() / 2]);
    }
    out
}

/// A floor program (see benches/floor/) against interleaved `/bin/true`, with the same state on
/// stdin.
fn measure_floor(program: &Path, args: &[String], stdin: &[u8], runs: usize) -> Measured {
    let warmup = (runs / 10).clamp(3, 20);
    let inv = Invocation {
        program: program.to_path_buf(),
        args: args.to_vec(),
        env: vec![],
        stdin: stdin.to_vec(),
        stderr: None,
    };
    let truth = Invocation { program: TRUE.into(), args: vec![], env: vec![], stdin: stdin.to_vec(), stderr: None };
    let mut m = Measured::default();
    for i in 0..warmup + runs {
        m.run_pair(&truth, &inv, i, i >= warmup);
    }
    m
}

/// Starts the `LIVE` members of `group`.
fn seed_live(w: &World, group: &str, sleepers: &mut Sleepers) {
    seed_live_n(w, group, sleepers, LIVE);
}

/// Starts `n` live members of `group`.
fn seed_live_n(w: &World, group: &str, sleepers: &mut Sleepers, n: usize) {
    for i in 0..n {
        let pid = sleepers.spawn();
        w.must(&w.ensure(&format!("live-{i}"), pid, group));
    }
}

/// Result of one burst of `BURST` hooks started at once on one empty group.
#[derive(Debug)]
struct Burst {
    total: Duration,
    slowest: Duration,
    failures: usize,
    cookies: usize,
    members: usize,
}

fn burst(w: &World) -> Burst {
    w.reset();
    let mut sleepers = Sleepers::default();
    let pids: Vec<i32> = (0..BURST).map(|_| sleepers.spawn()).collect();
    let invs: Vec<Invocation> =
        pids.iter().enumerate().map(|(i, &pid)| w.ensure(&format!("burst-{i:03}"), pid, "burst")).collect();
    let barrier = Arc::new(Barrier::new(BURST));
    let handles: Vec<_> = invs
        .into_iter()
        .map(|inv| {
            let b = barrier.clone();
            std::thread::spawn(move || {
                b.wait();
                let (child, t0) = inv.spawn();
                let (ok, _) = wait4(child.id());
                (t0, Instant::now(), ok)
            })
        })
        .collect();
    let results: Vec<(Instant, Instant, bool)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let first = results.iter().map(|r| r.0).min().unwrap();
    let last = results.iter().map(|r| r.1).max().unwrap();
    let slowest = results.iter().map(|r| r.1 - r.0).max().unwrap();
    let mut failures = results.iter().filter(|r| !r.2).count();
    if !w.stderr_text().trim().is_empty() {
        eprintln!("burst: hook stderr:\n{}", w.stderr_text());
        failures = failures.max(1);
    }
    // Exactly one cookie: every init's cookie read back from the shared fake kernel, and the
    // cache's rows for the group.
    let k = FakeKernel::shared(ProcFs::default(), w.kernel_file());
    let cookies: BTreeSet<u64> = pids.iter().map(|&p| k.get(p).unwrap_or(0)).collect();
    let dir = StateDir::open(&w.state_dir()).unwrap();
    let _lock = dir.lock(Duration::from_secs(10)).unwrap();
    let store = Store::open(&dir.db_path()).unwrap();
    let rows = store.members("default/burst").unwrap();
    let mut all: BTreeSet<u64> = rows.iter().map(|m| m.cookie).collect();
    all.extend(cookies.iter().copied());
    let cookies = if all.contains(&0) { usize::MAX } else { all.len() };
    Burst { total: last - first, slowest, failures, cookies, members: rows.len() }
}

/// Peak RSS of one hook through `/usr/bin/time -f %M` (the child of a small forking process), or
/// None when GNU time is not installed.
fn rss_via_time(w: &World, group: &str) -> Option<(i64, i64)> {
    let time = Path::new("/usr/bin/time");
    if !time.exists() {
        return None;
    }
    let mut sleepers = Sleepers::default();
    let pid = sleepers.spawn();
    let inv = w.ensure("rss-probe", pid, group);
    let run = |inv: &Invocation| -> Option<i64> {
        let out_file = w.root.join("time.out");
        let mut wrapped = inv.clone();
        wrapped.program = time.into();
        wrapped.args = ["-f", "%M", "-o", out_file.to_str().unwrap(), inv.program.to_str().unwrap()]
            .iter()
            .map(|s| s.to_string())
            .chain(inv.args.iter().cloned())
            .collect();
        let s = wrapped.run();
        let text = std::fs::read_to_string(&out_file).ok()?;
        s.ok.then(|| text.trim().lines().last()?.trim().parse().ok())?
    };
    let hook = run(&inv)?;
    w.must(&w.stop("rss-probe", group));
    let truth = run(&Invocation { program: TRUE.into(), args: vec![], env: vec![], stdin: inv.stdin, stderr: None })?;
    Some((hook, truth))
}

struct Row {
    name: String,
    median_ms: String,
    p90_ms: String,
    true_ms: String,
    ratio: String,
    target: String,
    verdict: String,
}

fn main() {
    let real = std::env::var("OCH_BENCH_REAL").is_ok_and(|v| v == "1");
    let hook = std::env::var_os("OCH_BENCH_HOOK")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_oci-coresched-hook")));
    let runs = env_usize("OCH_BENCH_RUNS", 200).max(5);
    let rounds = env_usize("OCH_BENCH_BURST_ROUNDS", 5).max(1);
    let only: Option<Vec<String>> =
        std::env::var("OCH_BENCH_ONLY").ok().map(|s| s.split(',').map(|x| x.trim().to_string()).collect());
    let want = |name: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == name));
    let w = World::new(&hook, real);
    eprintln!(
        "process bench: hook {} ({}), {runs} timed runs per scenario, state in {}",
        hook.display(),
        if real { "real kernel" } else { "fake kernel" },
        w.root.display()
    );
    let mut rows: Vec<Row> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut tables: Vec<String> = Vec::new();
    let row = |name: &str, m: &Measured, target: Option<f64>| -> Row {
        let mut h = m.hook.clone();
        let r = m.ratio();
        Row {
            name: name.into(),
            median_ms: format!("{:.3}", ms(m.hook_median())),
            p90_ms: format!("{:.3}", ms(pct(&mut h, 0.9))),
            true_ms: format!("{:.3}", ms(m.true_median())),
            ratio: format!("{r:.2}×"),
            target: target.map(|t| format!("≤ {t}×")).unwrap_or_default(),
            verdict: match (m.failures, target) {
                (f, _) if f > 0 => format!("FAILED ({f} failed runs)"),
                (_, Some(t)) if r <= t => "met".into(),
                (_, Some(t)) => format!("missed by {:.0}%", (r / t - 1.0) * 100.0),
                (_, None) => String::new(),
            },
        }
    };

    let mut share_median = None;
    let mut scale: Vec<(usize, Measured)> = Vec::new();
    let mut max_rss = (0i64, 0i64);
    let sizes: &[usize] = if real { &[LIVE] } else { &[LIVE, 1_000, 10_000] };
    for &n in sizes {
        let name = if n == LIVE { "share".to_string() } else { format!("cache-{n}") };
        if !want(&name) && (n != LIVE || !want("cache-10")) {
            continue;
        }
        w.reset();
        let mut sleepers = Sleepers::default();
        seed_live(&w, "g", &mut sleepers);
        if n > LIVE {
            w.seed_dead(n - LIVE);
        }
        let t = Instant::now();
        let _ = std::fs::remove_file(w.stderr_file());
        let m = measure_path(&w, "g", false, runs, None);
        if n == LIVE && timing_wanted() {
            tables.push(phase_table(&w.stderr_text(), "members: /proc", "share path"));
        }
        eprintln!("  {name}: {:.3} ms ({:.1} s)", ms(m.hook_median()), t.elapsed().as_secs_f64());
        max_rss = (max_rss.0.max(m.maxrss_kib), max_rss.1.max(m.true_maxrss_kib));
        if n == LIVE {
            share_median = Some(m.hook_median());
            rows.push(row("share path: join a group of 10 live members (cache: 10)", &m, Some(1.5)));
        } else {
            rows.push(row(&format!("share path, cache of {n} containers"), &m, None));
        }
        scale.push((n, m));
    }
    // The cost of one more live member in the group (the hook verifies every member: design):
    // what the burst's hooks pay on top of the 10-member share path as their group fills up.
    let mut per_member = None;
    if !real && want("share-50") {
        w.reset();
        let mut sleepers = Sleepers::default();
        seed_live_n(&w, "g", &mut sleepers, BIG_GROUP);
        let m = measure_path(&w, "g", false, runs, None);
        eprintln!("  share-50: {:.3} ms", ms(m.hook_median()));
        if let Some(single) = share_median {
            per_member = Some((m.hook_median().saturating_sub(single)) / (BIG_GROUP - LIVE) as u32);
        }
        rows.push(row(&format!("share path: join a group of {BIG_GROUP} live members"), &m, None));
    }
    if want("create") {
        w.reset();
        let m = measure_path(&w, "new", true, runs, None);
        eprintln!("  create: {:.3} ms", ms(m.hook_median()));
        max_rss = (max_rss.0.max(m.maxrss_kib), max_rss.1.max(m.true_maxrss_kib));
        rows.push(row("create path: first member of a new group", &m, Some(1.5)));
    }
    if want("lifecycle") {
        w.reset();
        let mut sleepers = Sleepers::default();
        seed_live(&w, "g", &mut sleepers);
        let _ = std::fs::remove_file(w.stderr_file());
        let stages = measure_lifecycle(&w, "g", runs);
        if timing_wanted() {
            let text = w.stderr_text();
            tables.push(phase_table(&text, "receipt + GET", "lifecycle, poststart"));
            tables.push(phase_table(&text, "stop recorded", "lifecycle, poststop"));
        }
        let names = ["createRuntime", "poststart", "poststop"];
        for (name, m) in names.iter().zip(&stages) {
            eprintln!("  lifecycle {name}: {:.3} ms", ms(m.hook_median()));
            rows.push(row(&format!("lifecycle, {name} (joining a group of 10 live members)"), m, None));
        }
        let sum: f64 = stages.iter().map(|m| ms(m.hook_median())).sum();
        let truth = stages.iter().map(|m| ms(m.true_median())).sum::<f64>() / stages.len() as f64;
        let failures: usize = stages.iter().map(|m| m.failures).sum();
        let r = sum / truth;
        rows.push(Row {
            name: "lifecycle: createRuntime + poststart + poststop, summed, against one /bin/true".into(),
            median_ms: format!("{sum:.3}"),
            p90_ms: String::new(),
            true_ms: format!("{truth:.3}"),
            ratio: format!("{r:.2}×"),
            target: "≤ 3×".into(),
            verdict: if failures > 0 {
                format!("FAILED ({failures} failed runs)")
            } else if r <= 3.0 {
                "met".into()
            } else {
                format!("missed by {:.0}%", (r / 3.0 - 1.0) * 100.0)
            },
        });
        drop(sleepers);
        for (name, last) in [("poststop-last", true), ("poststop-uncached", false)] {
            w.reset();
            let mut sleepers = Sleepers::default();
            seed_live(&w, "g", &mut sleepers);
            let m = measure_poststop(&w, "g", last, runs);
            eprintln!("  {name}: {:.3} ms", ms(m.hook_median()));
            let what = if last {
                "poststop of the last member of a group"
            } else {
                "poststop of a container never cached (cache: 10)"
            };
            rows.push(row(what, &m, None));
        }
    }
    // The floors: built next to the hook by scripts/bench.sh (examples floor-empty, floor-sqlite).
    let floor_dir = hook.parent().map(|d| d.join("examples")).unwrap_or_default();
    if want("floor") {
        let empty = floor_dir.join("floor-empty");
        let sqlite = floor_dir.join("floor-sqlite");
        if empty.exists() && sqlite.exists() {
            w.reset();
            let mut sleepers = Sleepers::default();
            seed_live(&w, "g", &mut sleepers);
            let stdin = w.ensure("floor", std::process::id() as i32, "g").stdin;
            let m = measure_floor(&empty, &[], &stdin, runs);
            eprintln!("  floor-empty: {:.3} ms", ms(m.hook_median()));
            rows.push(row("floor: a Rust program that only reads stdin (same build)", &m, None));
            // The hook keys groups by namespace; the bench state has none, so "default/g".
            let args = [w.state_dir().display().to_string(), "default/g".to_string()];
            let m = measure_floor(&sqlite, &args, &stdin, runs);
            eprintln!("  floor-sqlite: {:.3} ms", ms(m.hook_median()));
            rows.push(row("floor: + flock, SQLite open, read a group, write a row, commit, close", &m, None));
            if let Some(share) = share_median {
                // The issue-14 goal on the real kernel: the share path within 1.2× of this floor.
                let r = ms(share) / ms(m.hook_median());
                let (target, verdict) = match (real, r <= 1.2) {
                    (false, _) => (String::new(), "(the target is for the real kernel)".to_string()),
                    (true, true) => ("≤ 1.2×".into(), "met".into()),
                    (true, false) => ("≤ 1.2×".into(), format!("missed by {:.0}%", (r / 1.2 - 1.0) * 100.0)),
                };
                rows.push(Row {
                    name: "share path against the SQLite floor (same build, same machine)".into(),
                    median_ms: format!("{:.3}", ms(share)),
                    p90_ms: String::new(),
                    true_ms: format!("{:.3} (floor)", ms(m.hook_median())),
                    ratio: format!("{r:.2}× floor"),
                    target,
                    verdict,
                });
            }
        } else {
            notes.push(format!(
                "floors skipped: {} or {} is missing (scripts/bench.sh builds them)",
                empty.display(),
                sqlite.display()
            ));
        }
    }
    if want("default-config") {
        w.reset();
        let mut sleepers = Sleepers::default();
        seed_live(&w, "g", &mut sleepers);
        let m = measure_path(&w, "g", false, runs, Some(&w.default_config));
        eprintln!("  default-config: {:.3} ms", ms(m.hook_median()));
        rows.push(row("share path, shipped defaults (info level, syslog = true)", &m, None));
        notes.push(format!(
            "shipped defaults log two info lines per run to stderr{}",
            if Path::new("/dev/log").exists() {
                " and /dev/log"
            } else {
                " (no /dev/log on this machine: syslog is a failed connect)"
            }
        ));
    }
    if let (Some(first), Some(last)) = (scale.first(), scale.last())
        && last.0 > first.0
    {
        let g = ms(last.1.hook_median()) / ms(first.1.hook_median());
        rows.push(Row {
            name: format!("growth: cache {} → {} containers", first.0, last.0),
            median_ms: String::new(),
            p90_ms: String::new(),
            true_ms: String::new(),
            ratio: format!("{g:.2}×"),
            target: "≤ 1.2×".into(),
            verdict: if g <= 1.2 { "met".into() } else { format!("missed by {:.0}%", (g / 1.2 - 1.0) * 100.0) },
        });
    }
    if !real && want("burst") {
        let mut totals = Vec::new();
        let mut slowest = Duration::ZERO;
        let mut failures = 0;
        let mut bad_cookies = 0;
        let mut members_ok = true;
        for _ in 0..rounds {
            let b = burst(&w);
            totals.push(b.total);
            slowest = slowest.max(b.slowest);
            failures += b.failures;
            if b.cookies != 1 {
                bad_cookies += 1;
            }
            members_ok &= b.members == BURST;
        }
        let total = median(&mut totals);
        let worst = *totals.iter().max().unwrap();
        let single = share_median.unwrap_or(Duration::ZERO);
        let budget = single * BURST as u32;
        let ok = failures == 0 && bad_cookies == 0 && members_ok;
        rows.push(Row {
            name: format!("{BURST} hooks at once on one group: total wall (median of {rounds} rounds; worst)"),
            median_ms: format!("{:.1}", ms(total)),
            p90_ms: format!("{:.1}", ms(worst)),
            true_ms: String::new(),
            ratio: if single.is_zero() { String::new() } else { format!("{:.2}× budget", ms(total) / ms(budget)) },
            target: if single.is_zero() { "≤ 100 × single".into() } else { format!("≤ {:.1} ms", ms(budget)) },
            verdict: match (ok, total <= budget || single.is_zero()) {
                (false, _) => format!(
                    "FAILED: {failures} failed hooks, {bad_cookies} rounds without exactly one cookie, members ok: {members_ok}"
                ),
                (true, true) => "met; 0 failures, 1 cookie, 100 members".into(),
                (true, false) => format!("missed by {:.0}%", (ms(total) / ms(budget) - 1.0) * 100.0),
            },
        });
        if let Some(pm) = per_member {
            // Hook k of the burst verifies the k members before it; the single median paid for 10.
            let extra: f64 = (0..BURST).map(|k| (k as f64 - LIVE as f64) * ms(pm)).sum();
            let adjusted = ms(budget) + extra;
            rows.push(Row {
                name: format!("… against 100 × single + the members each hook verifies ({:.3} ms per member)", ms(pm)),
                median_ms: format!("{:.1}", ms(total)),
                p90_ms: String::new(),
                true_ms: String::new(),
                ratio: format!("{:.2}× work", ms(total) / adjusted),
                target: format!("{adjusted:.1} ms of work"),
                verdict: if ms(total) <= adjusted * 1.1 {
                    "no convoy: within 10% of the serial work".into()
                } else {
                    format!("{:.0}% above the serial work", (ms(total) / adjusted - 1.0) * 100.0)
                },
            });
        }
        rows.push(Row {
            name: format!("{BURST} hooks at once: slowest single hook (all rounds)"),
            median_ms: format!("{:.1}", ms(slowest)),
            p90_ms: String::new(),
            true_ms: String::new(),
            ratio: String::new(),
            target: String::new(),
            verdict: String::new(),
        });
    }
    if want("rss") {
        w.reset();
        let mut sleepers = Sleepers::default();
        seed_live(&w, "g", &mut sleepers);
        let (hook_kib, true_kib, how) = match rss_via_time(&w, "g") {
            Some((h, t)) => (h, t, "/usr/bin/time -f %M"),
            None => (max_rss.0, max_rss.1, "wait4 ru_maxrss (includes the harness's own peak: see /bin/true)"),
        };
        let mib = hook_kib as f64 / 1024.0;
        rows.push(Row {
            name: format!("peak RSS of one hook, share path ({how})"),
            median_ms: format!("{mib:.1} MiB"),
            p90_ms: String::new(),
            true_ms: format!("{:.1} MiB", true_kib as f64 / 1024.0),
            ratio: String::new(),
            target: "≤ 8 MiB".into(),
            verdict: if mib <= 8.0 { "met".into() } else { format!("missed by {:.0}%", (mib / 8.0 - 1.0) * 100.0) },
        });
    }

    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n| scenario ({}; {runs} runs each) | hook median ms | hook p90 ms | /bin/true median ms | ratio | target | verdict |",
        if real { "real kernel" } else { "fake kernel" }
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---|---|");
    for r in &rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.name, r.median_ms, r.p90_ms, r.true_ms, r.ratio, r.target, r.verdict
        );
    }
    for n in &notes {
        let _ = writeln!(out, "\nNote: {n}.");
    }
    for t in &tables {
        out.push_str(t);
    }
    print!("{out}");
    let failed = rows.iter().any(|r| r.verdict.starts_with("FAILED"));
    std::process::exit(if failed { 1 } else { 0 });
}
