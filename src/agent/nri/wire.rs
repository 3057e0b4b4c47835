//! NRI's transport: one unix-socket connection carrying several logical connections (NRI's
//! multiplexer), each carrying ttrpc messages. Written from NRI 0.6.1's `pkg/net/multiplex` and
//! ttrpc's `channel.go` as specifications:
//!
//! - a mux frame is an 8-byte header, the logical connection id (u32, big-endian) and the payload
//!   length (u32, big-endian, at most [`MAX_MUX_PAYLOAD`]), then the payload. Conn id 0 is
//!   reserved; the plugin serves its ttrpc service on [`PLUGIN_CONN`] (1) and calls the runtime's
//!   on [`RUNTIME_CONN`] (2). Frames for another id are dropped, as NRI's own mux does;
//! - the payloads of one logical connection form a byte stream of ttrpc messages: a 10-byte
//!   header (length u32, stream id u32, both big-endian; type u8: 1 request, 2 response, 3 data;
//!   flags u8), then `length` bytes, at most [`MAX_TTRPC_MESSAGE`]. A longer message is skipped
//!   and reported ([`Incoming::Oversize`]), as ttrpc does, since the stream stays in step.
//!
//! A mux length over the limit cannot be skipped safely (the runtime itself would have closed the
//! connection), so it is a [`WireError`] that ends the connection. Messages written here are cut
//! into mux frames of at most [`WRITE_CHUNK`] bytes: NRI's Go side reads each frame into a
//! 4 KiB buffer.
//!
//! Parsing takes messages out of what was read by moving an offset, so a frame of many tiny
//! messages costs time linear in its length. Reads are bounded by a deadline and writes end on
//! the stop flag ([`Conn`]).

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// The mux frame header's length.
pub const MUX_HEADER_LEN: usize = 8;
/// The longest mux frame payload NRI accepts.
pub const MAX_MUX_PAYLOAD: usize = 1 << 24;
/// The ttrpc message header's length.
pub const TTRPC_HEADER_LEN: usize = 10;
/// The longest ttrpc message ttrpc accepts.
pub const MAX_TTRPC_MESSAGE: usize = 4 << 20;
/// The longest mux frame this side writes.
pub const WRITE_CHUNK: usize = 4096;
/// How long a write may go on without the peer taking a byte before the connection is given up.
pub const WRITE_STALL: Duration = Duration::from_secs(5);
/// The logical connection on which the plugin serves the `Plugin` service.
pub const PLUGIN_CONN: u32 = 1;
/// The logical connection on which the plugin calls the `Runtime` service.
pub const RUNTIME_CONN: u32 = 2;
/// ttrpc message type: a request.
pub const TYPE_REQUEST: u8 = 1;
/// ttrpc message type: a response.
pub const TYPE_RESPONSE: u8 = 2;
/// ttrpc flag: the sender will send nothing more on this stream (every unary request has it).
pub const FLAG_REMOTE_CLOSED: u8 = 1;

/// Why the connection cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Reading the socket failed.
    #[error("failed to read from the NRI socket")]
    Read(#[source] io::Error),
    /// Writing the socket failed.
    #[error("failed to write to the NRI socket")]
    Write(#[source] io::Error),
    /// The other side closed the connection between frames.
    #[error("the NRI connection was closed by the other side")]
    Closed,
    /// The other side closed the connection inside a frame.
    #[error("the NRI connection was closed inside a frame ({0} bytes of it read)")]
    Truncated(usize),
    /// A mux frame longer than NRI allows: the stream cannot be trusted past it.
    #[error("failed to read a mux frame: conn {conn} announces {length} bytes, over the limit of {MAX_MUX_PAYLOAD}")]
    MuxOversize {
        /// The logical connection id.
        conn: u32,
        /// The announced length.
        length: u32,
    },
    /// A stop signal came while a write waited for the peer.
    #[error("failed to write to the NRI socket: a stop signal came first")]
    Stopped,
    /// A message to send is longer than ttrpc accepts.
    #[error("failed to send a ttrpc message: {0} bytes is over the limit of {MAX_TTRPC_MESSAGE}")]
    SendOversize(usize),
}

/// One ttrpc message of a logical connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The logical connection ([`PLUGIN_CONN`] or [`RUNTIME_CONN`]).
    pub conn: u32,
    /// The ttrpc stream id (odd: opened by the client side).
    pub stream_id: u32,
    /// The message type ([`TYPE_REQUEST`], [`TYPE_RESPONSE`], 3 data).
    pub kind: u8,
    /// The flags.
    pub flags: u8,
    /// The payload (a `Request` or `Response`).
    pub payload: Vec<u8>,
}

