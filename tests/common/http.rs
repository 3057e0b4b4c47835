//! A plain HTTP/1.1 client for the endpoint tests: one GET per connection, as Prometheus and
//! kubelet's probes do, and the address an endpoint logged it serves on.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// GET `path`: the status code and the body (status 0 when no answer came).
pub fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) else { return (0, String::new()) };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    if s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes()).is_err() {
        return (0, String::new());
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

/// The address in an endpoint's "serving ... on http://ADDR" log line.
pub fn served_at(log: &str) -> Option<SocketAddr> {
    log.lines().find_map(|l| l.split_once("/readyz on http://").and_then(|(_, a)| a.trim().parse().ok()))
}

/// The value of an unlabelled sample `name` in Prometheus text.
pub fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')).and_then(|v| v.parse().ok()))
}
