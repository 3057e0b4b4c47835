//! The host as the other layers see it: the kernel seam (the one `prctl` caller and its fake),
//! `/proc`, the cgroup tree and the reader's cgroup namespace, the kernel's process events, the
//! state directory and its lock, the runtimes' state directories with the bundles and OCI states
//! they hold, and [`system::System`], which builds them once per process. Everything here reads
//! or calls the operating system; nothing here knows of groups, the cache or the decision.

pub mod bundle;
pub mod cgroup;
pub(crate) mod cgroup_ns;
pub mod cpu;
pub mod kernel;
pub mod oci_state;
pub mod proc_events;
pub mod procfs;
pub mod runtimes;
pub mod sched_ext;
pub mod state_dir;
pub mod system;
pub mod wiring;
