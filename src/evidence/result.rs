//! The result model: what `netprobe-result.json` holds (schema: `evidence-schema/
//! netprobe-result.schema.json`, JSON Schema 2020-12). Every other part of netprobe (runner,
//! verdict, `verify`, `report`, `diff`) reads and writes these types, never raw JSON.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the `netprobe-result.json` layout. Bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// File name of the result inside an evidence directory.
pub const RESULT_FILE: &str = "netprobe-result.json";

/// One rung of the probe ladder, cheapest first (ARCHITECTURE.md section 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RungName {
    /// netprobe itself sends CRIU's exact `RTM_GETLINK` dump in a fresh netns.
    Kernel,
    /// plain `criu dump`/`criu restore` of a child with its own netns.
    Criu,
    /// an OCI runtime (runc) checkpoint/restore of a container with a private netns.
    Oci,
    /// the same runtime with the netns owned by a holder and named by path in `config.json`.
    ExternalNetns,
}

impl RungName {
    /// All rungs in ladder order.
    pub const ALL: [RungName; 4] = [
        RungName::Kernel,
        RungName::Criu,
        RungName::Oci,
        RungName::ExternalNetns,
    ];

    /// The rung's name as used on the command line, in evidence paths and in `probes/<name>.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            RungName::Kernel => "kernel",
            RungName::Criu => "criu",
            RungName::Oci => "oci",
            RungName::ExternalNetns => "external-netns",
        }
    }

    /// Parses a rung name as written on the command line. Errors: `None` for an unknown name.
    pub fn parse(s: &str) -> Option<RungName> {
        RungName::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

impl std::fmt::Display for RungName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Outcome of one rung.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// every `role = "pass"` assertion of the rung held.
    Pass,
    /// the rung ran to the end and at least one `role = "pass"` assertion did not hold.
    Fail,
    /// the rung could not run to the end (see `RungResult::error`).
    Error,
    /// not requested with `--phases`.
    Skipped,
}

/// The layered verdict (ARCHITECTURE.md section 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictCode {
    /// the kernel does not answer the link dump in a fresh netns.
    KernelNetlink,
    /// CRIU (or a kernel feature it needs) loses the netns.
    CriuNetns,
    /// the runtime tells CRIU the netns is empty (runc's design).
    RuntimeEmptyNs,
    /// the empty-ns finding does not hold for this runtime/CRIU pair.
    RuntimePreservesNetns,
    /// the external-netns workaround itself fails here.
    ExternalNetnsBroken,
    /// something could not run, or the rungs run do not decide a row of the table.
    Inconclusive,
}

impl VerdictCode {
    /// All codes, in table order.
    pub const ALL: [VerdictCode; 6] = [
        VerdictCode::KernelNetlink,
        VerdictCode::CriuNetns,
        VerdictCode::RuntimeEmptyNs,
        VerdictCode::RuntimePreservesNetns,
        VerdictCode::ExternalNetnsBroken,
        VerdictCode::Inconclusive,
    ];

    /// The code as written in results and accepted by `--expect`.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictCode::KernelNetlink => "kernel-netlink",
            VerdictCode::CriuNetns => "criu-netns",
            VerdictCode::RuntimeEmptyNs => "runtime-empty-ns",
            VerdictCode::RuntimePreservesNetns => "runtime-preserves-netns",
            VerdictCode::ExternalNetnsBroken => "external-netns-broken",
            VerdictCode::Inconclusive => "inconclusive",
        }
    }

    /// Parses a verdict code. Errors: `None` for an unknown code.
    pub fn parse(s: &str) -> Option<VerdictCode> {
        VerdictCode::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

impl std::fmt::Display for VerdictCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A file in the evidence directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// Path relative to the evidence directory, `/`-separated (e.g. `criu/dump.log`).
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Lower-case hex SHA-256 of the stored bytes (what `sha256sum` of the file shows).
    pub sha256: String,
    /// For a file stored compressed (`….zst`, [`super::compressed`]): what it decodes to; for
    /// one kept by reference (`….ref`, [`super::reference`]): the referenced file. Absent for
    /// a file stored as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
}

/// What a file stored compressed decodes to (or a reference refers to): the bytes the writer
/// (CRIU, netprobe) wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Content {
    /// How the file is stored.
    pub encoding: Encoding,
    /// Size of the decoded content, bytes.
    pub bytes: u64,
    /// Lower-case hex SHA-256 of the decoded content.
    pub sha256: String,
}

/// How a recorded file is stored other than as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// A zstd frame (RFC 8878); the file's name ends in `.zst`.
    Zstd,
    /// Kept by reference to the same bytes stored in a sibling verb folder
    /// ([`super::reference`]); the file's name ends in `.ref`, `content` is the referenced
    /// file's sha256 and size.
    Reference,
}

