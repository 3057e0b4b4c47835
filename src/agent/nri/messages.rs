//! The NRI messages the plugin sends and receives, with the field numbers of NRI 0.6.1's API
//! definition (`pkg/api/api.proto`, package `nri.pkg.api.v1alpha1`); ttrpc's envelope is in
//! [`super::ttrpc`]. Only the fields the plugin reads or writes are modelled; every other field is skipped on decode ([`super::proto`]), which is what keeps
//! the plugin working against the newer NRI of containerd 2.x.
//!
//! Each message both encodes and decodes, so that tests (and `tests/it/nri.rs`'s fake runtime) can
//! speak the runtime's side with the same definitions.

use std::collections::BTreeMap;

use super::proto::{DecodeError, Message, Reader, Value, Writer, map_entry};

/// The ttrpc service name of the calls the runtime serves.
pub const RUNTIME_SERVICE: &str = "nri.pkg.api.v1alpha1.Runtime";
/// The ttrpc service name of the calls a plugin serves.
pub const PLUGIN_SERVICE: &str = "nri.pkg.api.v1alpha1.Plugin";

/// NRI's `Event` numbers the plugin uses; a subscription mask has bit `event - 1` set.
pub mod event {
    /// `CREATE_CONTAINER`.
    pub const CREATE_CONTAINER: u32 = 4;
    /// `START_CONTAINER`: sent (as a `StateChange`) once the container's task exists, its init
    /// created but not started, and answered before the runtime starts it.
    pub const START_CONTAINER: u32 = 6;

    /// The subscription mask of a list of events.
    pub fn mask(events: &[u32]) -> i32 {
        events.iter().fold(0, |m, e| m | (1 << (e - 1)))
    }
}

/// NRI's `ContainerState`.
pub mod state {
    /// `CONTAINER_UNKNOWN`.
    pub const UNKNOWN: u64 = 0;
    /// `CONTAINER_CREATED`.
    pub const CREATED: u64 = 1;
    /// `CONTAINER_PAUSED`.
    pub const PAUSED: u64 = 2;
    /// `CONTAINER_RUNNING`.
    pub const RUNNING: u64 = 3;
    /// `CONTAINER_STOPPED`.
    pub const STOPPED: u64 = 4;
}

fn int32(v: i32) -> u64 {
    i64::from(v) as u64
}

fn put_map(map: &mut BTreeMap<String, String>, value: Value<'_>, field: u32) -> Result<(), DecodeError> {
    let (k, v) = map_entry(value.bytes(field)?)?;
    map.insert(k, v);
    Ok(())
}

/// `Empty` (and the replies the plugin leaves empty: `StopContainerResponse` and
/// `UpdateContainerResponse`, whose fields all are lists of updates the plugin never asks for).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Empty;

impl Message for Empty {
    fn encode(&self, _: &mut Writer) {}
    fn merge(&mut self, _: u32, _: Value<'_>) -> Result<(), DecodeError> {
        Ok(())
    }
}

/// `RegisterPluginRequest`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterPluginRequest {
    /// 1: the plugin's name.
    pub plugin_name: String,
    /// 2: its index, two digits (its place in the runtime's plugin order).
    pub plugin_idx: String,
}

impl Message for RegisterPluginRequest {
    fn encode(&self, w: &mut Writer) {
        w.string(1, &self.plugin_name);
        w.string(2, &self.plugin_idx);
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        match field {
            1 => self.plugin_name = v.string(1)?,
            2 => self.plugin_idx = v.string(2)?,
            _ => {}
        }
        Ok(())
    }
}

/// `ConfigureRequest`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigureRequest {
    /// 1: the plugin's configuration from the runtime (unused).
    pub config: String,
    /// 2: the runtime's name.
    pub runtime_name: String,
    /// 3: the runtime's version.
    pub runtime_version: String,
}

impl Message for ConfigureRequest {
    fn encode(&self, w: &mut Writer) {
        w.string(1, &self.config);
        w.string(2, &self.runtime_name);
        w.string(3, &self.runtime_version);
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        match field {
            1 => self.config = v.string(1)?,
            2 => self.runtime_name = v.string(2)?,
            3 => self.runtime_version = v.string(3)?,
            _ => {}
        }
        Ok(())
    }
}

/// `ConfigureResponse`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigureResponse {
    /// 2: the event subscription mask ([`event::mask`]).
    pub events: i32,
}

impl Message for ConfigureResponse {
    fn encode(&self, w: &mut Writer) {
        w.varint(2, int32(self.events));
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        if field == 2 {
            self.events = v.varint(2)? as i32;
        }
        Ok(())
    }
}

/// `PodSandbox`, the fields the plugin uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSandbox {
    /// 1: the sandbox id.
    pub id: String,
    /// 2: the pod's name.
    pub name: String,
    /// 3: the pod's uid.
    pub uid: String,
    /// 4: the pod's namespace.
    pub namespace: String,
    /// 6: the pod's annotations (all of them, unfiltered by the runtime's allow-lists).
    pub annotations: BTreeMap<String, String>,
}

