//! The kernel's process events: the netlink proc connector (`CONFIG_PROC_EVENTS`), which reports
//! every fork and exec on the host as it happens, with the kernel's CLOCK_MONOTONIC time of the
//! event. The one module that opens netlink sockets; [`EventSource`] is the seam the follower is
//! tested through.
//!
//! The wire format is Linux's `<linux/netlink.h>`, `<linux/connector.h>` and `<linux/cn_proc.h>`:
//! a netlink header (16 bytes), a `cn_msg` (20 bytes), then a `proc_event` whose `event_data`
//! starts 16 bytes in. The kernel only accepts a subscription from the initial user, pid and
//! network namespaces with CAP_NET_ADMIN, and silently ignores one from another pid namespace; so
//! [`ProcConnector::open`] proves the subscription works by waiting for the fork event of a thread
//! it starts itself.
//!
//! Linux 6.6 and later also take a `struct proc_input` (the op, then a mask of event types) and
//! drop every other event before it reaches the socket: the follower asks for fork and exec only
//! ([`Subscription::Filtered`]), so the exit, uid, comm… events of the whole host never wake it.
//! Earlier kernels ignore a message whose length is not that of the bare op, silently (no answer,
//! no events). Silence proves nothing either way: the kernel sends to every socket bound to the
//! group while anyone listens, so another listener's subscription would pass for an ignored one.
//! So the bare op is always sent first (every kernel takes it), and the filter follows as a
//! second message only where the release says 6.6 or later: a kernel that ignores it keeps the
//! bare subscription and sends every event.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::net::netlink::{self, SocketAddrNetlink};
use rustix::net::{AddressFamily, SendFlags, SocketFlags, SocketType, sockopt};
use rustix::time::ClockId;

use crate::values::Pid;

const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const NLMSG_DONE: u16 = 3;
const NLMSG_HDRLEN: usize = 16;
const CN_MSG_LEN: usize = 20;
/// Datagrams taken per `recvmmsg`.
const BATCH: usize = 64;
/// Bytes per datagram slot: a proc connector datagram is one event of under 100 bytes.
const SLOT: usize = 1024;
const PROC_EVENT_NONE: u32 = 0;
const PROC_EVENT_FORK: u32 = 1;
const PROC_EVENT_EXEC: u32 = 2;
/// The events asked for where the kernel filters: `enum proc_cn_event` bits.
const WANTED_EVENTS: u32 = PROC_EVENT_FORK | PROC_EVENT_EXEC;
/// The first release whose proc connector filters events per socket.
const FILTER_SINCE: (u32, u32) = (6, 6);
/// The socket's receive buffer asked for (SO_RCVBUFFORCE, CAP_NET_ADMIN): room for ~100,000
/// events before the kernel drops any.
const RCVBUF: usize = 8 << 20;
/// How long [`ProcConnector::open`] waits for the proof that events arrive.
pub const PROOF_TIMEOUT: Duration = Duration::from_secs(2);

/// One process event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A new task: a process (`pid == tgid`) or a thread of `tgid`.
    Fork {
        /// The thread group that forked it.
        parent: Pid,
        /// The new task's id.
        pid: Pid,
        /// Its thread group.
        tgid: Pid,
        /// CLOCK_MONOTONIC of the event, ns.
        at_ns: u64,
    },
    /// A process ran execve.
    Exec {
        /// The process (thread-group id).
        tgid: Pid,
        /// CLOCK_MONOTONIC of the event, ns.
        at_ns: u64,
    },
    /// The kernel dropped events: the socket's buffer overflowed (ENOBUFS).
    Lost,
}

