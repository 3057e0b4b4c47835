//! Cookies and the groups that hold them: the membership model (is a cached member alive, which
//! member owns a cgroup), the group rules (`groups`: a group's cookie, split groups, which group
//! owns a cookie), the engine's ensure / clear / forget over the kernel seam and the cache,
//! the pod's shim, the receipts a later stage reads instead of the cache, and the stops poststop
//! records for the next writer. Callers hold the state lock and one cache transaction.

pub mod engine;
pub(crate) mod groups;
pub(crate) mod membership;
pub(crate) mod receipt;
pub(crate) mod shim;
pub mod stopped;
