//! Rust types generated at build time (`build.rs`: protox + prost-build, no system `protoc`)
//! from CRIU's MIT-licensed `images/netdev.proto` and its imports, carried unchanged in
//! `proto/criu/` (CRIU v4.2). Messages: [`NetDeviceEntry`] (one per `netdev-<id>.img` entry),
//! [`NetnsEntry`] (the single `netns-<id>.img` entry), [`SysctlEntry`], [`TunLinkEntry`],
//! [`MacvlanLinkEntry`], [`SitEntry`].

#![allow(missing_docs, clippy::all, clippy::pedantic)]

include!(concat!(env!("OUT_DIR"), "/_.rs"));