/// Why process events cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum ProcEventsError {
    /// socket(AF_NETLINK, NETLINK_CONNECTOR) failed (a kernel without CONFIG_CONNECTOR).
    #[error("failed to open a netlink connector socket")]
    Socket(#[source] io::Error),
    /// bind to the proc connector's group failed (EPERM: no CAP_NET_ADMIN).
    #[error("failed to join the proc connector's multicast group")]
    Bind(#[source] io::Error),
    /// Sending the subscription failed.
    #[error("failed to send the proc connector subscription")]
    Send(#[source] io::Error),
    /// The kernel answered the subscription with an error.
    #[error("failed to subscribe to process events: the kernel refused")]
    Refused(#[source] io::Error),
    /// No event came for a thread started to test the subscription.
    #[error(
        "failed to subscribe to process events: none arrived within {0:?} (a kernel without \
         CONFIG_PROC_EVENTS, or not in the host's pid, user and network namespaces)"
    )]
    Silent(Duration),
    /// Reading the socket failed.
    #[error("failed to read process events")]
    Read(#[source] io::Error),
}

/// A source of process events.
pub trait EventSource {
    /// Waits up to `timeout` for events and appends those that arrived (maybe none) to `out`.
    fn wait(&mut self, timeout: Duration, out: &mut Vec<Event>) -> Result<(), ProcEventsError>;
}

/// The kernel's CLOCK_MONOTONIC in ns, the clock of [`Event`] times.
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// What one proc connector message said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parsed {
    Event(Event),
    /// A subscription answer (`PROC_EVENT_NONE`) with its errno (0: accepted).
    Ack(u32),
    Other,
}

/// Parses a datagram from the connector socket: each netlink message in it, in order.
fn parse(datagram: &[u8], out: &mut Vec<Parsed>) {
    let mut at = 0;
    while at + NLMSG_HDRLEN <= datagram.len() {
        let Some(len) = u32_at(datagram, at).map(|l| l as usize) else { return };
        if len < NLMSG_HDRLEN || at + len > datagram.len() {
            return;
        }
        let msg = &datagram[at..at + len];
        at += (len + 3) & !3;
        if u16_at(msg, 4) != Some(NLMSG_DONE) {
            continue;
        }
        let cn = &msg[NLMSG_HDRLEN..];
        if u32_at(cn, 0) != Some(CN_IDX_PROC) || u32_at(cn, 4) != Some(CN_VAL_PROC) {
            continue;
        }
        let ev = &cn[CN_MSG_LEN.min(cn.len())..];
        let (Some(what), Some(at_ns)) = (u32_at(ev, 0), u64_at(ev, 8)) else { continue };
        let data = |i: usize| u32_at(ev, 16 + 4 * i).map(|v| v as Pid);
        out.push(match what {
            PROC_EVENT_FORK => match (data(1), data(2), data(3)) {
                (Some(parent), Some(pid), Some(tgid)) => Parsed::Event(Event::Fork { parent, pid, tgid, at_ns }),
                _ => continue,
            },
            PROC_EVENT_EXEC => match data(1) {
                Some(tgid) => Parsed::Event(Event::Exec { tgid, at_ns }),
                None => continue,
            },
            PROC_EVENT_NONE => Parsed::Ack(u32_at(ev, 16).unwrap_or(0)),
            _ => Parsed::Other,
        });
    }
}

/// How the follower subscribes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subscription {
    /// The bare LISTEN op, then `struct proc_input { LISTEN, FORK | EXEC }` (Linux 6.6 and
    /// later): the kernel sends only fork and exec events to this socket.
    Filtered,
    /// The bare LISTEN op: every event of every kind.
    All,
}

impl Subscription {
    /// The payload the connector message carries: the op, and for [`Subscription::Filtered`] the
    /// event mask.
    fn payload(self) -> Vec<u8> {
        let mut p = PROC_CN_MCAST_LISTEN.to_ne_bytes().to_vec();
        if self == Self::Filtered {
            p.extend_from_slice(&WANTED_EVENTS.to_ne_bytes());
        }
        p
    }

