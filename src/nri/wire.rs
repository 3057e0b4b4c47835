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
    #[error("stopped by a signal while writing to the NRI socket")]
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

#[derive(Debug, Default)]
struct Stream {
    buf: Vec<u8>,
    skip: usize,
}

impl Stream {
    fn push(&mut self, mut payload: &[u8]) {
        let skipped = self.skip.min(payload.len());
        self.skip -= skipped;
        payload = &payload[skipped..];
        self.buf.extend_from_slice(payload);
    }

    fn next(&mut self, conn: u32) -> Option<Incoming> {
        if self.skip > 0 || self.buf.len() < TTRPC_HEADER_LEN {
            return None;
        }
        let length = u32::from_be_bytes(self.buf[0..4].try_into().expect("4 bytes"));
        let stream_id = u32::from_be_bytes(self.buf[4..8].try_into().expect("4 bytes"));
        let (kind, flags) = (self.buf[8], self.buf[9]);
        if length as usize > MAX_TTRPC_MESSAGE {
            self.buf.drain(..TTRPC_HEADER_LEN);
            let have = self.buf.len().min(length as usize);
            self.buf.drain(..have);
            self.skip = length as usize - have;
            return Some(Incoming::Oversize { conn, stream_id, length });
        }
        let end = TTRPC_HEADER_LEN + length as usize;
        if self.buf.len() < end {
            return None;
        }
        let payload = self.buf[TTRPC_HEADER_LEN..end].to_vec();
        self.buf.drain(..end);
        Some(Incoming::Message(Message { conn, stream_id, kind, flags, payload }))
    }
}

