//! The HTTP endpoint of the long-running commands (`nri`, `reconcile --follow`) when asked for
//! with `--listen`: `/metrics` (Prometheus text), `/healthz` (the command's loop is turning) and
//! `/readyz` (it does its job), from the [`Board`] the command publishes to.
//!
//! It runs on a thread of its own with non-blocking sockets and one `poll`, so whatever a client
//! does (trickle bytes, send megabytes, speak TLS or SSH, open hundreds of connections, never read
//! the answer), the command's own loop is never waited on: it only ever swaps a pointer on the
//! board. Each connection is bounded: [`Limits::max_request`] bytes of request head, one request,
//! [`Limits::deadline`] from accept to the last byte of the answer, then closed; at most
//! [`Limits::max_connections`] at once, a connection past them answered 503 and closed at once.
//! An address that cannot be bound is logged once and tried again every [`REBIND_EVERY`]: the
//! command keeps doing its job without the endpoint.
//!
//! No HTTP library: the endpoint needs one request per connection and three fixed pages, and the
//! hook's binary is the same file (ARCHITECTURE.md, "Libraries").

pub mod board;
pub mod http;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};

pub use board::Board;
use http::Head;

/// How long after a failed bind the endpoint tries again.
pub const REBIND_EVERY: Duration = Duration::from_secs(10);
/// The longest the endpoint's thread sleeps before it looks at its stop flag.
const TICK: Duration = Duration::from_millis(200);

/// The bounds on what clients may take.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Bytes of request head.
    pub max_request: usize,
    /// From accept to the answer's last byte.
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_connections: 32, max_request: 8192, deadline: Duration::from_secs(5) }
    }
}

/// The endpoint's thread; stopped and joined on drop.
#[derive(Debug)]
pub struct Endpoint {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Endpoint {
    /// Starts serving `board` on `addr` (`port 0`: a port the kernel picks, logged).
    pub fn start(addr: SocketAddr, board: Arc<Board>, limits: Limits) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread =
            std::thread::Builder::new().name("endpoint".into()).spawn(move || serve(addr, &board, limits, &flag))?;
        Ok(Self { stop, thread: Some(thread) })
    }
}