/// Facts about one binary netprobe ran (CRIU, the OCI runtime).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BinaryFacts {
    /// Absolute path that was executed.
    pub path: String,
    /// The version as parsed from its version output (e.g. `4.1.1`, `1.1.5+ds1`).
    pub version: String,
    /// The whole version output, verbatim.
    pub version_output: String,
    /// Lower-case hex SHA-256 of the binary.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
    /// When the file is not an ELF executable but a `#!` script: its interpreter line after
    /// `#!` (e.g. `/bin/sh`), so the version and sha256 above are the script's, not those of
    /// the program it runs. Absent for an ELF executable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script_interpreter: Option<String>,
    /// The sha256 set-up recorded for the binary it installed at this path (`binary_sha256` of
    /// `<prefix>/netprobe-install.json`, written by `host/install-pins.sh`, `install-criu.sh`,
    /// `install-runc.sh`); absent when no record names this path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_sha256: Option<String>,
}

/// Facts about the host, recorded in `host.json` and in the result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    /// `uname -r` (kernel release).
    pub kernel_release: String,
    /// `uname -v`.
    pub kernel_version: String,
    /// `uname -m`.
    pub machine: String,
    /// PRETTY_NAME of /etc/os-release, if present.
    pub os: Option<String>,
    /// `v1`, `v2` or `hybrid`.
    pub cgroup: String,
    /// The CRIU that was used.
    pub criu: Option<BinaryFacts>,
    /// The OCI runtime that was used (absent when no runtime rung ran).
    pub runtime: Option<BinaryFacts>,
}

/// Whether one binary matches its pin (pins are data: `host/pins.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinCheck {
    /// `criu` or `runtime`.
    pub name: String,
    /// The pinned version (e.g. `1.5.2`).
    pub pinned_version: String,
    /// The pinned sha256, when the pin has one.
    pub pinned_sha256: Option<String>,
    /// The pinned size in bytes, when the pin has one.
    pub pinned_bytes: Option<u64>,
    /// The observed version.
    pub observed_version: String,
    /// The observed sha256.
    pub observed_sha256: String,
    /// The observed size in bytes.
    pub observed_bytes: u64,
    /// The sha256 set-up recorded for the binary it installed at the observed path
    /// ([`BinaryFacts::installed_sha256`]), when any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_sha256: Option<String>,
    /// True only when every pinned field equals the observed one and a sha256 proves the bytes:
    /// the pin's own, or the one set-up recorded for this path (never `--version` alone).
    pub matches: bool,
}

/// One assertion as evaluated over the evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssertionResult {
    /// Stable id from `probes/<rung>.toml` (unique within the rung).
    pub id: String,
    /// `pass` (decides the rung's status) or a signature name such as `empty-ns`.
    pub role: String,
    /// Human-readable statement of what is checked.
    pub description: String,
    /// What was examined, relative to the rung's folder (a log, a glob, a state file).
    pub subject: String,
    /// The expectation as text (e.g. `== 0 after the first line containing "Dump NET namespace info"`).
    pub expected: String,
    /// What was observed, as text (a count, a size list, a diff summary).
    pub observed: String,
    /// Whether the expectation held. Fail closed: anything that could not be read is `false`.
    pub passed: bool,
}

/// The result of one rung.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RungResult {
    /// Which rung.
    pub name: RungName,
    /// Outcome.
    pub status: Status,
    /// One line: the deciding fact (e.g. `lo DOWN, no address after restore; no netns image`).
    pub summary: String,
    /// RFC 3339 start time (UTC).
    pub started_at: String,
    /// Wall time of the rung, milliseconds, monotonic clock.
    pub duration_ms: u64,
    /// Named timings of steps inside the rung, milliseconds, monotonic clock
    /// (e.g. `checkpoint`, `restore`).
    pub timings_ms: BTreeMap<String, u64>,
    /// Free-form facts (pids, inodes, versions, image counts), for people and reports.
    pub facts: BTreeMap<String, serde_json::Value>,
    /// Every assertion of `probes/<rung>.toml`, evaluated.
    pub assertions: Vec<AssertionResult>,
    /// Every file the rung wrote, with sha256.
    pub artifacts: Vec<Artifact>,
    /// Why the rung could not run (status `error`), with the phase it was in.
    pub error: Option<String>,
}

/// The verdict and what it rests on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The verdict code.
    pub code: VerdictCode,
    /// One sentence for people.
    pub summary: String,
    /// The assertions the verdict rests on, as `<rung>/<assertion id>`.
    pub rests_on: Vec<String>,
    /// For `inconclusive`: the rung that could not run or decide, and why.
    pub reason: Option<String>,
}