/// Splits the bytes of the socket into mux frames, and each served logical connection's bytes into
/// ttrpc messages. Holds at most one partial frame and one partial message per connection.
#[derive(Debug, Default)]
pub struct Demux {
    buf: Vec<u8>,
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
        self.buf.extend_from_slice(bytes);
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
            if self.buf.len() < MUX_HEADER_LEN {
                return Ok(None);
            }
            let conn = u32::from_be_bytes(self.buf[0..4].try_into().expect("4 bytes"));
            let length = u32::from_be_bytes(self.buf[4..8].try_into().expect("4 bytes"));
            if length as usize > MAX_MUX_PAYLOAD {
                return Err(WireError::MuxOversize { conn, length });
            }
            let end = MUX_HEADER_LEN + length as usize;
            if self.buf.len() < end {
                return Ok(None);
            }
            let payload = &self.buf[MUX_HEADER_LEN..end];
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
            self.buf.drain(..end);
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
/// flag ([`crate::signals`]), the socket's write timeout being the caller's poll interval.
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
                    if crate::signals::stopping() {
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
mod tests {
    use super::*;

    impl Socket for io::Cursor<Vec<u8>> {
        fn set_read_timeout(&self, _: Duration) -> io::Result<()> {
            Ok(())
        }
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(1)
    }

    fn all(d: &mut Demux) -> Vec<Incoming> {
        std::iter::from_fn(|| d.next().unwrap()).collect()
    }

    fn msg(conn: u32, stream_id: u32, payload: &[u8]) -> Incoming {
        Incoming::Message(Message {
            conn,
            stream_id,
            kind: TYPE_REQUEST,
            flags: FLAG_REMOTE_CLOSED,
            payload: payload.into(),
        })
    }

    #[test]
    fn golden_frame_of_a_request() {
        let frame = mux_frames(PLUGIN_CONN, &ttrpc_message(3, TYPE_REQUEST, FLAG_REMOTE_CLOSED, b"ab"));
        assert_eq!(frame, [0, 0, 0, 1, 0, 0, 0, 12, 0, 0, 0, 2, 0, 0, 0, 3, 1, 1, b'a', b'b']);
    }

    #[test]
    fn messages_come_out_whole_however_the_bytes_are_cut() {
        let mut bytes = mux_frames(PLUGIN_CONN, &ttrpc_message(1, TYPE_REQUEST, FLAG_REMOTE_CLOSED, b"one"));
        // A message split over two frames (as Go's buffered writer may send it), and one on conn 2.
        let two = ttrpc_message(3, TYPE_REQUEST, FLAG_REMOTE_CLOSED, &[7u8; 5000]);
        bytes.extend(mux_frames(PLUGIN_CONN, &two[..4]));
        bytes.extend(mux_frames(RUNTIME_CONN, &ttrpc_message(1, TYPE_REQUEST, FLAG_REMOTE_CLOSED, b"rt")));
        bytes.extend(mux_frames(PLUGIN_CONN, &two[4..]));
        for step in [1, 3, 7, 4096, bytes.len()] {
            let mut d = Demux::new();
            let mut got = Vec::new();
            for chunk in bytes.chunks(step) {
                d.feed(chunk);
                got.extend(all(&mut d));
            }
            assert_eq!(got, [msg(1, 1, b"one"), msg(2, 1, b"rt"), msg(1, 3, &[7u8; 5000])], "step {step}");
            assert_eq!(d.pending(), 0);
        }
    }

    #[test]
    fn written_frames_respect_the_chunk_size() {
        let bytes = mux_frames(RUNTIME_CONN, &[0u8; 2 * WRITE_CHUNK + 1]);
        assert_eq!(bytes.len(), 2 * WRITE_CHUNK + 1 + 3 * MUX_HEADER_LEN);
        assert_eq!(&bytes[4..8], &(WRITE_CHUNK as u32).to_be_bytes());
    }

    #[test]
    fn a_truncated_header_waits_and_a_closed_socket_says_so() {
        let mut d = Demux::new();
        d.feed(&[0, 0, 0, 1, 0, 0]);
        assert_eq!(d.next().unwrap(), None);
        let mut c = Conn::new(io::Cursor::new(vec![0u8, 0, 0, 1, 0, 0]));
        assert!(matches!(c.recv(soon()), Err(WireError::Truncated(6))));
        let mut c = Conn::new(io::Cursor::new(Vec::new()));
        assert!(matches!(c.recv(soon()), Err(WireError::Closed)));
    }

    #[test]
    fn an_oversize_mux_frame_ends_the_connection() {
        let mut d = Demux::new();
        d.feed(&[0, 0, 0, 1]);
        d.feed(&((MAX_MUX_PAYLOAD as u32) + 1).to_be_bytes());
        assert!(matches!(d.next(), Err(WireError::MuxOversize { conn: 1, length: 16_777_217 })));
    }

    #[test]
    fn an_oversize_ttrpc_message_is_skipped_and_the_stream_goes_on() {
        let big = (MAX_TTRPC_MESSAGE + 3) as u32;
        let mut stream = Vec::new();
        stream.extend(big.to_be_bytes());
        stream.extend(5u32.to_be_bytes());
        stream.extend([TYPE_REQUEST, 0]);
        stream.extend(vec![0xee; big as usize]);
        stream.extend(ttrpc_message(7, TYPE_REQUEST, FLAG_REMOTE_CLOSED, b"after"));
        let mut d = Demux::new();
        let mut got = Vec::new();
        for chunk in stream.chunks(MAX_MUX_PAYLOAD / 4) {
            d.feed(&mux_frames(PLUGIN_CONN, chunk));
            got.extend(all(&mut d));
        }
        assert_eq!(got, [Incoming::Oversize { conn: 1, stream_id: 5, length: big }, msg(1, 7, b"after")]);
    }

    #[test]
    fn frames_for_an_unknown_conn_are_reported_and_dropped() {
        let mut d = Demux::new();
        d.feed(&mux_frames(9, b"junk"));
        d.feed(&[0, 0, 0, 0, 0, 0, 0, 0]); // conn 0 (reserved), empty
        d.feed(&mux_frames(PLUGIN_CONN, &ttrpc_message(1, TYPE_REQUEST, FLAG_REMOTE_CLOSED, b"ok")));
        assert_eq!(
            all(&mut d),
            [
                Incoming::UnknownConn { conn: 9, length: 4 },
                Incoming::UnknownConn { conn: 0, length: 0 },
                msg(1, 1, b"ok")
            ]
        );
    }

    /// A frame announcing 1 KiB, then one byte per read, a few milliseconds apart, forever.
    #[derive(Debug, Default)]
    struct Trickle(usize);

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            std::thread::sleep(Duration::from_millis(5));
            buf[0] = [0, 0, 0, 1, 0, 0, 4, 0].get(self.0).copied().unwrap_or(0);
            self.0 += 1;
            Ok(1)
        }
    }

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Socket for Trickle {
        fn set_read_timeout(&self, _: Duration) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_trickle_of_bytes_does_not_hold_a_read_past_its_deadline() {
        let mut c = Conn::new(Trickle::default());
        let start = Instant::now();
        assert!(matches!(c.recv(start + Duration::from_millis(50)), Ok(None)));
        assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    }

    #[test]
    fn send_refuses_an_oversize_message() {
        let mut c = Conn::new(io::Cursor::new(Vec::new()));
        assert!(matches!(
            c.send(1, 1, TYPE_RESPONSE, 0, &vec![0; MAX_TTRPC_MESSAGE + 1]),
            Err(WireError::SendOversize(_))
        ));
    }
}