/// What came in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// A whole ttrpc message.
    Message(Message),
    /// A ttrpc message over [`MAX_TTRPC_MESSAGE`]: its bytes are skipped as they arrive.
    Oversize {
        /// The logical connection.
        conn: u32,
        /// Its stream id.
        stream_id: u32,
        /// Its announced length.
        length: u32,
    },
    /// A mux frame for a logical connection nobody serves; dropped.
    UnknownConn {
        /// The id.
        conn: u32,
        /// The payload length.
        length: usize,
    },
}

/// Bytes received and not yet taken. Taking moves an offset; the taken bytes are dropped in one
/// move once they are at least as many as those left, so each byte is moved at most about once:
/// taking many small messages out of one big frame costs the frame's length, not the messages'
/// count times it.
#[derive(Debug, Default)]
struct Buffer {
    bytes: Vec<u8>,
    start: usize,
}

impl Buffer {
    /// The bytes not yet taken.
    fn data(&self) -> &[u8] {
        &self.bytes[self.start..]
    }

    fn len(&self) -> usize {
        self.bytes.len() - self.start
    }

    /// Takes the first `n` bytes (at most [`Buffer::len`]).
    fn take(&mut self, n: usize) {
        self.start += n;
        if self.start >= self.bytes.len() {
            self.bytes.clear();
            self.start = 0;
        }
    }

    fn extend(&mut self, more: &[u8]) {
        if self.start > 0 && self.start >= self.len() {
            self.bytes.drain(..self.start);
            self.start = 0;
        }
        self.bytes.extend_from_slice(more);
    }
}

/// One logical connection's byte stream, cut into ttrpc messages.
#[derive(Debug, Default)]
struct Stream {
    buf: Buffer,
    /// Bytes of an oversize message still to come, dropped as they arrive.
    skip: usize,
}

impl Stream {
    fn push(&mut self, mut payload: &[u8]) {
        let skipped = self.skip.min(payload.len());
        self.skip -= skipped;
        payload = &payload[skipped..];
        self.buf.extend(payload);
    }

    fn next(&mut self, conn: u32) -> Option<Incoming> {
        let buf = self.buf.data();
        if self.skip > 0 || buf.len() < TTRPC_HEADER_LEN {
            return None;
        }
        let length = u32::from_be_bytes(buf[0..4].try_into().expect("4 bytes"));
        let stream_id = u32::from_be_bytes(buf[4..8].try_into().expect("4 bytes"));
        let (kind, flags) = (buf[8], buf[9]);
        if length as usize > MAX_TTRPC_MESSAGE {
            let have = (buf.len() - TTRPC_HEADER_LEN).min(length as usize);
            self.buf.take(TTRPC_HEADER_LEN + have);
            self.skip = length as usize - have;
            return Some(Incoming::Oversize { conn, stream_id, length });
        }
        let end = TTRPC_HEADER_LEN + length as usize;
        if buf.len() < end {
            return None;
        }
        let payload = buf[TTRPC_HEADER_LEN..end].to_vec();
        self.buf.take(end);
        Some(Incoming::Message(Message { conn, stream_id, kind, flags, payload }))
    }
}

/// Splits the bytes of the socket into mux frames, and each served logical connection's bytes into
/// ttrpc messages. Holds at most one partial frame and one partial message per connection, and
/// parses in time linear in the bytes fed, however many messages they hold.
#[derive(Debug, Default)]
pub struct Demux {
    buf: Buffer,
    plugin: Stream,
    runtime: Stream,
}

impl Demux {
    /// A demultiplexer with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes read from the socket.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend(bytes);
    }

    /// Bytes of an incomplete frame or message (for telling a clean close from a cut one).
    pub fn pending(&self) -> usize {
        self.buf.len() + self.plugin.buf.len() + self.runtime.buf.len()
    }

    /// The next complete message, `None` until more bytes are fed.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Incoming>, WireError> {
        loop {
            if let Some(m) = self.plugin.next(PLUGIN_CONN) {
                return Ok(Some(m));
            }
            if let Some(m) = self.runtime.next(RUNTIME_CONN) {
                return Ok(Some(m));
            }
            let buf = self.buf.data();
            if buf.len() < MUX_HEADER_LEN {
                return Ok(None);
            }
            let conn = u32::from_be_bytes(buf[0..4].try_into().expect("4 bytes"));
            let length = u32::from_be_bytes(buf[4..8].try_into().expect("4 bytes"));
            if length as usize > MAX_MUX_PAYLOAD {
                return Err(WireError::MuxOversize { conn, length });
            }
            let end = MUX_HEADER_LEN + length as usize;
            if buf.len() < end {
                return Ok(None);
            }
            let payload = &buf[MUX_HEADER_LEN..end];
            let unknown = match conn {
                PLUGIN_CONN => {
                    self.plugin.push(payload);
                    None
                }
                RUNTIME_CONN => {
                    self.runtime.push(payload);
                    None
                }
                _ => Some(Incoming::UnknownConn { conn, length: payload.len() }),
            };
            self.buf.take(end);
            if unknown.is_some() {
                return Ok(unknown);
            }
        }
    }
}

