//! The decision, pure: a container's input ([`policy::ContainerInput`], built one way from each
//! place that describes a container) and the config give what to do with its cookie
//! ([`policy::decide`]). Nothing here names the cache or calls the kernel.

pub(crate) mod input;
pub mod policy;
