//! Evidence: a fresh evidence directory, atomic writes, the artifact list with sha256, the
//! result model (serde) and its JSON Schema validation.
//!
//! - [`compressed`]: evidence stored as zstd (`<name>.zst`): [`EvidenceDir::compress`],
//!   [`compressed::open_content`] (read transparently), both sha256 in the artifact list.
//! - [`dir`]: [`EvidenceDir`] (create / open / write / adopt / inventory / write_result),
//!   [`sha256_file`], [`read_result`], [`default_path`].
//! - [`empty_dirs`]: [`empty_dirs::fileless_dirs`] (directories holding no file, which no
//!   artifact list can name) and the ones producers leave.
//! - [`enclosing`]: [`enclosing::refuse_inside_evidence`] (no new evidence folder inside one
//!   netprobe already wrote).
//! - [`error`]: [`EvidenceError`] (re-exported by [`dir`]).
//! - [`fsio`]: [`replace_atomic`], [`fsync_dir`], [`sha256_hex`], [`now_rfc3339`], [`unix_nanos`],
//!   [`read_bounded`] (a regular file, at most a cap: every operator-named input) and through it
//!   [`read_recorded`], [`read_recorded_text`], [`sha256_recorded`] (every read of a recorded
//!   evidence file: no FIFO, symlink or device; at most [`MAX_PARSED_BYTES`] read whole) (the
//!   one copy of each, used by every module).
//! - [`reference`]: a slot verb's file kept once (`<name>.ref`, the same bytes stored in a
//!   sibling verb folder): [`EvidenceDir::store_as_reference`], read through the old name.
//! - [`schema`]: the embedded JSON Schemas and [`validate_result`] / [`validate_holder`].
//! - [`result`]: the shared result model.

pub mod compressed;
pub mod dir;
pub mod empty_dirs;
pub mod enclosing;
pub mod error;
pub mod fsio;
pub mod reference;
pub mod result;
pub mod schema;
pub mod tree_digest;

pub use dir::{EvidenceDir, EvidenceError, default_path, read_result, sha256_file, sha256_stream};
pub use fsio::{
    BoundedReadError, CONFIG_READ_CAP, MAX_PARSED_BYTES, Symlinks, fsync_dir, now_rfc3339,
    open_regular, read_bounded, read_bounded_text, read_recorded, read_recorded_text,
    replace_atomic, sha256_hex, sha256_recorded, unix_nanos,
};
pub use schema::{validate_holder, validate_result};
pub use tree_digest::{
    ListingDiff, TreeDigest, TreeDigestError, TreeEntry, listing_diff, tree_digest, tree_listing,
};
