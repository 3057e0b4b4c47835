//! One connection to the runtime ([`Connection`]; the cache's session is
//! [`crate::session::Session`]): registration, then the `Plugin` service's requests answered in
//! order on logical connection 1 ([`super::wire::PLUGIN_CONN`]) until the connection ends, a stop
//! signal, or the runtime's `Shutdown`. `Synchronize` starts a [`super::catchup`] thread.

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Instant;

use log::Level;

use crate::config::Config;
use crate::host::system::System;

use super::adjust;
use super::catchup;
use super::ignored::{Ignored, Kind};
use super::messages::{
    ConfigureRequest, ConfigureResponse, CreateContainerRequest, CreateContainerResponse, Empty, PLUGIN_SERVICE,
    RUNTIME_SERVICE, RegisterPluginRequest, StateChangeEvent, SynchronizeRequest, SynchronizeResponse, event,
};
use super::proto::{self, Message};
use super::status::Status;
use super::ttrpc::{Request, Response, code};
use super::wire::{
    Conn, FLAG_REMOTE_CLOSED, Incoming, PLUGIN_CONN, RUNTIME_CONN, TYPE_REQUEST, TYPE_RESPONSE, WireError,
};
use super::{EVENTS, NriError, Options, POLL, REGISTER_STREAM, REGISTRATION_TIMEOUT};
use crate::agent::signals::stopping;

/// How a connection ended without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// A stop signal.
    Stopped,
    /// The runtime sent `Shutdown`.
    Shutdown,
}

/// One connection's state.
pub(super) struct Connection<'a> {
    opts: &'a Options,
    config: &'a Config,
    hook_path: &'a str,
    name: &'a str,
    /// What the endpoint shows.
    status: &'a Status,
    registered: bool,
    pub(super) configured: bool,
    /// Catch-up threads started on this connection (joined before the process exits).
    pub(super) threads: Vec<std::thread::JoinHandle<()>>,
    /// A `Synchronize` split over several requests (`more`), collected until the last.
    sync: SynchronizeRequest,
    /// What this connection ignored or refused, logged in bursts.
    ignored: Ignored,
    /// Containers this connection injected the hook into and that have not started yet: their
    /// StartContainer needs nothing (the hook ran at createRuntime, before it).
    adjusted: std::collections::BTreeSet<String>,
}

/// At most this many adjusted containers are remembered until they start (one created and never
/// started stays until the connection ends; past the bound the set starts over, and a start then
/// costs one idempotent catch-up).
const MAX_ADJUSTED: usize = 4096;

/// How long a catch-up at StartContainer waits for the state lock: the runtime gives a plugin 2 s
/// to answer (NRI's default request timeout) and drops a plugin that takes longer.
const START_LOCK_TIMEOUT_MS: u64 = 1000;

/// What a request asks of the connection once its response is sent.
enum After {
    Nothing,
    Configured,
    CatchUp(SynchronizeRequest),
    Shutdown,
}

impl<'a> Connection<'a> {
    pub(super) fn new(
        opts: &'a Options,
        config: &'a Config,
        hook_path: &'a str,
        name: &'a str,
        status: &'a Status,
    ) -> Self {
        Self {
            opts,
            config,
            hook_path,
            name,
            status,
            registered: false,
            configured: false,
            threads: Vec::new(),
            sync: SynchronizeRequest::default(),
            ignored: Ignored::default(),
            adjusted: std::collections::BTreeSet::new(),
        }
    }

    pub(super) fn serve(&mut self, stream: UnixStream) -> Result<End, NriError> {
        let result = self.serve_until_end(stream);
        self.ignored.flush();
        match result {
            Err(NriError::Wire(WireError::Stopped)) => Ok(End::Stopped),
            other => other,
        }
    }

