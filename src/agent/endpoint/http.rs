//! The little of HTTP/1.x the endpoint speaks: a request head read incrementally and judged as
//! early as its bytes allow, and a whole response with `Connection: close`.

use super::board::{Board, Page};

/// What the bytes read so far of a request head amount to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    /// Not complete yet, and nothing wrong so far.
    Partial,
    /// A complete head: the method is GET (`head_only` false) or HEAD, and the path.
    Get {
        /// The path, the query string cut off.
        path: String,
        /// HEAD: the headers without the body.
        head_only: bool,
    },
    /// Answer with this status and close.
    Refuse(u16),
}

/// Judges the request head `buf` (everything read so far), whose size limit is `max`.
pub fn parse(buf: &[u8], max: usize) -> Head {
    // Anything but printable ASCII, tab, CR and LF is not an HTTP head: refused at the first such
    // byte, without waiting for the rest of it.
    if buf.iter().any(|&b| !(b == b'\t' || b == b'\r' || b == b'\n' || (0x20..0x7f).contains(&b))) {
        return Head::Refuse(400);
    }
    let line_end = buf.iter().position(|&b| b == b'\n');
    if let Some(end) = line_end {
        if let Err(status) = request_line(&buf[..end]) {
            return Head::Refuse(status);
        }
    } else if buf.len() > 16 && !buf.starts_with(b"GET ") && !buf.starts_with(b"HEAD ") {
        // A long first line that is not a method this endpoint knows.
        return request_line(buf).err().map_or(Head::Partial, Head::Refuse);
    }
    let complete = find(buf, b"\r\n\r\n").or_else(|| find(buf, b"\n\n"));
    match (complete, line_end) {
        (Some(_), Some(end)) => match request_line(&buf[..end]) {
            Ok((method, path)) => Head::Get { path, head_only: method == "HEAD" },
            Err(status) => Head::Refuse(status),
        },
        _ if buf.len() >= max => Head::Refuse(431),
        _ => Head::Partial,
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `METHOD SP TARGET SP HTTP/1.x`: the method and the path, or the status to refuse it with.
fn request_line(line: &[u8]) -> Result<(String, String), u16> {
    let line = std::str::from_utf8(line).map_err(|_| 400u16)?.trim_end_matches('\r');
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(400);
    };
    if !matches!(version, "HTTP/1.0" | "HTTP/1.1") {
        return Err(if version.starts_with("HTTP/") { 505 } else { 400 });
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(400);
    }
    if method != "GET" && method != "HEAD" {
        return Err(405);
    }
    if !target.starts_with('/') {
        return Err(400);
    }
    let path = target.split(['?', '#']).next().unwrap_or("/");
    Ok((method.to_string(), path.to_string()))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// The whole response to `head`.
pub fn respond(head: &Head, board: &Board) -> Vec<u8> {
    match head {
        Head::Get { path, head_only } => render(&board.page(path), *head_only),
        Head::Refuse(status) => refusal(*status),
        Head::Partial => refusal(400),
    }
}

/// A plain-text refusal with `status`.
pub fn refusal(status: u16) -> Vec<u8> {
    let body = format!("{status} {}\n", reason(status));
    let page = Page { status, content_type: "text/plain; charset=utf-8", body: body.into() };
    render(&page, false)
}

fn render(page: &Page, head_only: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n",
        page.status,
        reason(page.status),
        page.content_type,
        page.body.len()
    );
    if page.status == 405 {
        out.push_str("Allow: GET, HEAD\r\n");
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    if !head_only {
        bytes.extend_from_slice(page.body.as_bytes());
    }
    bytes
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