impl Message for PodSandbox {
    fn encode(&self, w: &mut Writer) {
        w.string(1, &self.id);
        w.string(2, &self.name);
        w.string(3, &self.uid);
        w.string(4, &self.namespace);
        w.map(6, &self.annotations);
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        match field {
            1 => self.id = v.string(1)?,
            2 => self.name = v.string(2)?,
            3 => self.uid = v.string(3)?,
            4 => self.namespace = v.string(4)?,
            6 => put_map(&mut self.annotations, v, 6)?,
            _ => {}
        }
        Ok(())
    }
}

/// `LinuxContainer`, only its cgroups path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinuxContainer {
    /// 5: `linux.cgroupsPath` of the container's spec.
    pub cgroups_path: String,
}

impl Message for LinuxContainer {
    fn encode(&self, w: &mut Writer) {
        w.string(5, &self.cgroups_path);
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        if field == 5 {
            self.cgroups_path = v.string(5)?;
        }
        Ok(())
    }
}

/// `Container`, the fields the plugin uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Container {
    /// 1: the container id.
    pub id: String,
    /// 2: its pod's sandbox id.
    pub pod_sandbox_id: String,
    /// 3: its name within the pod.
    pub name: String,
    /// 4: its state ([`state`]).
    pub state: u64,
    /// 6: its annotations.
    pub annotations: BTreeMap<String, String>,
    /// 11: its Linux part.
    pub linux: Option<LinuxContainer>,
    /// 12: its init's pid as the runtime knows it (0: not given).
    pub pid: u32,
}

impl Message for Container {
    fn encode(&self, w: &mut Writer) {
        w.string(1, &self.id);
        w.string(2, &self.pod_sandbox_id);
        w.string(3, &self.name);
        w.varint(4, self.state);
        w.map(6, &self.annotations);
        if let Some(l) = &self.linux {
            w.message(11, &l.to_bytes());
        }
        w.varint(12, u64::from(self.pid));
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        match field {
            1 => self.id = v.string(1)?,
            2 => self.pod_sandbox_id = v.string(2)?,
            3 => self.name = v.string(3)?,
            4 => self.state = v.varint(4)?,
            6 => put_map(&mut self.annotations, v, 6)?,
            11 => self.linux = Some(LinuxContainer::decode(v.bytes(11)?)?),
            12 => self.pid = v.varint(12)? as u32,
            _ => {}
        }
        Ok(())
    }
}

/// `SynchronizeRequest`: what runs when the plugin connects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SynchronizeRequest {
    /// 1: the pods.
    pub pods: Vec<PodSandbox>,
    /// 2: the containers.
    pub containers: Vec<Container>,
    /// 3: more requests follow with the rest. Not in NRI 0.6.1, which sends one request; newer
    /// NRI splits a large state this way, so the plugin collects until `more` is false.
    pub more: bool,
}

impl Message for SynchronizeRequest {
    fn encode(&self, w: &mut Writer) {
        for p in &self.pods {
            w.message(1, &p.to_bytes());
        }
        for c in &self.containers {
            w.message(2, &c.to_bytes());
        }
        w.bool(3, self.more);
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        match field {
            1 => self.pods.push(PodSandbox::decode(v.bytes(1)?)?),
            2 => self.containers.push(Container::decode(v.bytes(2)?)?),
            3 => self.more = v.varint(3)? != 0,
            _ => {}
        }
        Ok(())
    }
}

/// `SynchronizeResponse`: no updates, ever. Field 2 echoes a request's `more` flag, as newer NRI
/// (not 0.6.1, whose runtime skips the unknown field) expects of each partial request's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SynchronizeResponse {
    /// 2: more requests are expected.
    pub more: bool,
}

impl Message for SynchronizeResponse {
    fn encode(&self, w: &mut Writer) {
        w.bool(2, self.more);
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        if field == 2 {
            self.more = v.varint(2)? != 0;
        }
        Ok(())
    }
}

/// `CreateContainerRequest`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateContainerRequest {
    /// 1: the pod.
    pub pod: Option<PodSandbox>,
    /// 2: the container being created.
    pub container: Option<Container>,
}

impl Message for CreateContainerRequest {
    fn encode(&self, w: &mut Writer) {
        if let Some(p) = &self.pod {
            w.message(1, &p.to_bytes());
        }
        if let Some(c) = &self.container {
            w.message(2, &c.to_bytes());
        }
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        match field {
            1 => self.pod = Some(PodSandbox::decode(v.bytes(1)?)?),
            2 => self.container = Some(Container::decode(v.bytes(2)?)?),
            _ => {}
        }
        Ok(())
    }
}

