//! A runtime's side of NRI for `make bench-footprint`: listens on a socket, takes the plugin's
//! registration, configures it, synchronizes the containers a node already runs, then creates and
//! starts containers at a steady rate (CreateContainer, then the StartContainer state change), as
//! containerd does for a node's pod churn. Prints how many calls it made and the slowest answer.
//!
//!   nri-churn SOCKET --pids FILE --rate PER_SECOND --seconds SECONDS
//!
//! FILE: one line per running container, `ID PID NAMESPACE` (the pods to synchronize).
//! Built on the crate's own NRI wire and messages (the protocol's runtime end is not in the
//! library's API surface for anything else).

use std::collections::BTreeMap;
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use oci_coresched_hook::agent::nri::messages::{
    ConfigureRequest, Container, CreateContainerRequest, LinuxContainer, PLUGIN_SERVICE, PodSandbox, RUNTIME_SERVICE,
    StateChangeEvent, SynchronizeRequest, event, state,
};
use oci_coresched_hook::agent::nri::proto::Message;
use oci_coresched_hook::agent::nri::ttrpc::{Request, Response, code};
use oci_coresched_hook::agent::nri::wire::{
    Conn, FLAG_REMOTE_CLOSED, Incoming, PLUGIN_CONN, RUNTIME_CONN, TYPE_REQUEST, TYPE_RESPONSE,
};

fn die(msg: &str) -> ! {
    eprintln!("nri-churn: {msg}");
    std::process::exit(2);
}

fn arg(args: &[String], name: &str) -> String {
    args.windows(2).find(|w| w[0] == name).map(|w| w[1].clone()).unwrap_or_else(|| die(&format!("{name} is missing")))
}

fn pod(id: &str, namespace: &str) -> PodSandbox {
    let annotations = BTreeMap::from([("oci-coresched-hook/group".to_string(), "web".to_string())]);
    PodSandbox {
        id: format!("sb-{id}"),
        name: id.into(),
        uid: format!("uid-{id}"),
        namespace: namespace.into(),
        annotations,
    }
}

fn container(id: &str, pid: u32) -> Container {
    Container {
        id: id.into(),
        pod_sandbox_id: format!("sb-{id}"),
        name: "app".into(),
        state: if pid > 0 { state::RUNNING } else { state::CREATED },
        annotations: BTreeMap::new(),
        linux: Some(LinuxContainer { cgroups_path: format!("/kubepods/burstable/pod{id}/{id}") }),
        pid,
    }
}

struct Runtime {
    conn: Conn<std::os::unix::net::UnixStream>,
    next: u32,
    slowest: Duration,
}

impl Runtime {
    fn recv(&mut self) -> Incoming {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            match self.conn.recv(end) {
                Ok(Some(m)) => return m,
                Ok(None) if Instant::now() < end => {}
                Ok(None) => die("the plugin sent nothing for 30 s"),
                Err(e) => die(&format!("failed to read from the plugin: {e}")),
            }
        }
    }

    fn call(&mut self, method: &str, payload: Vec<u8>) -> Response {
        let req =
            Request { service: PLUGIN_SERVICE.into(), method: method.into(), payload, timeout_nano: 2_000_000_000 };
        let sid = self.next;
        self.next += 2;
        let since = Instant::now();
        if let Err(e) = self.conn.send(PLUGIN_CONN, sid, TYPE_REQUEST, FLAG_REMOTE_CLOSED, &req.to_bytes()) {
            die(&format!("failed to call {method}: {e}"));
        }
        loop {
            if let Incoming::Message(m) = self.recv()
                && m.conn == PLUGIN_CONN
                && m.stream_id == sid
                && m.kind == TYPE_RESPONSE
            {
                self.slowest = self.slowest.max(since.elapsed());
                let r = Response::decode(&m.payload).unwrap_or_else(|e| die(&format!("bad answer to {method}: {e}")));
                if r.code() != code::OK {
                    die(&format!("{method} answered {r:?}"));
                }
                return r;
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let socket = args
        .get(1)
        .filter(|a| !a.starts_with("--"))
        .unwrap_or_else(|| die("usage: nri-churn SOCKET --pids FILE --rate N --seconds S"));
    let pids = std::fs::read_to_string(arg(&args, "--pids")).unwrap_or_else(|e| die(&format!("--pids: {e}")));
    let rate: f64 = arg(&args, "--rate").parse().unwrap_or_else(|_| die("--rate: a number"));
    let seconds: u64 = arg(&args, "--seconds").parse().unwrap_or_else(|_| die("--seconds: a whole number"));
    let listener = UnixListener::bind(socket).unwrap_or_else(|e| die(&format!("failed to bind {socket}: {e}")));
    let (stream, _) = listener.accept().unwrap_or_else(|e| die(&format!("failed to accept: {e}")));
    let mut rt = Runtime { conn: Conn::new(stream), next: 1, slowest: Duration::ZERO };
    // RegisterPlugin, answered.
    let Incoming::Message(m) = rt.recv() else { die("expected the registration") };
    let reg = Request::decode(&m.payload).unwrap_or_else(|e| die(&format!("bad registration: {e}")));
    if m.conn != RUNTIME_CONN || reg.service != RUNTIME_SERVICE {
        die("expected RegisterPlugin");
    }
    let ok = Response::ok(&oci_coresched_hook::agent::nri::messages::Empty).to_bytes();
    rt.conn.send(RUNTIME_CONN, m.stream_id, TYPE_RESPONSE, 0, &ok).unwrap_or_else(|e| die(&e.to_string()));
    let c = ConfigureRequest { config: String::new(), runtime_name: "nri-churn".into(), runtime_version: "1".into() };
    rt.call("Configure", c.to_bytes());
    let (mut pods, mut containers) = (Vec::new(), Vec::new());
    for line in pids.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [id, pid, ns] = f[..] else { die(&format!("--pids: bad line {line:?}")) };
        pods.push(pod(id, ns));
        containers.push(container(id, pid.parse().unwrap_or_else(|_| die(&format!("--pids: bad pid in {line:?}")))));
    }
    let synced = containers.len();
    rt.call("Synchronize", SynchronizeRequest { pods, containers, more: false }.to_bytes());
    let start = Instant::now();
    let every = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let mut created = 0u64;
    while start.elapsed() < Duration::from_secs(seconds) {
        let id = format!("churn{created}");
        let (p, c) = (pod(&id, "churn"), container(&id, 0));
        let create = CreateContainerRequest { pod: Some(p.clone()), container: Some(c.clone()) };
        rt.call("CreateContainer", create.to_bytes());
        let start_ev = StateChangeEvent { event: event::START_CONTAINER, pod: Some(p), container: Some(c) };
        rt.call("StateChange", start_ev.to_bytes());
        created += 1;
        let next = start + every * created as u32;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    println!(
        "synchronized={synced} created={created} seconds={:.1} slowest_answer_ms={:.2}",
        start.elapsed().as_secs_f64(),
        rt.slowest.as_secs_f64() * 1e3
    );
}
