//! The little of HTTP/1.x the endpoint speaks: a request head read incrementally, and a whole
//! response with `Connection: close` and a `Date`.
//!
//! A head is refused before it is complete only for what no later byte can change: a byte no
//! request head holds, or a lowercase letter in the method. Everything else is judged once the
//! head is complete, or once it fills the size limit (414 when the request line has not ended,
//! else 431), and only the head's own bytes count (what follows its empty line is never looked
//! at). So the status depends on the bytes, never on how they arrive: every prefix of a request
//! is either still [`Head::Partial`] or judged as the whole request is.

use std::time::{SystemTime, UNIX_EPOCH};

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

/// Judges the request head `buf` (everything read so far), whose size limit is `max`: only its
/// first `max` bytes are looked at.
pub fn parse(buf: &[u8], max: usize) -> Head {
    let window = &buf[..buf.len().min(max)];
    let end = head_end(window);
    let head = &window[..end.unwrap_or(window.len())];
    // Anything but printable ASCII, tab, CR and LF is not an HTTP head.
    if head.iter().any(|&b| !(b == b'\t' || b == b'\r' || b == b'\n' || (0x20..0x7f).contains(&b))) {
        return Head::Refuse(400);
    }
    // Methods are case-sensitive and every one is uppercase: a lowercase letter before the
    // first space (an SSH banner, a typo) is no request this endpoint answers.
    let method = head.split(|&b| b == b' ' || b == b'\n').next().unwrap_or_default();
    if method.iter().any(u8::is_ascii_lowercase) {
        return Head::Refuse(400);
    }
    let line_end = head.iter().position(|&b| b == b'\n');
    match (end, line_end) {
        (Some(_), Some(line_end)) => match request_line(&head[..line_end]) {
            Ok((method, path)) => Head::Get { path, head_only: method == "HEAD" },
            Err(status) => Head::Refuse(status),
        },
        (None, None) if window.len() >= max => Head::Refuse(414),
        (None, Some(_)) if window.len() >= max => Head::Refuse(431),
        _ => Head::Partial,
    }
}

/// Where the head ends in `buf`: just past the first empty line (`\n` or `\r\n`) that follows a
/// line end.
fn head_end(buf: &[u8]) -> Option<usize> {
    let mut line_start = 0;
    for (i, &b) in buf.iter().enumerate() {
        if b == b'\n' {
            let line = &buf[line_start..i];
            if line_start > 0 && (line.is_empty() || line == b"\r") {
                return Some(i + 1);
            }
            line_start = i + 1;
        }
    }
    None
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

/// `time` as HTTP's `Date` spells it (RFC 7231's IMF-fixdate): `Sun, 06 Nov 1994 08:49:37 GMT`.
/// A time before 1970 is spelled as 1970's first second.
pub fn http_date(time: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // The civil date of a day count since 1970-01-01, in 400-year eras of 146,097 days that
    // start on 1 March (Howard Hinnant's `civil_from_days`), so that a leap day ends its year.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{}, {day:02} {} {year:04} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        rest / 3_600,
        rest / 60 % 60,
        rest % 60
    )
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        414 => "URI Too Long",
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
        "HTTP/1.1 {} {}\r\nDate: {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n",
        page.status,
        reason(page.status),
        http_date(SystemTime::now()),
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