    /// The one to send first on a kernel of release `release` (`uname -r`): filtered from 6.6 on.
    /// A release that does not parse gets the bare op, which every kernel takes.
    pub fn for_release(release: &str) -> Self {
        let mut parts = release.split(|c: char| !c.is_ascii_digit());
        let major = parts.next().and_then(|v| v.parse::<u32>().ok());
        let minor = parts.next().and_then(|v| v.parse::<u32>().ok());
        match (major, minor) {
            (Some(major), Some(minor)) if (major, minor) >= FILTER_SINCE => Self::Filtered,
            _ => Self::All,
        }
    }
}

/// The running kernel's release (`uname -r`).
fn kernel_release() -> String {
    rustix::system::uname().release().to_string_lossy().into_owned()
}

/// The subscription message: netlink header, `cn_msg` for the proc connector, then `payload`.
fn subscription(payload: &[u8]) -> Vec<u8> {
    let len = (NLMSG_HDRLEN + CN_MSG_LEN + payload.len()) as u32;
    let mut m = Vec::with_capacity(len as usize);
    m.extend_from_slice(&len.to_ne_bytes());
    m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
    m.extend_from_slice(&0u16.to_ne_bytes()); // flags
    m.extend_from_slice(&0u32.to_ne_bytes()); // seq
    m.extend_from_slice(&std::process::id().to_ne_bytes());
    m.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
    m.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // cn seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // cn ack
    m.extend_from_slice(&(payload.len() as u16).to_ne_bytes()); // data length
    m.extend_from_slice(&0u16.to_ne_bytes()); // flags
    m.extend_from_slice(payload);
    m
}

/// The netlink proc connector, subscribed.
#[derive(Debug)]
pub struct ProcConnector {
    fd: OwnedFd,
    buf: Vec<u8>,
    parsed: Vec<Parsed>,
    /// The kernel filters events for this socket (the filtered subscription was proved).
    filtered: bool,
    /// Messages read that were neither fork, exec nor an answer (the kernel did not filter them).
    unwanted: u64,
}

impl ProcConnector {
    /// Opens the socket, subscribes (filtered where the kernel's release says it can), and waits
    /// (at most [`PROOF_TIMEOUT`]) for the fork event of a thread it starts, so that a
    /// subscription the kernel ignored is an error, not silence.
    pub fn open() -> Result<Self, ProcEventsError> {
        let filter = (Subscription::for_release(&kernel_release()) == Subscription::Filtered)
            .then(|| Subscription::Filtered.payload());
        Self::open_with(filter.as_deref())
    }

    /// Whether the kernel drops the events the follower does not want before they reach it.
    pub fn filtered(&self) -> bool {
        self.filtered
    }

    /// Messages read that were not fork, exec or a subscription answer.
    pub fn unwanted(&self) -> u64 {
        self.unwanted
    }

