//! The long-running parts of a node: the NRI plugin ([`nri`]), the exec follower
//! (`reconcile --follow`, [`follow`]), the HTTP endpoint both serve with `--listen`
//! ([`endpoint`]), what the node lets both do, looked at from their loops ([`node`]), and the stop
//! flag their loops poll ([`signals`]). Nothing below names them.

pub(crate) mod endpoint;
pub mod follow;
pub mod node;
pub mod nri;
pub(crate) mod signals;
