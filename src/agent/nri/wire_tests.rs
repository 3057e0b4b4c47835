//! Unit tests of `wire.rs`: golden frames, messages cut anywhere, the size limits, a trickle that
//! cannot hold a read past its deadline, the buffer's offset (taken bytes dropped once they are
//! half of it), and one frame of many messages.

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
        [Incoming::UnknownConn { conn: 9, length: 4 }, Incoming::UnknownConn { conn: 0, length: 0 }, msg(1, 1, b"ok")]
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
    assert!(matches!(c.send(1, 1, TYPE_RESPONSE, 0, &vec![0; MAX_TTRPC_MESSAGE + 1]), Err(WireError::SendOversize(_))));
}

#[test]
fn the_buffer_keeps_the_bytes_not_taken_and_drops_the_taken_ones() {
    let mut b = Buffer::default();
    let mut model = std::collections::VecDeque::<u8>::new();
    for round in 0..2_000usize {
        let more: Vec<u8> = (0..round % 37).map(|i| (round + i) as u8).collect();
        b.extend(&more);
        model.extend(more.iter().copied());
        assert!(b.bytes.len() <= 2 * b.len(), "round {round}: the taken bytes are dropped once they are half");
        let n = (round * 7) % 41 % (model.len() + 1);
        b.take(n);
        model.drain(..n);
        assert_eq!(b.data(), model.iter().copied().collect::<Vec<_>>(), "round {round}");
    }
}

#[test]
fn one_frame_of_many_messages_comes_out_whole() {
    let mut stream = Vec::new();
    for i in 0..10_000u32 {
        stream.extend(ttrpc_message(2 * i + 1, TYPE_REQUEST, FLAG_REMOTE_CLOSED, &i.to_be_bytes()[..(i % 5) as usize]));
    }
    let mut frame = PLUGIN_CONN.to_be_bytes().to_vec();
    frame.extend((stream.len() as u32).to_be_bytes());
    frame.extend(&stream);
    let mut d = Demux::new();
    d.feed(&frame);
    let got = all(&mut d);
    assert_eq!(got.len(), 10_000);
    assert_eq!(got[9_999], msg(1, 19_999, &9_999u32.to_be_bytes()[..4]));
    assert_eq!(d.pending(), 0);
}
