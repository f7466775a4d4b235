//! Test binary `net` (one per area, each former tests/*.rs a module): Network state in real namespaces: netlink decode and dumps, the full state capture, netfilter, the holder and its port forwarder, TCP readiness, CRIU's network lock.
//! Modules of different former files never overlap (`common::baton`).

#[path = "../common/mod.rs"]
mod common;

mod criu_unlock;
mod holder_forward;
mod netfilter_empty;
mod netlink_bench;
mod netlink_decode;
mod netlink_fixtures_gen;
mod netlink_netns;
mod netstate_full;
mod ns_holder;
mod readiness_tcp;
