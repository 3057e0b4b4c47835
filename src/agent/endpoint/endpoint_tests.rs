//! The endpoint against hostile clients: slow, huge, not HTTP, too many. Each case holds its
//! hostile connections open while a well-behaved scrape is answered and the board's owner keeps
//! publishing: neither waits for the hostile client.

use super::*;
use crate::test_wait::wait_for;
use client::{get, sample};
use std::io::{Read, Write};

/// The integration tests' HTTP client (`tests/common/http.rs`).
#[allow(dead_code)]
#[path = "../../../tests/common/http.rs"]
mod client;
use std::net::TcpStream;
use std::sync::atomic::AtomicU64;

const LIMITS: Limits = Limits { max_connections: 8, max_request: 4096, deadline: Duration::from_secs(3) };

/// An endpoint on a port of its own, and an owner thread publishing a counter that grows on
/// every turn (as the follower and the plugin publish theirs).
struct Served {
    addr: SocketAddr,
    board: Arc<Board>,
    turns: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    owner: Option<std::thread::JoinHandle<()>>,
    _endpoint: Endpoint,
}

impl Served {
    fn start() -> Self {
        // A port picked here and bound again by the endpoint: the endpoint logs the port it got,
        // but the unit tests have no log to read.
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let board = Board::new("starting");
        let endpoint = Endpoint::start(addr, board.clone(), LIMITS).unwrap();
        let (turns, stop) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
        let (b, t, s) = (board.clone(), turns.clone(), stop.clone());
        let owner = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                let n = t.fetch_add(1, Ordering::SeqCst) + 1;
                b.beat();
                b.set_metrics(format!("# TYPE turns counter\nturns {n}\n"));
                b.set_ready(Ok(()));
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let s = Self { addr, board, turns, stop, owner: Some(owner), _endpoint: endpoint };
        wait_for("the endpoint to listen", Duration::from_secs(10), || TcpStream::connect(s.addr));
        // Ready once the owner's first turn ran (a loaded host may start its thread late).
        wait_for("/readyz to answer 200", Duration::from_secs(10), || match s.get("/readyz").0 {
            200 => Ok(()),
            code => Err(code),
        });
        s
    }

    /// A well-behaved GET: the status and body.
    fn get(&self, path: &str) -> (u16, String) {
        get(self.addr, path)
    }

    /// The owner's counter as the endpoint serves it.
    fn served_turns(&self) -> u64 {
        let (status, body) = self.get("/metrics");
        assert_eq!(status, 200, "{body}");
        sample(&body, "turns").expect("turns") as u64
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.owner.take() {
            let _ = t.join();
        }
    }
}

