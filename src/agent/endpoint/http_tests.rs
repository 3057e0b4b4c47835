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
fn bad_heads_are_refused_early_only_on_a_bad_byte_or_a_lowercase_method() {
    assert_eq!(parse(b"\x16\x03\x01\x02\x00", MAX), Head::Refuse(400), "a TLS hello");
    assert_eq!(parse(b"\x00\x00\x00\x01", MAX), Head::Refuse(400));
    assert_eq!(parse(b"SSH-2.0-OpenSSH_9.2p1 Debian\r\n", MAX), Head::Refuse(400));
    assert_eq!(parse(b"hello there, endpoint", MAX), Head::Refuse(400));
    assert_eq!(parse(b"get", MAX), Head::Refuse(400), "a lowercase method, at its first letter");
    // The rest is judged once the head is complete.
    assert_eq!(parse(b"POST /metrics HTTP/1.1\r\n", MAX), Head::Partial);
    assert_eq!(parse(b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n", MAX), Head::Refuse(405));
    assert_eq!(parse(b"GET /metrics HTTP/2.0\r\n", MAX), Head::Partial);
    assert_eq!(parse(b"GET /metrics HTTP/2.0\r\n\r\n", MAX), Head::Refuse(505));
    assert_eq!(parse(b"GET metrics HTTP/1.1\r\n\r\n", MAX), Head::Refuse(400));
    // What follows the head is never looked at.
    assert_eq!(
        parse(b"GET /healthz HTTP/1.1\r\n\r\n\x00\xffget", MAX),
        Head::Get { path: "/healthz".into(), head_only: false }
    );
    let huge = [b"GET / HTTP/1.1\r\nX: ".as_slice(), &[b'a'; MAX]].concat();
    assert_eq!(parse(&huge, MAX), Head::Refuse(431));
    let line = [b"GET /".as_slice(), &[b'a'; MAX]].concat();
    assert_eq!(parse(&line, MAX), Head::Refuse(414), "a request line that does not end within the limit");
    assert_eq!(parse(&line[..MAX - 1], MAX), Head::Partial);
}

/// The status depends on the bytes, never on how they arrive: every prefix of a request is still
/// partial or judged as the whole request is, so a request read in two parts, split at any byte,
/// gets the status of one read.
#[test]
fn the_status_does_not_depend_on_how_the_bytes_arrive() {
    const SMALL: usize = 64;
    let long_line = [b"GET /".as_slice(), &[b'a'; SMALL]].concat();
    let long_head = [b"GET / HTTP/1.1\r\nX: ".as_slice(), &[b'a'; SMALL]].concat();
    let requests: [&[u8]; 18] = [
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        b"HEAD /readyz HTTP/1.0\n\n",
        b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        b"DELETE / HTTP/1.1\r\n\r\n",
        b"GET /metrics HTTP/2.0\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        b"GET metrics HTTP/1.1\r\n\r\n",
        b"GET /metrics\r\n\r\n",
        b"GET / HTTP/1.1 x\r\n\r\n",
        b"get /metrics HTTP/1.1\r\n\r\n",
        b"GETx / HTTP/1.1\r\n\r\n",
        b"SSH-2.0-OpenSSH_9.2\r\n",
        b"\x16\x03\x01\x00\xa5\x01\x00",
        b"GET / HTTP/1.1\r\nX: \x01\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n\x00trailing",
        b"\r\nGET / HTTP/1.1\r\n\r\n",
        &long_line,
        &long_head,
    ];
    for request in requests {
        let whole = parse(request, SMALL);
        assert_ne!(whole, Head::Partial, "{:?}", String::from_utf8_lossy(request));
        for split in 1..request.len() {
            let first = parse(&request[..split], SMALL);
            let got = if first == Head::Partial { parse(request, SMALL) } else { first };
            assert_eq!(got, whole, "{:?} split after {split} bytes", String::from_utf8_lossy(request));
        }
    }
    assert_eq!(parse(&long_line, SMALL), Head::Refuse(414));
    assert_eq!(parse(&long_head, SMALL), Head::Refuse(431));
}

#[test]
fn the_date_is_rfc_7231s_imf_fixdate() {
    let at = |secs: u64| http_date(UNIX_EPOCH + std::time::Duration::from_secs(secs));
    assert_eq!(at(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT", "RFC 7231's own example");
    assert_eq!(at(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    assert_eq!(at(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
    assert_eq!(at(951_868_799), "Tue, 29 Feb 2000 23:59:59 GMT");
    assert_eq!(at(1_764_892_800), "Fri, 05 Dec 2025 00:00:00 GMT");
    assert_eq!(at(4_102_444_800), "Fri, 01 Jan 2100 00:00:00 GMT");
    assert_eq!(http_date(UNIX_EPOCH - std::time::Duration::from_secs(1)), "Thu, 01 Jan 1970 00:00:00 GMT");
    // Every day of a leap year and of a common one against the day count of its month.
    let mut secs = 1_704_067_200; // 2024-01-01
    for (year, lengths) in [
        (2024, [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]),
        (2025, [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]),
    ] {
        for (month, days) in ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
            .into_iter()
            .zip(lengths)
        {
            for day in 1..=days {
                let date = at(secs + 43_200);
                assert_eq!(&date[5..], format!("{day:02} {month} {year} 12:00:00 GMT"), "{date}");
                secs += 86_400;
            }
        }
    }
}

#[test]
fn responses_close_and_head_has_no_body() {
    let b = Board::new("starting");
    b.set_metrics("m 1\n".into());
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let get = String::from_utf8(respond(&Head::Get { path: "/metrics".into(), head_only: false }, &b)).unwrap();
    let until = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let date = get.lines().find_map(|l| l.strip_prefix("Date: ")).expect("a Date header");
    assert!(
        (since..=until).any(|t| http_date(UNIX_EPOCH + std::time::Duration::from_secs(t)) == date),
        "{date}: not the time of the answer"
    );
    assert!(String::from_utf8(refusal(400)).unwrap().contains("\r\nDate: "), "a refusal has a Date too");
    assert!(get.starts_with("HTTP/1.1 200 OK\r\n"), "{get}");
    assert!(get.contains("Content-Length: 4\r\n") && get.contains("Connection: close\r\n"), "{get}");
    assert!(get.ends_with("\r\n\r\nm 1\n"), "{get}");
    let date = get.lines().find_map(|l| l.strip_prefix("Date: ")).expect("a Date header");
    let (before, after) =
        (http_date(SystemTime::now() - std::time::Duration::from_secs(5)), http_date(SystemTime::now()));
    assert!(
        date.len() == 29 && date.ends_with(" GMT") && (before.as_str()..=after.as_str()).contains(&date)
            || date[..3] != before[..3],
        "{date}"
    );
    let head = String::from_utf8(respond(&Head::Get { path: "/metrics".into(), head_only: true }, &b)).unwrap();
    assert!(head.ends_with("\r\n\r\n"), "{head}");
    let refused = String::from_utf8(refusal(405)).unwrap();
    assert!(refused.starts_with("HTTP/1.1 405 Method Not Allowed\r\n") && refused.contains("Allow: GET, HEAD"));
}
