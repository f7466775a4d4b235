//! CRIU invocation (dump/restore/check/version) and image inventory.
//!
//! - [`cmd`]: [`CmdOutcome`], the shared record of one external command run (also meant for the
//!   OCI runtime wrapper).
//! - [`run`]: [`Criu`] with [`DumpOpts`] / [`RestoreOpts`].
//! - [`inventory`](mod@inventory): [`ImageFile`] list of an images directory.
//! - [`reason`]: CRIU's deciding log lines (`Error (…)` and the lines before them).
//! - [`yard`]: the root yard `/tmp/.criu.mntns.XXXXXX` a CRIU killed mid-restore leaves, found
//!   in its own log and removed.

pub mod cmd;
pub mod inventory;
pub mod reason;
pub mod run;
pub mod yard;

pub use cmd::{CmdOutcome, RunError};
pub use inventory::{ImageFile, inventory, sha256_file};
pub use reason::{LogLine, deciding_lines, quote_log};
pub use run::{
    CRIU_CONFIG_ENV, Criu, CriuError, DEFAULT_TIMEOUT_SECS, DumpOpts, RestoreOpts,
    parse_criu_version, read_pidfile,
};
