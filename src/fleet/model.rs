//! `fleet.json`: the model of one `netprobe fleet DIR` (serde), validated against
//! `evidence-schema/fleet.schema.json` before it is written.

use crate::evidence::result::{RungName, Status, VerdictCode};
use crate::exit::ExitClass;
use serde::{Deserialize, Serialize};

/// File name of the fleet result inside the fleet folder.
pub const FLEET_FILE: &str = "fleet.json";
/// File name of the Markdown table inside the fleet folder.
pub const FLEET_MD: &str = "fleet.md";
/// File name of the HTML table inside the fleet folder.
pub const FLEET_HTML: &str = "fleet.html";
/// `schema_version` written by this netprobe.
pub const FLEET_SCHEMA_VERSION: u32 = 1;
/// The JSON Schema (2020-12) of [`FleetResult`].
pub const FLEET_SCHEMA: &str = include_str!("../../evidence-schema/fleet.schema.json");

/// What the fleet found about one host folder. Every state but `verified` is named in the
/// table and decides the exit code ([`super::table::exit_class`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostState {
    /// The evidence reproduces its recorded result (`netprobe verify`).
    Verified,
    /// The evidence does not reproduce its recorded result (a file changed, missing, unlisted…).
    NotVerified,
    /// Written by a newer netprobe (a `schema_version` or `tool_version` above this one's):
    /// this netprobe cannot re-derive it faithfully.
    NewerNetprobe,
    /// Two host folders name the same host (compared without case).
    DuplicateHost,
    /// The folder is not an evidence folder (no readable, valid `netprobe-result.json`), or the
    /// host's run left none.
    NotEvidence,
    /// Ansible could not reach the host (its reason in `reason`).
    Unreachable,
}

impl HostState {
    /// The word used in `fleet.json` and the table.
    pub fn as_str(self) -> &'static str {
        match self {
            HostState::Verified => "verified",
            HostState::NotVerified => "NOT VERIFIED",
            HostState::NewerNetprobe => "newer netprobe",
            HostState::DuplicateHost => "duplicate host",
            HostState::NotEvidence => "not an evidence folder",
            HostState::Unreachable => "unreachable",
        }
    }
}

/// One binary as the host's result records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetBinary {
    /// Path executed on the host.
    pub path: String,
    /// Parsed version (e.g. `4.2.1`).
    pub version: String,
    /// Lower-case hex sha256 of the binary.
    pub sha256: String,
}

/// One rung's status as recorded (and, for a verified host, reproduced).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetRung {
    /// The rung.
    pub name: RungName,
    /// Its status.
    pub status: Status,
}

/// Why a host is named first: its verdict differs from `--expect` or from its peers (hosts with
/// the same kernel, runtime and CRIU), with the `netprobe diff` against a host that agrees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disagreement {
    /// `expect` or `peers`.
    pub against: DisagreeKind,
    /// The verdict it was expected to have (`--expect`, or its peers' most common verdict).
    pub expected: VerdictCode,
    /// The host it is compared with (one that has `expected`); `None` when no host does.
    pub compared_with: Option<String>,
    /// The command that shows the difference (`netprobe diff AGREEING THIS`), paths relative to
    /// the fleet folder.
    pub diff_command: Option<String>,
    /// What that command prints (`report::diff::render_diff`), or why it could not run.
    pub diff: Option<String>,
}

/// What a disagreeing host disagrees with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DisagreeKind {
    /// The verdict differs from `--expect`.
    Expect,
    /// The verdict differs from the most common one of hosts with the same kernel, runtime and
    /// CRIU (sha256).
    Peers,
}

/// One host of the fleet: its row in the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetHost {
    /// The host's name: the `host` its Ansible record names, else its folder's name.
    pub name: String,
    /// Its folder, relative to the fleet folder.
    pub folder: String,
    /// The evidence folder verified (relative to the fleet folder); `None` when there is none.
    pub evidence: Option<String>,
    /// What the fleet found.
    pub state: HostState,
    /// Why the state is not `verified` (the first mismatch, the reader's error, Ansible's
    /// unreachable message, the other folder of a duplicate …).
    pub reason: Option<String>,
    /// Every mismatch `verify` found (at most 20, then a count).
    pub mismatches: Vec<String>,
    /// `uname -r` as recorded.
    pub kernel: Option<String>,
    /// cgroup mode as recorded (`v1`, `v2`, `hybrid`).
    pub cgroup: Option<String>,
    /// The OCI runtime as recorded.
    pub runtime: Option<FleetBinary>,
    /// CRIU as recorded.
    pub criu: Option<FleetBinary>,
    /// The verdict recomputed by `verify` (verified hosts) or as recorded (others with a result).
    pub verdict: Option<VerdictCode>,
    /// Each rung's recorded status, in ladder order.
    pub rungs: Vec<FleetRung>,
    /// `netprobe run`'s exit code as the Ansible record has it.
    pub run_exit: Option<i64>,
    /// `netprobe doctor`'s exit code as the Ansible record has it.
    pub doctor_exit: Option<i64>,
    /// Set when the host is named first.
    pub disagrees: Option<Disagreement>,
    /// The matrix the play ran on the host (`netprobe_matrix_config`), verified; absent (not
    /// written) when it ran none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<FleetMatrix>,
}

/// A host's matrix folder (`netprobe matrix`, fetched by the play beside the evidence folder),
/// verified as `netprobe verify` of a matrix folder does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetMatrix {
    /// The matrix folder, relative to the fleet folder.
    pub folder: String,
    /// Whether every part, cell verdict and file of the matrix reproduces.
    pub verified: bool,
    /// Every problem `verify` found (at most 20, then a count), or why `matrix.json` could not
    /// be read.
    pub problems: Vec<String>,
    /// Each cell as `matrix.json` records it (its verdict recomputed by `verify`).
    pub cells: Vec<FleetCell>,
    /// `netprobe matrix`'s exit code as the Ansible record has it.
    pub exit: Option<i64>,
}

/// One cell of a host's matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetCell {
    /// `runtime × CRIU` label.
    pub label: String,
    /// Its verdict.
    pub verdict: VerdictCode,
    /// Its expected verdict (the config's `[expect]`), if any.
    pub expected: Option<VerdictCode>,
}

/// `fleet.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetResult {
    /// [`FLEET_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `netprobe`.
    pub tool: String,
    /// This build's version.
    pub tool_version: String,
    /// RFC 3339 time the table was made (UTC).
    pub written_at: String,
    /// `--expect`, when given.
    pub expect: Option<VerdictCode>,
    /// Hosts, disagreeing ones first, then grouped by verdict (or state), then by name.
    pub hosts: Vec<FleetHost>,
    /// The exit class of the command ([`super::table::exit_class`]).
    pub exit_class: ExitClass,
    /// Its exit code.
    pub exit_code: u8,
}
