//! Value types that more than one layer names, kept in a leaf so that naming one brings in no
//! layer: a process id, a cookie's value, and what the cache records about a member besides its identity. The
//! decision computes the labels ([`crate::decide::policy::Decision::labels`]), the cache stores them and the
//! kernel seam speaks cookies; none of them needs the others for that.

/// A process or thread id as the host pid namespace sees it. `0` means "the calling thread".
pub type Pid = i32;

/// A core-scheduling cookie as `PR_SCHED_CORE_GET` reports it. `0` means "no cookie".
pub type Cookie = u64;

/// What the cache records about a container besides its identity and cookie: its cgroup (for
/// `reconcile`), the cgroup whose `cpu.idle` it keeps at 1 (for the follower), and its pod's
/// labels (for `list` and metrics). The hook fills it from its decision and `/proc`, a reload
/// from the runtime's state, and the engine stores it as given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels {
    /// Cgroup path of the init, relative to the cgroup mount.
    pub cgroup: Option<String>,
    /// Pod namespace.
    pub namespace: Option<String>,
    /// Pod name (`io.kubernetes.pod.name`), when known.
    pub pod_name: Option<String>,
    /// Pod uid (`io.kubernetes.pod.uid`), when known.
    pub pod_uid: Option<String>,
    /// Container name within its pod (`io.kubernetes.container.name`), when known.
    pub container_name: Option<String>,
    /// The container's cgroup (relative to the cgroup mount) whose `cpu.idle` is 1, for a member
    /// of a QoS class with `sched_idle`; the follower sets it again when a runtime or systemd
    /// reset it.
    pub idle_cgroup: Option<String>,
}