/// The whole `netprobe-result.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Always [`SCHEMA_VERSION`] when written by this build.
    pub schema_version: u32,
    /// `netprobe`.
    pub tool: String,
    /// This build's version (`CARGO_PKG_VERSION`).
    pub tool_version: String,
    /// The command line, argv.
    pub command: Vec<String>,
    /// RFC 3339 start time (UTC).
    pub started_at: String,
    /// RFC 3339 finish time (UTC).
    pub finished_at: String,
    /// Wall time of the whole run, milliseconds, monotonic clock.
    pub duration_ms: u64,
    /// The rungs requested with `--phases`, in order.
    pub phases: Vec<RungName>,
    /// Facts about the host and the binaries used.
    pub host: HostFacts,
    /// Pin checks for CRIU and the runtime.
    pub pins: Vec<PinCheck>,
    /// What differs from the reference setup; accompanies every number netprobe prints.
    pub declared_differences: Vec<String>,
    /// One entry per rung of the ladder (skipped ones included), in ladder order.
    pub rungs: Vec<RungResult>,
    /// The verdict.
    pub verdict: Verdict,
    /// Every file in the evidence directory except this one, with sha256.
    pub artifacts: Vec<Artifact>,
}

impl RunResult {
    /// The result of rung `name`, if present.
    pub fn rung(&self, name: RungName) -> Option<&RungResult> {
        self.rungs.iter().find(|r| r.name == name)
    }
}

/// What `netprobe verify` found: the verdict recomputed from an evidence folder next to the
/// recorded one. Source: [`crate::probe::verify::verify`]; printed by
/// [`crate::report::console::verify_text`] (kept here, in the shared model, so that `report`
/// does not depend on `probe`).
#[derive(Debug)]
pub struct VerifyOutcome {
    /// The verdict recomputed from the files alone.
    pub verdict: Verdict,
    /// The verdict the result file recorded.
    pub recorded: Verdict,
    /// Every mismatch: an assertion whose outcome differs from the recorded one, a rung whose
    /// recomputed status differs, an artifact that is missing or whose sha256 changed.
    pub mismatches: Vec<String>,
    /// Assertions that fail as recorded or as recomputed now from the evidence, each with both
    /// sides ([`FailingAssertion`]); expected for a failing rung, listed for people.
    pub failing: Vec<FailingAssertion>,
    /// Number of assertions re-evaluated.
    pub assertions: usize,
    /// Number of artifacts whose sha256 was checked.
    pub artifacts: usize,
    /// The fields re-derived from the files and compared with the recorded ones, e.g.
    /// `rungs[criu].facts.image_files`, `pins`, `verdict (code, summary, rests_on, reason)`.
    pub rederived: Vec<String>,
    /// The recorded fields `verify` did not re-derive (clock readings, facts only the live run
    /// saw such as `rungs[oci].facts.work_area`), so that it never implies it checked them.
    pub not_rederived: Vec<String>,
}

/// Where an assertion `verify` lists as failing stands as recorded and as recomputed now from
/// the evidence: the heading it is printed under names both sides, so an assertion recorded as
/// passing is never listed as failing "as recorded". Source: [`crate::probe::verify::verify`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailingSide {
    /// Recorded as failing, and fails again when recomputed now.
    RecordedAndNow,
    /// Recorded as passing, fails when recomputed now (also a MISMATCH).
    NowRecordedPassing,
    /// Not in the recorded result, fails when recomputed now (also a MISMATCH).
    NowNotRecorded,
    /// Recorded as failing, passes when recomputed now (also a MISMATCH).
    RecordedNowPassing,
}

impl FailingSide {
    /// Every side, in the order `verify` prints them.
    pub const ALL: [FailingSide; 4] = [
        FailingSide::RecordedAndNow,
        FailingSide::NowRecordedPassing,
        FailingSide::NowNotRecorded,
        FailingSide::RecordedNowPassing,
    ];

    /// The heading `verify` prints before each assertion of this side, naming the status as
    /// recorded and as recomputed now.
    pub fn heading(self) -> &'static str {
        match self {
            FailingSide::RecordedAndNow => "failing as recorded and as recomputed now",
            FailingSide::NowRecordedPassing => "failing as recomputed now, recorded as passing",
            FailingSide::NowNotRecorded => "failing as recomputed now, not in the recorded result",
            FailingSide::RecordedNowPassing => "failing as recorded, passing as recomputed now",
        }
    }
}

/// One assertion `verify` lists as failing on at least one side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailingAssertion {
    /// Its status as recorded and as recomputed now.
    pub side: FailingSide,
    /// `<rung>/<id>: <description> — expected …, observed …`; the observation is the failing
    /// side's (the recomputed one, or for [`FailingSide::RecordedNowPassing`] the recorded one).
    pub text: String,
}

impl VerifyOutcome {
    /// True when the evidence reproduces the recorded result exactly.
    pub fn reproduced(&self) -> bool {
        self.mismatches.is_empty() && self.verdict.code == self.recorded.code
    }
}
