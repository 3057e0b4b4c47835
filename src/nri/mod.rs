//! The NRI plugin (operator layer; the `nri` command comes with the next change). This part is the
//! protocol: NRI's multiplexed connection and ttrpc's framing ([`wire`]), the protobuf wire format
//! ([`proto`]), ttrpc's envelope ([`ttrpc`]) and the NRI messages the plugin uses ([`messages`]),
//! written from NRI 0.6.1's API definition as the specification, with no new dependency.

pub mod messages;
pub mod proto;
pub mod ttrpc;
pub mod wire;