/// Everything the server sends on `s` until it closes it: the status line's code.
fn answer_of(s: &mut TcpStream) -> u16 {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// True while the server has neither answered nor closed `s`.
fn still_open(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let open = matches!((&*s).read(&mut b), Err(e) if e.kind() == ErrorKind::WouldBlock);
    s.set_nonblocking(false).unwrap();
    open
}

/// While `hostile` is held, a scrape is answered, with a counter the owner moved on meanwhile.
fn others_go_on(served: &Served, hostile: &[&TcpStream]) {
    let before = served.served_turns();
    let owner_before = served.turns.load(Ordering::SeqCst);
    wait_for("the owner to take turns", Duration::from_secs(10), || {
        if served.turns.load(Ordering::SeqCst) > owner_before + 5 { Ok(()) } else { Err("no turn") }
    });
    let after = served.served_turns();
    assert!(after > before, "the page did not move on: {before} then {after}");
    assert_eq!(served.get("/healthz").0, 200);
    assert_eq!(served.get("/readyz").0, 200);
    for h in hostile {
        assert!(still_open(h), "a hostile connection was closed before the scrapes were answered");
    }
}

#[test]
fn a_slow_client_is_cut_at_the_deadline_and_delays_no_one() {
    let served = Served::start();
    let mut slow = TcpStream::connect(served.addr).unwrap();
    slow.write_all(b"GET /metr").unwrap();
    others_go_on(&served, &[&slow]);
    // One byte at a time does not buy it more time: 408 at the deadline.
    let since = Instant::now();
    for b in b"ics HTTP/1.1\r\nX: " {
        let _ = slow.write_all(&[*b]);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(answer_of(&mut slow), 408);
    assert!(since.elapsed() < LIMITS.deadline + Duration::from_secs(5));
}

#[test]
fn a_huge_request_is_refused_at_the_size_limit() {
    let served = Served::start();
    let mut huge = TcpStream::connect(served.addr).unwrap();
    let mut idle = TcpStream::connect(served.addr).unwrap();
    idle.write_all(b"GET / HTTP/1.1\r\n").unwrap();
    // A megabyte of header: the server stops reading at its limit and answers 431.
    let writer = {
        let mut h = huge.try_clone().unwrap();
        std::thread::spawn(move || {
            let _ = h.write_all(b"GET /metrics HTTP/1.1\r\nX-Fill: ");
            let _ = h.write_all(&vec![b'a'; 1 << 20]);
        })
    };
    assert_eq!(answer_of(&mut huge), 431);
    others_go_on(&served, &[&idle]);
    drop(huge);
    let _ = writer.join();
}

#[test]
fn non_http_bytes_are_refused_at_once() {
    let served = Served::start();
    let mut idle = TcpStream::connect(served.addr).unwrap();
    idle.write_all(b"GET").unwrap();
    for (what, bytes) in [
        ("a TLS client hello", &b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"[..]),
        ("an SSH banner", b"SSH-2.0-OpenSSH_9.2\r\n"),
        ("zeros", &[0u8; 64]),
        ("an HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
    ] {
        let mut s = TcpStream::connect(served.addr).unwrap();
        s.write_all(bytes).unwrap();
        let since = Instant::now();
        let status = answer_of(&mut s);
        assert!(matches!(status, 400 | 405 | 505), "{what}: {status}");
        // Answered on its bytes, not at the deadline.
        assert!(since.elapsed() < LIMITS.deadline, "{what}: answered after {:?}", since.elapsed());
    }
    others_go_on(&served, &[&idle]);
}

/// A request written in two parts, split at any byte (a pause between them, so that the endpoint
/// reads them apart), is answered as the request written whole.
#[test]
fn a_request_split_at_any_byte_is_answered_as_one_written_whole() {
    let served = Served::start();
    for (request, want) in [
        (&b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n"[..], 405),
        (b"GET /metrics HTTP/2.0\r\n\r\n", 505),
        (b"GET /healthz HTTP/1.1\r\n\r\n", 200),
    ] {
        for split in 0..request.len() {
            let mut s = TcpStream::connect(served.addr).unwrap();
            s.set_nodelay(true).unwrap();
            s.write_all(&request[..split]).unwrap();
            std::thread::sleep(Duration::from_millis(5));
            let _ = s.write_all(&request[split..]);
            assert_eq!(answer_of(&mut s), want, "{:?} split after {split} bytes", String::from_utf8_lossy(request));
        }
    }
}

#[test]
fn connections_past_the_limit_are_answered_503_and_freed_slots_serve_again() {
    let served = Served::start();
    // Half the slots held by idle clients: scrapes still go through.
    let mut held: Vec<TcpStream> =
        (0..LIMITS.max_connections - 1).map(|_| TcpStream::connect(served.addr).unwrap()).collect();
    others_go_on(&served, &held.iter().collect::<Vec<_>>());
    // Every slot taken (the last by this client): the next ones are turned away at once.
    held.push(TcpStream::connect(served.addr).unwrap());
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..20 {
        let mut extra = TcpStream::connect(served.addr).unwrap();
        assert_eq!(answer_of(&mut extra), 503);
    }
    // The owner was never held up: it took turns all along.
    let t = served.turns.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(50));
    assert!(served.turns.load(Ordering::SeqCst) > t);
    // The held ones time out (408) and the endpoint serves again.
    for h in &mut held {
        assert_eq!(answer_of(h), 408);
    }
    assert_eq!(served.get("/readyz").0, 200);
    assert!(served.board.is_ready());
}

#[test]
fn listen_addresses_parse_or_say_what_is_expected() {
    assert_eq!(parse_listen("9642").unwrap(), SocketAddr::from(([127, 0, 0, 1], 9642)));
    assert_eq!(parse_listen("0.0.0.0:9642").unwrap(), SocketAddr::from(([0, 0, 0, 0], 9642)));
    assert_eq!(parse_listen("[::1]:9642").unwrap().port(), 9642);
    assert_eq!(parse_listen("70000").unwrap_err(), "port 70000 is over 65535");
    for bad in ["", "localhost:9642", "10.0.0.1", "10.0.0.1:port", ":9642"] {
        assert!(parse_listen(bad).unwrap_err().starts_with("expected PORT, ADDRESS:PORT"), "{bad}");
    }
}
