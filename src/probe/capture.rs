//! The rungs' state capture: the full [`NetState`] of a netns (links, addresses with flags,
//! routes, rules, the sysctls CRIU saves, the canonical netfilter ruleset), written as
//! `netstate-<when>.json`, with the evidence beside it that is not compared:
//! `sysctls-other-<when>.json` (sysctls under /proc/sys/net CRIU does not save) and
//! `netfilter-<when>.txt` (raw iptables-save / ip6tables-save / nft list ruleset output).

use crate::evidence::EvidenceDir;
use crate::netlink::NetState;
use std::path::Path;

/// How long a capture waits for `tentative` addresses (IPv6 DAD) to settle, milliseconds.
pub use crate::ns::SETTLE_MS;

/// Why [`capture_and_write`] failed: the capture, or writing its evidence.
#[derive(Debug, thiserror::Error)]
pub enum CaptureWriteError {
    /// The state capture failed.
    #[error(transparent)]
    Capture(#[from] crate::ns::CaptureError),
    /// An evidence file could not be written.
    #[error("evidence: {0}")]
    Evidence(#[from] crate::evidence::EvidenceError),
}

/// Captures the full state of the netns at `netns` and writes `<rung>/netstate-<when>.json`,
/// `<rung>/sysctls-other-<when>.json` and `<rung>/netfilter-<when>.txt` (`when` is `before`
/// or `after`). Returns the state and the number of settle retries.
///
/// Errors: [`CaptureWriteError`], naming the capture or the evidence file that failed.
pub fn capture_and_write(
    ev: &EvidenceDir,
    rung: &str,
    netns: &Path,
    when: &str,
) -> Result<(NetState, u32), CaptureWriteError> {
    let (state, extras) = crate::ns::capture_netstate(netns)?;
    let rel = |f: &str| format!("{rung}/{f}");
    ev.write(
        &rel(&format!("netstate-{when}.json")),
        state.to_canonical_json().as_bytes(),
    )?;
    ev.write(
        &rel(&format!("sysctls-other-{when}.json")),
        extras.uncovered_sysctls_json().as_bytes(),
    )?;
    ev.write(
        &rel(&format!("netfilter-{when}.txt")),
        extras.netfilter_text().as_bytes(),
    )?;
    Ok((state, extras.settle_retries))
}