    /// [`ProcConnector::open`] with the payload of the message that follows the bare op (the
    /// filter) given, or none.
    fn open_with(filter: Option<&[u8]>) -> Result<Self, ProcEventsError> {
        let fd = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            Some(netlink::CONNECTOR),
        )
        .map_err(|e| ProcEventsError::Socket(e.into()))?;
        // SO_RCVBUFFORCE (CAP_NET_ADMIN) goes past rmem_max; else SO_RCVBUF up to it. A failure of
        // both only leaves the default buffer.
        if sockopt::set_socket_recv_buffer_size_force(&fd, RCVBUF).is_err() {
            let _ = sockopt::set_socket_recv_buffer_size(&fd, RCVBUF);
        }
        rustix::net::bind(&fd, &SocketAddrNetlink::new(0, CN_IDX_PROC)).map_err(|e| ProcEventsError::Bind(e.into()))?;
        let mut me =
            Self { fd, buf: vec![0; BATCH * SLOT], parsed: Vec::new(), filtered: filter.is_some(), unwanted: 0 };
        me.send(&Subscription::All.payload())?;
        if let Some(f) = filter {
            // From 6.6 on it narrows the subscription above (no second listener is counted); an
            // earlier kernel ignores it and the subscription above stands. Events of other kinds
            // that came in between are read and dropped by the proof, whose thread starts after.
            me.send(f)?;
        }
        me.prove()?;
        Ok(me)
    }

    /// Sends a subscription message carrying `payload`.
    fn send(&self, payload: &[u8]) -> Result<(), ProcEventsError> {
        rustix::net::send(&self.fd, &subscription(payload), SendFlags::empty())
            .map_err(|e| ProcEventsError::Send(e.into()))?;
        Ok(())
    }

    /// Starts a thread and waits for its fork event; an error answer to the subscription fails.
    fn prove(&mut self) -> Result<(), ProcEventsError> {
        let me = std::process::id() as Pid;
        let tid = std::thread::spawn(|| rustix::thread::gettid().as_raw_nonzero().get()).join().unwrap_or(0);
        let end = Instant::now() + PROOF_TIMEOUT;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ProcEventsError::Silent(PROOF_TIMEOUT));
            }
            self.read(left)?;
            for p in std::mem::take(&mut self.parsed) {
                match p {
                    Parsed::Ack(errno) if errno != 0 => {
                        return Err(ProcEventsError::Refused(io::Error::from_raw_os_error(errno as i32)));
                    }
                    Parsed::Event(Event::Fork { pid, tgid, .. }) if tgid == me && pid == tid => return Ok(()),
                    _ => {}
                }
            }
        }
    }

    /// Waits up to `timeout` for the socket, then reads every datagram queued into `self.parsed`.
    fn read(&mut self, timeout: Duration) -> Result<(), ProcEventsError> {
        // A timeout too long for a timespec waits without one (no caller asks for centuries).
        let ts = Timespec::try_from(timeout).ok();
        match rustix::event::poll(&mut [PollFd::new(&self.fd, PollFlags::IN)], ts.as_ref()) {
            Ok(0) | Err(rustix::io::Errno::INTR) => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(ProcEventsError::Read(e.into())),
        }
        // One recvmmsg takes up to BATCH datagrams (one event each) into SLOT-byte slots of
        // `buf`, instead of one recv per event: under a fork storm the syscall is most of an
        // event's cost. It stays on `libc`: rustix (1.1) has no recvmmsg.
        let raw = self.fd.as_raw_fd();
        let mut iov: [libc::iovec; BATCH] = std::array::from_fn(|i| libc::iovec {
            iov_base: self.buf[i * SLOT..(i + 1) * SLOT].as_mut_ptr().cast(),
            iov_len: SLOT,
        });
        loop {
            // SAFETY: an all-zero mmsghdr is valid (null name and control, no flags).
            let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
            for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
                m.msg_hdr.msg_iov = v;
                m.msg_hdr.msg_iovlen = 1;
            }
            // SAFETY: BATCH headers, each with one iovec into a distinct SLOT-byte slot of the
            // live buffer `buf`; no timeout.
            let n = unsafe {
                libc::recvmmsg(raw, msgs.as_mut_ptr(), BATCH as libc::c_uint, libc::MSG_DONTWAIT, std::ptr::null_mut())
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => return Ok(()),
                    Some(libc::EINTR) => continue,
                    Some(libc::ENOBUFS) => {
                        self.parsed.push(Parsed::Event(Event::Lost));
                        continue;
                    }
                    _ => return Err(ProcEventsError::Read(e)),
                }
            }
            for (i, m) in msgs.iter().take(n as usize).enumerate() {
                let len = (m.msg_len as usize).min(SLOT);
                parse(&self.buf[i * SLOT..i * SLOT + len], &mut self.parsed);
            }
            if (n as usize) < BATCH {
                return Ok(());
            }
        }
    }
}

impl EventSource for ProcConnector {
    fn wait(&mut self, timeout: Duration, out: &mut Vec<Event>) -> Result<(), ProcEventsError> {
        self.read(timeout)?;
        for p in self.parsed.drain(..) {
            match p {
                Parsed::Event(e) => out.push(e),
                Parsed::Other => self.unwanted += 1,
                Parsed::Ack(_) => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "proc_events_tests.rs"]
mod tests;
