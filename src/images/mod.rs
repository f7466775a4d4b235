//! CRIU's network images, decoded: what a checkpoint holds about a network namespace.
//!
//! - [`format`]: image framing (magics, size-prefixed protobuf entries), strict errors.
//! - [`pb`]: prost types generated from CRIU's MIT-licensed `images/*.proto` (`proto/criu/`).
//! - [`ipdump`]: the raw `ip addr/route/rule save` images, decoded with netlink-packet-route.
//! - [`netimg`]: one images folder → [`NetImages`]; [`devsysctl`]: a device's sysctls named
//!   through one shared table; [`tree`]: its text rendering.
//! - [`archive`]: a checkpoint archive (tar, tar.gz, tar.zst, told by content) read as a
//!   stream, bounded; [`engine`]: the engine's metadata in it; [`finding`]: what a restore
//!   brings back; [`checkpoint`]: the three together, `netprobe images ARCHIVE`.
//! - [`cli`]: `netprobe images DIR|ARCHIVE [--json]` (clap arguments + handler).
//!
//! Nothing here runs CRIU or touches a namespace: data in, data out.

pub mod archive;
pub mod checkpoint;
pub mod checkpoint_diff;
pub mod cli;
pub mod devsysctl;
pub mod engine;
pub mod finding;
pub mod format;
pub mod inventory;
pub mod ipdump;
pub mod netimg;
pub mod pb;
pub mod restored;
pub mod tree;

pub use format::ImageError;
pub use netimg::{DeviceInfo, NetImages, NetnsInfo, NsImages, images_dir, read_dir};
