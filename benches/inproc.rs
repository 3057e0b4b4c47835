//! In-process parts of a hook run (issue 6, item 1), with criterion: state parsing, config
//! parsing, the decision (with and without reading the bundle's `config.json`), opening the cache,
//! and a whole `hook::run` share path (lock, SQLite, `/proc`, relay thread) over the fake kernel,
//! both in memory and through the shared state file the whole-process benchmark uses; and the
//! follower's (`reconcile --follow`) cost per process event.
//!
//! Run: `cargo bench --features fake-kernel --bench inproc` (part of `make bench`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use oci_coresched_hook::config::Config;
use oci_coresched_hook::cookies::engine::{Engine, EnsureRequest};
use oci_coresched_hook::decide::policy;
use oci_coresched_hook::hook;
use oci_coresched_hook::host::kernel::CoreSched;
use oci_coresched_hook::host::kernel::fake::FakeKernel;
use oci_coresched_hook::host::oci_state;
use oci_coresched_hook::host::procfs::ProcFs;
use oci_coresched_hook::host::state_dir::StateDir;
use oci_coresched_hook::host::system::System;
use oci_coresched_hook::store::Store;
use oci_coresched_hook::values::Labels;

const RUNC_STATE: &[u8] = include_bytes!("../tests/fixtures/states/runc-createRuntime.json");
const RUNC_SPEC: &str = include_str!("../tests/fixtures/states/runc-config.json");
const BENCH_CONFIG: &str = "syslog = false\nlog_level = \"warn\"\nfail_closed = true\n";

struct Sleepers(Vec<Child>);

