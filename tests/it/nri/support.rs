//! The fake runtime and the plugin process the NRI tests drive: [`Plugin`] (the real binary,
//! its stderr in a file, killed on drop), [`Runtime`] (the runtime's end of one connection,
//! speaking NRI's mux + ttrpc framing through the crate's own `nri::wire` and `nri::messages`),
//! and the pods, containers and command lines they use.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use oci_coresched_hook::agent::nri::messages::{
    ConfigureRequest, ConfigureResponse, Container, Empty, LinuxContainer, PLUGIN_SERVICE, PodSandbox, RUNTIME_SERVICE,
    RegisterPluginRequest, SynchronizeRequest, state,
};
use oci_coresched_hook::agent::nri::proto::Message;
use oci_coresched_hook::agent::nri::ttrpc::{Request, Response, code};
use oci_coresched_hook::agent::nri::wire::{
    self, Conn, FLAG_REMOTE_CLOSED, Incoming, PLUGIN_CONN, RUNTIME_CONN, TYPE_REQUEST, TYPE_RESPONSE,
};

use crate::common::wait::{wait_for, wait_until};

pub(crate) const WAIT: Duration = Duration::from_secs(20);
pub(crate) const HOOK_PATH: &str = "/host/usr/bin/oci-coresched-hook";

/// The plugin process; killed on drop, its stderr printed if the test is failing.
pub(crate) struct Plugin {
    child: Child,
    stderr: PathBuf,
}

