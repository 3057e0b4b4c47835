//! The unit tests of `src/agent/endpoint/http.rs`.

use super::*;

const MAX: usize = 8192;

#[test]
fn a_get_is_complete_at_its_empty_line() {
    assert_eq!(parse(b"GET /metrics HTTP/1.1\r\nHost: x\r\n", MAX), Head::Partial);
    assert_eq!(
        parse(b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n", MAX),
        Head::Get { path: "/metrics".into(), head_only: false }
    );
    assert_eq!(parse(b"HEAD /readyz HTTP/1.0\n\n", MAX), Head::Get { path: "/readyz".into(), head_only: true });
}

#[test]
fn bad_heads_are_refused_as_early_as_their_bytes_show() {
    assert_eq!(parse(b"\x16\x03\x01\x02\x00", MAX), Head::Refuse(400), "a TLS hello");
    assert_eq!(parse(b"\x00\x00\x00\x01", MAX), Head::Refuse(400));
    assert_eq!(parse(b"SSH-2.0-OpenSSH_9.2p1 Debian\r\n", MAX), Head::Refuse(400));
    assert_eq!(parse(b"POST /metrics HTTP/1.1\r\n", MAX), Head::Refuse(405));
    assert_eq!(parse(b"GET /metrics HTTP/2.0\r\n", MAX), Head::Refuse(505));
    assert_eq!(parse(b"GET metrics HTTP/1.1\r\n\r\n", MAX), Head::Refuse(400));
    assert_eq!(parse(b"hello there, endpoint", MAX), Head::Refuse(400));
    let huge = [b"GET / HTTP/1.1\r\nX: ".as_slice(), &[b'a'; MAX]].concat();
    assert_eq!(parse(&huge, MAX), Head::Refuse(431));
    let line = [b"GET /".as_slice(), &[b'a'; MAX]].concat();
    assert_eq!(parse(&line, MAX), Head::Refuse(431));
}

#[test]
fn responses_close_and_head_has_no_body() {
    let b = Board::new("starting");
    b.set_metrics("m 1\n".into());
    let get = String::from_utf8(respond(&Head::Get { path: "/metrics".into(), head_only: false }, &b)).unwrap();
    assert!(get.starts_with("HTTP/1.1 200 OK\r\n"), "{get}");
    assert!(get.contains("Content-Length: 4\r\n") && get.contains("Connection: close\r\n"), "{get}");
    assert!(get.ends_with("\r\n\r\nm 1\n"), "{get}");
    let head = String::from_utf8(respond(&Head::Get { path: "/metrics".into(), head_only: true }, &b)).unwrap();
    assert!(head.ends_with("\r\n\r\n"), "{head}");
    let refused = String::from_utf8(refusal(405)).unwrap();
    assert!(refused.starts_with("HTTP/1.1 405 Method Not Allowed\r\n") && refused.contains("Allow: GET, HEAD"));
}