/// A ttrpc message (header and payload), not yet framed for the mux.
pub fn ttrpc_message(stream_id: u32, kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(TTRPC_HEADER_LEN + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&stream_id.to_be_bytes());
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(payload);
    out
}

/// `bytes` as mux frames of logical connection `conn`, each at most [`WRITE_CHUNK`] long.
pub fn mux_frames(conn: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + MUX_HEADER_LEN * (1 + bytes.len() / WRITE_CHUNK));
    for chunk in bytes.chunks(WRITE_CHUNK) {
        out.extend_from_slice(&conn.to_be_bytes());
        out.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
        out.extend_from_slice(chunk);
    }
    out
}

/// A byte stream whose reads can be bounded in time: the socket (an in-memory stream in tests).
pub trait Socket: Read + Write {
    /// Bounds each following read to `timeout` (never zero).
    fn set_read_timeout(&self, timeout: Duration) -> io::Result<()>;
}

impl Socket for UnixStream {
    fn set_read_timeout(&self, timeout: Duration) -> io::Result<()> {
        UnixStream::set_read_timeout(self, Some(timeout))
    }
}

/// The socket with its demultiplexer. Every read waits at most until the deadline the caller
/// gives, however the bytes arrive: a peer that trickles bytes without completing a message
/// cannot hold a read past it. A write blocked on a peer that stops reading ends on the stop
/// flag ([`crate::agent::signals`]), the socket's write timeout being the caller's poll interval.
#[derive(Debug)]
pub struct Conn<S> {
    stream: S,
    demux: Demux,
}

impl<S: Socket> Conn<S> {
    /// Wraps a connected socket.
    pub fn new(stream: S) -> Self {
        Self { stream, demux: Demux::new() }
    }

    /// The socket.
    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// The next message; `None` once `deadline` passed, or when a signal interrupted the read.
    pub fn recv(&mut self, deadline: Instant) -> Result<Option<Incoming>, WireError> {
        let mut buf = [0u8; 64 * 1024];
        loop {
            if let Some(m) = self.demux.next()? {
                return Ok(Some(m));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.stream.set_read_timeout(left).map_err(WireError::Read)?;
            match self.stream.read(&mut buf) {
                Ok(0) if self.demux.pending() > 0 => return Err(WireError::Truncated(self.demux.pending())),
                Ok(0) => return Err(WireError::Closed),
                Ok(n) => self.demux.feed(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                    ) =>
                {
                    return Ok(None);
                }
                Err(e) => return Err(WireError::Read(e)),
            }
        }
    }

    /// Sends one ttrpc message on logical connection `conn`. A write that waits for the peer
    /// returns [`WireError::Stopped`] once the stop flag is set (the socket's write timeout, short,
    /// or the signal itself wakes it), and an error after [`WRITE_STALL`] without progress.
    pub fn send(&mut self, conn: u32, stream_id: u32, kind: u8, flags: u8, payload: &[u8]) -> Result<(), WireError> {
        if payload.len() > MAX_TTRPC_MESSAGE {
            return Err(WireError::SendOversize(payload.len()));
        }
        let frames = mux_frames(conn, &ttrpc_message(stream_id, kind, flags, payload));
        let mut rest = &frames[..];
        let mut progress = Instant::now();
        while !rest.is_empty() {
            match self.stream.write(rest) {
                Ok(0) => return Err(WireError::Write(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    rest = &rest[n..];
                    progress = Instant::now();
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                    ) =>
                {
                    if crate::agent::signals::stopping() {
                        return Err(WireError::Stopped);
                    }
                    if progress.elapsed() >= WRITE_STALL {
                        return Err(WireError::Write(e));
                    }
                }
                Err(e) => return Err(WireError::Write(e)),
            }
        }
        self.stream.flush().map_err(WireError::Write)
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