impl Plugin {
    /// Spawns `cmd` with a 50 ms first backoff step unless `cmd` sets its own.
    pub(crate) fn spawn(mut cmd: Command, dir: &Path) -> Self {
        let stderr = dir.join("plugin.stderr");
        if !cmd.get_envs().any(|(k, _)| k == "OCH_NRI_BACKOFF_MS") {
            cmd.env("OCH_NRI_BACKOFF_MS", "50");
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(File::create(&stderr).expect("stderr file"));
        let child = cmd.spawn().expect("spawn the plugin");
        Self { child, stderr }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits until the log has a line containing `what`.
    pub(crate) fn wait_for_log(&self, what: &str) {
        wait_until(&format!("the plugin to log {what:?}"), WAIT, || self.log().contains(what));
    }

    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// SIGTERM, then the exit code.
    pub(crate) fn terminate(&mut self) -> Option<i32> {
        // SAFETY: kill(2) has no memory-safety preconditions; the pid is our unreaped child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status =
            wait_for("the plugin to exit on SIGTERM", WAIT, || self.child.try_wait().expect("wait").ok_or("running"));
        status.code()
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- plugin stderr ---\n{}", self.log());
        }
    }
}

/// The runtime's end of one plugin connection.
pub(crate) struct Runtime {
    conn: Conn<UnixStream>,
    next_stream: u32,
}

pub(crate) fn accept(listener: &UnixListener) -> Runtime {
    wait_for("the plugin to connect", WAIT, || try_accept(listener).ok_or("no connection"))
}

/// A connection the plugin made, if one is waiting.
pub(crate) fn try_accept(listener: &UnixListener) -> Option<Runtime> {
    listener.set_nonblocking(true).unwrap();
    match listener.accept() {
        Ok((s, _)) => {
            s.set_nonblocking(false).unwrap();
            Some(Runtime { conn: Conn::new(s), next_stream: 1 })
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
        Err(e) => panic!("accept: {e}"),
    }
}

impl Runtime {
    pub(crate) fn recv(&mut self) -> Incoming {
        let end = Instant::now() + WAIT;
        loop {
            if let Some(m) = self.conn.recv(end).expect("read from the plugin") {
                return m;
            }
            assert!(Instant::now() < end, "the plugin sent nothing");
        }
    }

    /// Answers the plugin's RegisterPlugin call and returns what it registered.
    pub(crate) fn expect_register(&mut self) -> RegisterPluginRequest {
        let Incoming::Message(m) = self.recv() else { panic!("expected a message") };
        assert_eq!((m.conn, m.kind, m.flags), (RUNTIME_CONN, TYPE_REQUEST, FLAG_REMOTE_CLOSED));
        let req = Request::decode(&m.payload).unwrap();
        assert_eq!((req.service.as_str(), req.method.as_str()), (RUNTIME_SERVICE, "RegisterPlugin"));
        let reply = Response::ok(&Empty).to_bytes();
        self.conn.send(RUNTIME_CONN, m.stream_id, TYPE_RESPONSE, 0, &reply).unwrap();
        RegisterPluginRequest::decode(&req.payload).unwrap()
    }

    pub(crate) fn call_raw(&mut self, request: &[u8]) -> Response {
        let sid = self.next_stream;
        self.next_stream += 2;
        self.conn.send(PLUGIN_CONN, sid, TYPE_REQUEST, FLAG_REMOTE_CLOSED, request).unwrap();
        match self.recv() {
            Incoming::Message(m) if m.conn == PLUGIN_CONN && m.stream_id == sid => {
                assert_eq!(m.kind, TYPE_RESPONSE);
                Response::decode(&m.payload).unwrap()
            }
            other => panic!("unexpected {other:?} while waiting for the answer on stream {sid}"),
        }
    }

    pub(crate) fn call(&mut self, method: &str, payload: Vec<u8>) -> Response {
        let req =
            Request { service: PLUGIN_SERVICE.into(), method: method.into(), payload, timeout_nano: 2_000_000_000 };
        self.call_raw(&req.to_bytes())
    }

    pub(crate) fn configure(&mut self) {
        self.configure_as("fake", "0.6.1");
    }

    pub(crate) fn configure_as(&mut self, runtime_name: &str, runtime_version: &str) {
        let c = ConfigureRequest {
            config: String::new(),
            runtime_name: runtime_name.into(),
            runtime_version: runtime_version.into(),
        };
        let r = self.call("Configure", c.to_bytes());
        assert_eq!(r.code(), code::OK, "{r:?}");
        assert_eq!(
            ConfigureResponse::decode(&r.payload).unwrap().events,
            (1 << 3) | (1 << 5),
            "CreateContainer and StartContainer"
        );
    }

    pub(crate) fn synchronize(&mut self, pods: Vec<PodSandbox>, containers: Vec<Container>) {
        let r = self.call("Synchronize", SynchronizeRequest { pods, containers, more: false }.to_bytes());
        assert_eq!((r.code(), r.payload.len()), (code::OK, 0), "no updates: {r:?}");
    }

    /// The bytes of a call of `method` on stream `sid`, framed for the mux, for sending unanswered.
    pub(crate) fn call_frames(sid: u32, method: &str, payload: Vec<u8>) -> Vec<u8> {
        let req = Request { service: PLUGIN_SERVICE.into(), method: method.into(), payload, timeout_nano: 0 };
        wire::mux_frames(PLUGIN_CONN, &wire::ttrpc_message(sid, TYPE_REQUEST, FLAG_REMOTE_CLOSED, &req.to_bytes()))
    }

    /// The socket.
    pub(crate) fn socket(&self) -> &UnixStream {
        self.conn.get_ref()
    }

    pub(crate) fn write_raw(&mut self, bytes: &[u8]) {
        use std::io::Write;
        let mut s = self.conn.get_ref();
        s.write_all(bytes).unwrap();
    }
}

pub(crate) fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

pub(crate) fn pod() -> PodSandbox {
    PodSandbox {
        id: "sb1".into(),
        name: "web-0".into(),
        uid: "uid-1".into(),
        namespace: "tenant-a".into(),
        annotations: map(&[
            ("oci-coresched-hook/group", "web"),
            ("oci-coresched-hook/policy", "default"),
            ("koordinator.sh/qosClass", "LS"),
            ("other.example/pod", "x"),
            ("io.kubernetes.pod.namespace", "kube-system"),
        ]),
    }
}

pub(crate) fn container(id: &str, pid: u32, ann: &[(&str, &str)]) -> Container {
    Container {
        id: id.into(),
        pod_sandbox_id: "sb1".into(),
        name: "app".into(),
        state: state::RUNNING,
        annotations: map(ann),
        linux: Some(LinuxContainer { cgroups_path: "/kubepods/burstable/pod-uid-1/".into() }),
        pid,
    }
}

pub(crate) struct Setup {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) socket: PathBuf,
}

pub(crate) fn setup(tag: &str) -> Setup {
    let dir = tempfile::Builder::new().prefix(&format!("och-nri-{tag}-")).tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), "syslog = false\nlog_level = \"debug\"\n").unwrap();
    let socket = dir.path().join("nri.sock");
    Setup { dir, socket }
}

/// A plugin started on a fresh socket, registered and configured, with the runtime's end of its
/// connection (and the listener, for its reconnects).
pub(crate) fn connected(tag: &str) -> (Setup, UnixListener, Plugin, Runtime) {
    let s = setup(tag);
    let listener = UnixListener::bind(&s.socket).unwrap();
    let plugin = Plugin::spawn(plugin_cmd(&s, &[]), s.dir.path());
    let mut rt = accept(&listener);
    rt.expect_register();
    rt.configure();
    (s, listener, plugin, rt)
}

pub(crate) fn plugin_cmd(s: &Setup, extra: &[&str]) -> Command {
    let mut cmd = Command::new(crate::common::HOOK);
    cmd.env_remove("RUST_LOG")
        .arg("--config")
        .arg(s.dir.path().join("config.toml"))
        .arg("--state-dir")
        .arg(s.dir.path().join("state"))
        .args(["nri", "--socket"])
        .arg(&s.socket)
        .args(["--hook-path", HOOK_PATH])
        .args(extra);
    cmd
}