impl Sleepers {
    fn new(n: usize) -> Self {
        Self(
            (0..n)
                .map(|_| {
                    Command::new("sleep")
                        .arg("100000")
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .spawn()
                        .expect("spawn sleep")
                })
                .collect(),
        )
    }
    fn pids(&self) -> Vec<i32> {
        self.0.iter().map(|c| c.id() as i32).collect()
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

fn state_for(id: &str, pid: i32, bundle: Option<&Path>) -> oci_state::State {
    let bundle = bundle.map(|b| format!(",\"bundle\":\"{}\"", b.display())).unwrap_or_default();
    let json = format!(
        "{{\"ociVersion\":\"1.0.2\",\"id\":\"{id}\",\"status\":\"creating\",\"pid\":{pid}{bundle},\
         \"annotations\":{{\"oci-coresched-hook/group\":\"g\",\"io.kubernetes.pod.namespace\":\"default\"}}}}"
    );
    oci_state::parse_state(json.as_bytes()).unwrap()
}

fn benches(c: &mut Criterion) {
    let tmp =
        tempfile::Builder::new().prefix("och-inproc-").tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
    let bundle = tmp.path().join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    std::fs::write(bundle.join("config.json"), RUNC_SPEC).unwrap();
    let config = Config::parse(BENCH_CONFIG, Path::new("bench.toml")).unwrap();

    c.bench_function("state: parse a runc createRuntime state (1 KB)", |b| {
        b.iter(|| oci_state::parse_state(std::hint::black_box(RUNC_STATE)).unwrap())
    });
    c.bench_function("config: parse the bench config.toml", |b| {
        b.iter(|| Config::parse(std::hint::black_box(BENCH_CONFIG), Path::new("bench.toml")).unwrap())
    });
    let no_bundle = state_for("c1", 4242, None);
    c.bench_function("decision: annotations + config (no bundle)", |b| {
        b.iter(|| policy::decide(&hook::input(std::hint::black_box(&no_bundle), None).unwrap(), &config).unwrap())
    });
    let with_bundle = state_for("c1", 4242, Some(&bundle));
    c.bench_function("decision: with the bundle's config.json (read + parse of the fields used, 5.8 KB)", |b| {
        b.iter(|| policy::decide(&hook::input(std::hint::black_box(&with_bundle), None).unwrap(), &config).unwrap())
    });

    // A cache with 10 live members of default/g (real `sleep` processes, real /proc).
    let sleepers = Sleepers::new(11);
    let pids = sleepers.pids();
    let (members, target) = (&pids[..10], pids[10]);
    let state_dir = tmp.path().join("state");
    let proc = ProcFs::default();
    let kernel = FakeKernel::new(ProcFs::default());
    let sys = System {
        kernel: &kernel,
        proc: proc.clone(),
        cgroup_root: PathBuf::from("/sys/fs/cgroup"),
        state_dir: state_dir.clone(),
        runtime_roots: Vec::new(),
        sys_root: PathBuf::from("/sys"),
    };
    for (i, &pid) in members.iter().enumerate() {
        let d =
            policy::decide(&hook::input(&state_for(&format!("live-{i}"), pid, None), None).unwrap(), &config).unwrap();
        hook::run(&d, &config, &sys).unwrap();
    }
    let dir = StateDir::open(&state_dir).unwrap();

    c.bench_function("cache: state dir check + lock + Store::open + close (10 members)", |b| {
        b.iter(|| {
            let d = StateDir::open(&state_dir).unwrap();
            let _l = d.lock(Duration::from_secs(3)).unwrap();
            drop(Store::open(&d.db_path()).unwrap());
        })
    });
    c.bench_function("cache: Store::open + ensure (share from 10 live) + commit, fake kernel in memory", |b| {
        b.iter_batched(
            || kernel.force(target, 0),
            |()| {
                let _l = dir.lock(Duration::from_secs(3)).unwrap();
                let store = Store::open(&dir.db_path()).unwrap();
                let req = EnsureRequest {
                    container_id: "target".into(),
                    group: "default/g".into(),
                    pid: target,
                    labels: Labels { namespace: Some("default".into()), ..Default::default() },
                };
                store.transaction(|s| Engine::new(&kernel, &proc, s).ensure(&req)).unwrap();
            },
            BatchSize::PerIteration,
        )
    });
    let decision =
        policy::decide(&hook::input(&state_for("target", target, Some(&bundle)), None).unwrap(), &config).unwrap();
    c.bench_function("hook::run share path (10 live), fake kernel in memory", |b| {
        b.iter_batched(
            || kernel.force(target, 0),
            |()| hook::run(&decision, &config, &sys).unwrap(),
            BatchSize::PerIteration,
        )
    });
    // The same through the shared state file (what the whole-process benchmark pays on top of
    // the real kernel: every kernel call opens, flocks, parses and rewrites a JSON file).
    let file = tmp.path().join("fake-kernel.json");
    let shared = FakeKernel::shared(ProcFs::default(), &file);
    for &pid in members {
        let _ = shared.create(pid, oci_coresched_hook::host::kernel::Scope::Thread);
    }
    // Re-seed the group so its cookies live in the shared kernel.
    let shared_dir = tmp.path().join("state-shared");
    let shared_sys = System {
        kernel: &shared,
        proc: proc.clone(),
        cgroup_root: PathBuf::from("/sys/fs/cgroup"),
        state_dir: shared_dir.clone(),
        runtime_roots: Vec::new(),
        sys_root: PathBuf::from("/sys"),
    };
    for (i, &pid) in members.iter().enumerate() {
        let d =
            policy::decide(&hook::input(&state_for(&format!("live-{i}"), pid, None), None).unwrap(), &config).unwrap();
        hook::run(&d, &config, &shared_sys).unwrap();
    }
    c.bench_function("hook::run share path (10 live), fake kernel through its shared file", |b| {
        b.iter_batched(
            || shared.force(target, 0),
            |()| hook::run(&decision, &config, &shared_sys).unwrap(),
            BatchSize::PerIteration,
        )
    });
    c.bench_function("fake kernel: one GET through the shared file", |b| b.iter(|| shared.get(target).unwrap()));
    drop(sleepers);
    follower(c, tmp.path());
    audit_node(c, tmp.path());
}

/// `reconcile --follow`'s cost per process event (issue 13): a view of 100 members, each in a
/// cgroup of its own, over a fake `/proc` (files in `dir`) and the fake kernel in memory; and the
/// commonest event on a node, a process outside every member cgroup, against the real `/proc`.
fn follower(c: &mut Criterion, dir: &Path) {
    use oci_coresched_hook::agent::follow::Follower;
    use oci_coresched_hook::host::kernel::Scope;
    use oci_coresched_hook::host::kernel::fake::FakeProc;
    use oci_coresched_hook::host::proc_events::Event;
    use oci_coresched_hook::store::Member;

    let fp = FakeProc::new(dir.join("follow-proc")).unwrap();
    let kernel = FakeKernel::new(fp.procfs());
    let store = Store::open(&dir.join("follow.db")).unwrap();
    for i in 0..100 {
        let (pid, cg) = (1000 + i, format!("/kubepods/pod{i}/c"));
        fp.spawn(pid, 7, 0, &cg).unwrap();
        kernel.create(pid, Scope::ThreadGroup).unwrap();
        let labels = Labels { cgroup: Some(cg), ..Default::default() };
        store
            .transaction(|tx| {
                tx.upsert_member(&Member { labels, ..Member::new(format!("c{i}"), format!("g{i}"), pid, 7) })
            })
            .unwrap();
    }
    let (outside, member) = (5000, 5001);
    fp.spawn(outside, 7, 0, "/system.slice/cron.service").unwrap();
    fp.spawn(member, 7, 0, "/kubepods/pod50/c").unwrap();
    let proc = fp.procfs();
    let mut f = Follower::new(&kernel, &proc);
    f.refresh(&store).unwrap();
    let exec = |tgid| Event::Exec { tgid, at_ns: 0 };
    c.bench_function("follow: event outside every member cgroup (100 members), fake /proc", |b| {
        b.iter(|| f.handle(exec(outside)))
    });
    f.handle(exec(member));
    c.bench_function("follow: event of a member-cgroup process that has its cookie (one GET)", |b| {
        b.iter(|| f.handle(exec(member)))
    });
    c.bench_function("follow: event of a process without its cookie (relay thread + verify)", |b| {
        b.iter_batched(|| kernel.force(member, 0), |()| f.handle(exec(member)), BatchSize::PerIteration)
    });
    let real = ProcFs::default();
    let mut on_host = Follower::new(&kernel, &real);
    on_host.view = f.view.clone();
    let sleeper = Sleepers::new(1);
    let pid = sleeper.pids()[0];
    c.bench_function("follow: event outside every member cgroup (100 members), real /proc", |b| {
        b.iter(|| on_host.handle(exec(pid)))
    });
}

/// `audit` of a node of 1,000 members of 10 threads each (100 groups of 10), and 200 other
/// processes, over a fake `/proc` and the fake kernel in memory: every thread read and judged.
/// The target: at most 200 ms.
fn audit_node(c: &mut Criterion, dir: &Path) {
    use oci_coresched_hook::host::kernel::fake::FakeProc;
    use oci_coresched_hook::store::Member;

    let fp = FakeProc::new(dir.join("audit-proc")).unwrap();
    let kernel = FakeKernel::new(fp.procfs());
    let store = Store::open(&dir.join("audit.db")).unwrap();
    store
        .transaction(|s| -> Result<(), oci_coresched_hook::store::StoreError> {
            for i in 0..1000 {
                let (pid, cg, group) = (10_000 + 16 * i, format!("/kubepods/pod{i}/c"), i / 10);
                fp.spawn(pid, 7, 9, &cg).unwrap();
                let cookie = 0x1000 + group as u64;
                kernel.force(pid, cookie);
                let labels = Labels { cgroup: Some(cg), ..Default::default() };
                s.upsert_member(&Member {
                    cookie,
                    labels,
                    ..Member::new(format!("c{i}"), format!("g{group}"), pid, 7)
                })?;
            }
            Ok(())
        })
        .unwrap();
    for i in 0..200 {
        fp.spawn(40_000 + 2 * i, 7, 1, "/system.slice/other.service").unwrap();
    }
    let proc = fp.procfs();
    let config = Config::default();
    let r = oci_coresched_hook::ops::audit::audit(Some(&store), &kernel, &proc, &[], &config).unwrap();
    assert_eq!((r.members, r.threads, r.violations.len()), (1000, 10_400, 0), "the node as built");
    c.bench_function("audit: 1,000 members x 10 threads + 200 other processes, fake /proc (target <= 200 ms)", |b| {
        b.iter(|| oci_coresched_hook::ops::audit::audit(Some(&store), &kernel, &proc, &[], &config).unwrap())
    });
}

criterion_group! {
    name = inproc;
    config = Criterion::default().sample_size(50).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = benches
}
criterion_main!(inproc);
