//! Log and evidence assertions: probes/*.toml loaded, logs scanned once with memchr.
//!
//! - [`spec`]: [`ProbeSpec`], the data model of `probes/<rung>.toml`, parsed and checked.
//! - [`scan`]: [`scan_log`], one streaming pass over a log for many line-count queries.
//! - [`eval`]: [`evaluate`] (one rung folder) and [`reevaluate`] (a whole evidence folder).

pub mod eval;
pub mod scan;
pub mod spec;

pub use eval::{evaluate, json_field_diff, passes, reevaluate};
pub use scan::{LogQuery, scan_file_mapped, scan_log, scan_log_with_chunk, scan_reader};
pub use spec::{AssertionSpec, Bound, Check, NetStateCheck, ProbeSpec, SpecError};