/// The endpoint a long-running command was asked for (`--listen`), if any; a thread that cannot
/// be started is logged, and the command goes on without it.
pub fn serve_if_asked(listen: Option<SocketAddr>, board: &Arc<Board>) -> Option<Endpoint> {
    let addr = listen?;
    match Endpoint::start(addr, board.clone(), Limits::default()) {
        Ok(e) => Some(e),
        Err(e) => {
            log::error!("failed to start the endpoint's thread: {e}; /metrics, /healthz and /readyz are not served");
            None
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn stopped(flag: &AtomicBool) -> bool {
    flag.load(Ordering::SeqCst) || crate::agent::signals::stopping()
}

fn serve(addr: SocketAddr, board: &Board, limits: Limits, flag: &AtomicBool) {
    let mut last_error = String::new();
    while !stopped(flag) {
        match TcpListener::bind(addr).and_then(|l| l.set_nonblocking(true).map(|()| l)) {
            Ok(listener) => {
                let local = listener.local_addr().map_or_else(|_| addr.to_string(), |a| a.to_string());
                log::info!("serving /metrics, /healthz and /readyz on http://{local}");
                serve_on(&listener, board, limits, flag);
                return;
            }
            Err(e) => {
                let msg = format!(
                    "failed to listen on {addr}: {e}; /metrics, /healthz and /readyz are not served \
                     (trying again every {} s)",
                    REBIND_EVERY.as_secs()
                );
                if msg != last_error {
                    log::error!("{msg}");
                    last_error = msg;
                }
                let until = Instant::now() + REBIND_EVERY;
                while !stopped(flag) && Instant::now() < until {
                    std::thread::sleep(TICK);
                }
            }
        }
    }
}

/// One client connection.
struct Conn {
    stream: TcpStream,
    since: Instant,
    head: Vec<u8>,
    /// The answer and how much of it is written, once the head is judged.
    answer: Option<(Vec<u8>, usize)>,
    /// The answer is sent: what the client still sends is read and dropped until it closes (or
    /// the deadline), so that closing with unread bytes does not reset the connection before the
    /// client has read the answer.
    draining: bool,
}

enum Turn {
    Keep,
    Close,
}

impl Conn {
    /// Reads what is there; judges the head as soon as it can.
    fn read(&mut self, board: &Board, limits: Limits) -> Turn {
        const CHUNK: usize = 2048;
        let mut chunk = [0u8; CHUNK];
        loop {
            let room = limits.max_request.saturating_sub(self.head.len()).max(1);
            match self.stream.read(&mut chunk[..room.min(CHUNK)]) {
                Ok(0) => return Turn::Close,
                Ok(n) => {
                    self.head.extend_from_slice(&chunk[..n]);
                    let head = http::parse(&self.head, limits.max_request);
                    if head != Head::Partial {
                        self.answer = Some((http::respond(&head, board), 0));
                        return self.write();
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Turn::Keep,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Turn::Close,
            }
        }
    }

    /// Writes what the socket takes of the answer.
    fn write(&mut self) -> Turn {
        let Some((bytes, done)) = &mut self.answer else { return Turn::Keep };
        while *done < bytes.len() {
            match self.stream.write(&bytes[*done..]) {
                Ok(0) => return Turn::Close,
                Ok(n) => *done += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Turn::Keep,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Turn::Close,
            }
        }
        let _ = self.stream.shutdown(Shutdown::Write);
        self.draining = true;
        self.drain()
    }

    /// Reads and drops what the client still sends; closes at its end.
    fn drain(&mut self) -> Turn {
        let mut sink = [0u8; 4096];
        loop {
            match self.stream.read(&mut sink) {
                Ok(0) => return Turn::Close,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Turn::Keep,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Turn::Close,
            }
        }
    }
}

/// A best-effort answer on a fresh socket (its send buffer is empty, so it is taken whole) before
/// closing it.
fn refuse(mut stream: TcpStream, status: u16) {
    let _ = stream.set_nonblocking(true);
    let _ = stream.write(&http::refusal(status));
    let _ = stream.shutdown(Shutdown::Write);
}

fn serve_on(listener: &TcpListener, board: &Board, limits: Limits, flag: &AtomicBool) {
    let mut conns: Vec<Conn> = Vec::new();
    while !stopped(flag) {
        let now = Instant::now();
        // Past their deadline: a head still incomplete gets 408, an answer not taken is dropped.
        conns.retain_mut(|c| {
            if now.duration_since(c.since) < limits.deadline {
                return true;
            }
            if c.answer.is_none() {
                let _ = c.stream.write(&http::refusal(408));
            }
            false
        });
        let next_deadline = conns.iter().map(|c| c.since + limits.deadline).min();
        let wait = next_deadline.map_or(TICK, |d| d.saturating_duration_since(now).min(TICK));
        let ready: Vec<PollFlags> = {
            let mut fds = Vec::with_capacity(conns.len() + 1);
            fds.push(PollFd::new(listener, PollFlags::IN));
            for c in &conns {
                let want = if c.answer.is_some() && !c.draining { PollFlags::OUT } else { PollFlags::IN };
                fds.push(PollFd::from_borrowed_fd(c.stream.as_fd(), want));
            }
            let ts = Timespec::try_from(wait).ok();
            match rustix::event::poll(&mut fds, ts.as_ref()) {
                Ok(_) => fds.iter().map(PollFd::revents).collect(),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    log::warn!("endpoint: failed to poll its sockets: {e}");
                    std::thread::sleep(TICK);
                    continue;
                }
            }
        };
        let mut i = 0;
        conns.retain_mut(|c| {
            i += 1;
            let r = ready[i];
            if r.is_empty() {
                return true;
            }
            let turn = if c.draining {
                c.drain()
            } else if c.answer.is_some() {
                c.write()
            } else {
                c.read(board, limits)
            };
            matches!(turn, Turn::Keep)
        });
        if !ready[0].is_empty() {
            accept(listener, &mut conns, limits);
        }
    }
}

/// Accepts what is waiting: into `conns` while there is room (made by closing a connection whose
/// answer is sent, if any), else answered 503 and closed.
fn accept(listener: &TcpListener, conns: &mut Vec<Conn>, limits: Limits) {
    for _ in 0..limits.max_connections.max(16) {
        match listener.accept() {
            Ok((stream, _)) => {
                if conns.len() >= limits.max_connections {
                    // A connection already answered gives its slot up first.
                    match conns.iter().position(|c| c.draining) {
                        Some(i) => drop(conns.swap_remove(i)),
                        None => {
                            refuse(stream, 503);
                            continue;
                        }
                    }
                }
                if stream.set_nonblocking(true).is_ok() {
                    conns.push(Conn { stream, since: Instant::now(), head: Vec::new(), answer: None, draining: false });
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                // EMFILE and the like: what is served goes on; the next turn tries again.
                log::debug!("endpoint: failed to accept a connection: {e}");
                return;
            }
        }
    }
}

/// Parses `--listen`: `PORT` (on 127.0.0.1), `IPv4:PORT` or `[IPv6]:PORT`.
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    let bad = || {
        format!("expected PORT, ADDRESS:PORT or [IPv6]:PORT with a numeric address (e.g. 127.0.0.1:9642), not {s:?}")
    };
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        let port: u16 = s.parse().map_err(|_| format!("port {s} is over 65535"))?;
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse::<SocketAddr>().map_err(|_| bad())
}

#[cfg(test)]
#[path = "endpoint_tests.rs"]
mod tests;