    fn serve_until_end(&mut self, stream: UnixStream) -> Result<End, NriError> {
        // Short, so that a write the runtime does not take looks at the stop flag every POLL;
        // the connection is given up after wire::WRITE_STALL without progress.
        stream.set_write_timeout(Some(POLL)).map_err(|e| NriError::Wire(WireError::Write(e)))?;
        let mut conn = Conn::new(stream);
        let register = RegisterPluginRequest {
            plugin_name: self.opts.plugin_name.clone(),
            plugin_idx: self.opts.plugin_index.clone(),
        };
        let req = Request {
            service: RUNTIME_SERVICE.into(),
            method: "RegisterPlugin".into(),
            payload: register.to_bytes(),
            timeout_nano: REGISTRATION_TIMEOUT.as_nanos() as i64,
        };
        conn.send(RUNTIME_CONN, REGISTER_STREAM, TYPE_REQUEST, FLAG_REMOTE_CLOSED, &req.to_bytes())?;
        // The deadline bounds every read, not just the loop: bytes that keep arriving without
        // completing a message do not hold the registration open.
        let registration_deadline = Instant::now() + REGISTRATION_TIMEOUT;
        loop {
            if stopping() {
                return Ok(End::Stopped);
            }
            let mut until = Instant::now() + POLL;
            if !(self.registered && self.configured) {
                if Instant::now() >= registration_deadline {
                    return Err(NriError::Timeout(self.name.to_string()));
                }
                until = until.min(registration_deadline);
            }
            self.ignored.tick();
            self.status.beat();
            let Some(incoming) = conn.recv(until)? else { continue };
            match incoming {
                Incoming::UnknownConn { conn: id, length } => {
                    self.ignored.note(Kind::UnknownConn, Level::Warn, || {
                        format!("ignoring a {length}-byte NRI frame for connection {id}, which nobody serves")
                    });
                }
                Incoming::Oversize { conn: id, stream_id, length } => {
                    self.ignored.note(Kind::Oversize, Level::Error, || {
                        format!("skipping a {length}-byte ttrpc message on connection {id}: over the limit")
                    });
                    if id == PLUGIN_CONN && stream_id % 2 == 1 {
                        let r = Response::error(code::RESOURCE_EXHAUSTED, "message over the size limit");
                        conn.send(PLUGIN_CONN, stream_id, TYPE_RESPONSE, 0, &r.to_bytes())?;
                    }
                }
                Incoming::Message(m) if m.conn == RUNTIME_CONN => {
                    if m.kind == TYPE_RESPONSE && m.stream_id == REGISTER_STREAM && !self.registered {
                        self.registration_answered(&m.payload)?;
                    } else {
                        self.ignored.note(Kind::Unexpected, Level::Warn, || {
                            format!("ignoring an unexpected ttrpc message (type {}) from the runtime", m.kind)
                        });
                    }
                }
                Incoming::Message(m) => {
                    if m.kind != TYPE_REQUEST || m.stream_id % 2 == 0 {
                        self.ignored.note(Kind::Unexpected, Level::Warn, || {
                            format!("ignoring a ttrpc message of type {} on stream {}", m.kind, m.stream_id)
                        });
                        continue;
                    }
                    let (response, after) = self.handle(&m.payload);
                    conn.send(PLUGIN_CONN, m.stream_id, TYPE_RESPONSE, 0, &response.to_bytes())?;
                    match after {
                        After::Nothing => {}
                        After::Configured => self.configured = true,
                        After::CatchUp(sync) => self.spawn_catch_up(sync),
                        After::Shutdown => return Ok(End::Shutdown),
                    }
                }
            }
        }
    }

    fn registration_answered(&mut self, payload: &[u8]) -> Result<(), NriError> {
        let r = Response::decode(payload).unwrap_or_else(|e| Response::error(code::INVALID_ARGUMENT, e.to_string()));
        if r.code() != code::OK {
            let s = r.status.unwrap_or_default();
            return Err(NriError::Refused { name: self.name.to_string(), code: s.code, message: s.message });
        }
        self.registered = true;
        log::info!("registered as NRI plugin {}", self.name);
        Ok(())
    }