/// `StateChangeEvent`: a lifecycle event the plugin subscribed to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateChangeEvent {
    /// 1: the event (`event::*`).
    pub event: u32,
    /// 2: the pod.
    pub pod: Option<PodSandbox>,
    /// 3: the container.
    pub container: Option<Container>,
}

impl Message for StateChangeEvent {
    fn encode(&self, w: &mut Writer) {
        w.varint(1, u64::from(self.event));
        if let Some(p) = &self.pod {
            w.message(2, &p.to_bytes());
        }
        if let Some(c) = &self.container {
            w.message(3, &c.to_bytes());
        }
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        match field {
            1 => self.event = v.varint(1)? as u32,
            2 => self.pod = Some(PodSandbox::decode(v.bytes(2)?)?),
            3 => self.container = Some(Container::decode(v.bytes(3)?)?),
            _ => {}
        }
        Ok(())
    }
}

/// `Hook`: one OCI hook.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hook {
    /// 1: the executable (a path in the runtime's mount namespace: the host's).
    pub path: String,
    /// 2: argv, including argv\[0\].
    pub args: Vec<String>,
    /// 3: the environment.
    pub env: Vec<String>,
    /// 4: the timeout in seconds (`OptionalInt`, field 1 of it).
    pub timeout: Option<i64>,
}

impl Message for Hook {
    fn encode(&self, w: &mut Writer) {
        w.string(1, &self.path);
        self.args.iter().for_each(|a| w.repeated_string(2, a));
        self.env.iter().for_each(|e| w.repeated_string(3, e));
        if let Some(t) = self.timeout {
            let mut o = Writer::new();
            o.varint(1, t as u64);
            w.message(4, &o.finish());
        }
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        match field {
            1 => self.path = v.string(1)?,
            2 => self.args.push(v.string(2)?),
            3 => self.env.push(v.string(3)?),
            4 => {
                let mut t = 0;
                let mut r = Reader::new(v.bytes(4)?);
                while let Some((f, v)) = r.next()? {
                    if f == 1 {
                        t = v.varint(1)? as i64;
                    }
                }
                self.timeout = Some(t);
            }
            _ => {}
        }
        Ok(())
    }
}

/// `Hooks`: hooks by stage (the field numbers of the stages NRI knows).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hooks {
    /// 1.
    pub prestart: Vec<Hook>,
    /// 2.
    pub create_runtime: Vec<Hook>,
    /// 3.
    pub create_container: Vec<Hook>,
    /// 4.
    pub start_container: Vec<Hook>,
    /// 5.
    pub poststart: Vec<Hook>,
    /// 6.
    pub poststop: Vec<Hook>,
}

impl Hooks {
    fn stages(&self) -> [(u32, &Vec<Hook>); 6] {
        [
            (1, &self.prestart),
            (2, &self.create_runtime),
            (3, &self.create_container),
            (4, &self.start_container),
            (5, &self.poststart),
            (6, &self.poststop),
        ]
    }
}

impl Message for Hooks {
    fn encode(&self, w: &mut Writer) {
        for (field, hooks) in self.stages() {
            hooks.iter().for_each(|h| w.message(field, &h.to_bytes()));
        }
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        let list = match field {
            1 => &mut self.prestart,
            2 => &mut self.create_runtime,
            3 => &mut self.create_container,
            4 => &mut self.start_container,
            5 => &mut self.poststart,
            6 => &mut self.poststop,
            _ => return Ok(()),
        };
        list.push(Hook::decode(v.bytes(field)?)?);
        Ok(())
    }
}

/// `ContainerAdjustment`: the only two parts the plugin ever sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerAdjustment {
    /// 2: annotations to set.
    pub annotations: BTreeMap<String, String>,
    /// 5: hooks to add.
    pub hooks: Option<Hooks>,
}

impl Message for ContainerAdjustment {
    fn encode(&self, w: &mut Writer) {
        w.map(2, &self.annotations);
        if let Some(h) = &self.hooks {
            w.message(5, &h.to_bytes());
        }
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        match field {
            2 => put_map(&mut self.annotations, v, 2)?,
            5 => self.hooks = Some(Hooks::decode(v.bytes(5)?)?),
            // Anything else (mounts 3, env 4, linux 6, rlimits 7) is kept out of the model, so a
            // decoded adjustment that had such fields differs from its re-encoding: tests see it.
            _ => {}
        }
        Ok(())
    }
}

/// `CreateContainerResponse`: an adjustment and never updates or evictions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateContainerResponse {
    /// 1: the adjustment (absent: nothing changes).
    pub adjust: Option<ContainerAdjustment>,
}

impl Message for CreateContainerResponse {
    fn encode(&self, w: &mut Writer) {
        if let Some(a) = &self.adjust {
            w.message(1, &a.to_bytes());
        }
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        if field == 1 {
            self.adjust = Some(ContainerAdjustment::decode(v.bytes(1)?)?);
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "messages_tests.rs"]
mod tests;