    /// The response to one request, and what to do after sending it.
    fn handle(&mut self, payload: &[u8]) -> (Response, After) {
        let req = match Request::decode(payload) {
            Ok(r) => r,
            Err(e) => return self.undecodable("ttrpc", e),
        };
        if req.service != PLUGIN_SERVICE {
            self.ignored.note(Kind::UnknownCall, Level::Warn, || {
                format!("the runtime called unknown service {:?}", req.service)
            });
            return (Response::error(code::UNIMPLEMENTED, format!("service {}", req.service)), After::Nothing);
        }
        match req.method.as_str() {
            "Configure" => match ConfigureRequest::decode(&req.payload) {
                Ok(c) => {
                    log::info!(
                        "configured by {} {}; subscribing to CreateContainer and StartContainer",
                        c.runtime_name.escape_debug(),
                        c.runtime_version.escape_debug()
                    );
                    self.status.configured(&c.runtime_name, &c.runtime_version);
                    (Response::ok(&ConfigureResponse { events: event::mask(&EVENTS) }), After::Configured)
                }
                Err(e) => self.undecodable("Configure", e),
            },
            "Synchronize" => match SynchronizeRequest::decode(&req.payload) {
                Ok(s) => {
                    self.sync.pods.extend(s.pods);
                    self.sync.containers.extend(s.containers);
                    if s.more {
                        return (Response::ok(&SynchronizeResponse { more: true }), After::Nothing);
                    }
                    let all = std::mem::take(&mut self.sync);
                    (Response::ok(&SynchronizeResponse { more: false }), After::CatchUp(all))
                }
                Err(e) => self.undecodable("Synchronize", e),
            },
            "CreateContainer" => self.create_container(&req.payload),
            "StateChange" => match StateChangeEvent::decode(&req.payload) {
                Ok(e) if e.event == event::START_CONTAINER => self.start_container(e),
                // Not subscribed to; answered with nothing to change should a runtime send them.
                Ok(_) => (Response::ok(&Empty), After::Nothing),
                Err(e) => self.undecodable("StateChange", e),
            },
            "Shutdown" => (Response::ok(&Empty), After::Shutdown),
            // Not subscribed to; answered with nothing to change should a runtime call them anyway.
            "StopContainer" | "UpdateContainer" => (Response::ok(&Empty), After::Nothing),
            other => {
                self.ignored
                    .note(Kind::UnknownCall, Level::Warn, || format!("the runtime called unknown method {other:?}"));
                (Response::error(code::UNIMPLEMENTED, format!("method {other}")), After::Nothing)
            }
        }
    }

    /// The answer to a request (`what`: its kind) that does not decode.
    fn undecodable(&mut self, what: &str, e: proto::DecodeError) -> (Response, After) {
        self.ignored.note(Kind::Undecodable, Level::Error, || {
            format!("answering an undecodable {what} request with an error: {e}")
        });
        (Response::error(code::INVALID_ARGUMENT, e.to_string()), After::Nothing)
    }

    fn create_container(&mut self, payload: &[u8]) -> (Response, After) {
        let req = match CreateContainerRequest::decode(payload) {
            Ok(r) => r,
            Err(e) if self.config.fail_closed => {
                self.ignored.note(Kind::BadCreate, Level::Error, || {
                    format!("refusing a container: its CreateContainer request is undecodable: {e} (fail_closed)")
                });
                return (Response::error(code::INVALID_ARGUMENT, e.to_string()), After::Nothing);
            }
            Err(e) => {
                self.ignored.note(Kind::BadCreate, Level::Error, || {
                    format!(
                        "leaving a container unadjusted: its CreateContainer request is undecodable: {e} \
                         (failing open: it runs without core scheduling; set fail_closed = true to refuse it)"
                    )
                });
                return (Response::ok(&CreateContainerResponse::default()), After::Nothing);
            }
        };
        let pod = req.pod.unwrap_or_default();
        let ctr = req.container.unwrap_or_default();
        let adjust = adjust::adjustment(&pod, &ctr, self.hook_path);
        match &adjust {
            Some(a) => log::info!(
                "container {} (pod {}/{}): injecting the hook, annotations {}",
                ctr.id.escape_debug(),
                pod.namespace.escape_debug(),
                pod.name.escape_debug(),
                a.annotations.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
            None => log::info!(
                "container {} is pod {}'s sandbox: left as it is",
                ctr.id.escape_debug(),
                pod.id.escape_debug()
            ),
        }
        if adjust.is_some() {
            self.status.adjusted();
            if self.adjusted.len() >= MAX_ADJUSTED {
                self.adjusted.clear();
            }
            self.adjusted.insert(ctr.id.clone());
        }
        (Response::ok(&CreateContainerResponse { adjust }), After::Nothing)
    }

    /// StartContainer: the container's task exists and its init waits to run. One this connection
    /// injected the hook into needs nothing. Any other (created while the plugin was away or
    /// restarting, so without the hook, and not yet started at the catch-up) is caught up here,
    /// before the answer: the runtime starts it once it has its group's cookie. The lock is waited
    /// for at most [`START_LOCK_TIMEOUT_MS`], within the runtime's 2 s for an answer; a catch-up
    /// that fails is logged, and only with `fail_closed` refuses the start.
    fn start_container(&mut self, e: StateChangeEvent) -> (Response, After) {
        let pod = e.pod.unwrap_or_default();
        let ctr = e.container.unwrap_or_default();
        if self.adjusted.remove(&ctr.id) || adjust::is_sandbox(&pod, &ctr) {
            return (Response::ok(&Empty), After::Nothing);
        }
        let config =
            Config { lock_timeout_ms: self.config.lock_timeout_ms.min(START_LOCK_TIMEOUT_MS), ..self.config.clone() };
        let sys = System::new(self.opts.surroundings.clone());
        let task_root = Path::new(catchup::CONTAINERD_TASK_ROOT);
        let s = catchup::catch_up(std::slice::from_ref(&pod), std::slice::from_ref(&ctr), &config, &sys, task_root);
        self.status.caught_up_at_start();
        log::info!(
            "container {} (pod {}/{}) starts without the hook (created while the plugin was away): caught up before \
             its start: {} ensured, {} already set, {} cleared, {} skipped, {} failed",
            ctr.id.escape_debug(),
            pod.namespace.escape_debug(),
            pod.name.escape_debug(),
            s.ensured,
            s.already,
            s.cleared,
            s.skipped,
            s.failed
        );
        if s.failed > 0 && self.config.fail_closed {
            let msg = format!("failed to give container {} its core-scheduling cookie (fail_closed)", ctr.id);
            return (Response::error(code::UNKNOWN, msg), After::Nothing);
        }
        (Response::ok(&Empty), After::Nothing)
    }

    fn spawn_catch_up(&mut self, sync: SynchronizeRequest) {
        log::info!(
            "synchronized: {} pods, {} containers; catching up the running ones",
            sync.pods.len(),
            sync.containers.len()
        );
        let config = self.config.clone();
        let surroundings = self.opts.surroundings.clone();
        let spawned = std::thread::Builder::new().name("nri-catch-up".into()).spawn(move || {
            let sys = System::new(surroundings);
            let task_root = Path::new(catchup::CONTAINERD_TASK_ROOT);
            let s = catchup::catch_up(&sync.pods, &sync.containers, &config, &sys, task_root);
            log::info!(
                "catch-up done: {} ensured, {} already set, {} cleared, {} skipped, {} failed",
                s.ensured,
                s.already,
                s.cleared,
                s.skipped,
                s.failed
            );
        });
        match spawned {
            Ok(handle) => self.threads.push(handle),
            Err(e) => log::error!("failed to start the catch-up thread: {e}"),
        }
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
