//! The full capture the rungs and the slot compare: [`super::capture`] plus the sysctls CRIU
//! saves and the canonical netfilter ruleset, and what the capture saw beside them
//! ([`CaptureExtras`]: evidence, not compared).

use std::collections::BTreeMap;

use super::NetlinkError;
use super::netfilter::NetfilterRaw;
use super::state::{NetState, capture};

/// What [`capture_full`] saw beside the compared [`NetState`]: evidence, not compared.
#[derive(Debug, Clone, Default)]
pub struct CaptureExtras {
    /// Sysctls under `/proc/sys/net` that CRIU does not save (dotted name → value).
    pub uncovered_sysctls: BTreeMap<String, String>,
    /// The raw `iptables-save` / `ip6tables-save` / `nft list ruleset` output.
    pub netfilter_raw: NetfilterRaw,
    /// How many extra captures were needed until no address was `tentative` (IPv6 DAD of a
    /// link that just came up), 100 ms apart.
    pub settle_retries: u32,
}

impl CaptureExtras {
    /// The evidence text of the raw netfilter output: each tool's command line (`$ iptables-save`,
    /// `$ ip6tables-save`, `$ nft list ruleset`) followed by its stdout, in that order; or, when
    /// the tools were not run because the netns holds no table, that sentence and its proof.
    pub fn netfilter_text(&self) -> String {
        let raw = &self.netfilter_raw;
        if let Some(proof) = &raw.no_tables {
            return format!(
                "# not run: iptables-save, ip6tables-save, nft list ruleset: the netfilter of this netns filters nothing (below), so the canonical ruleset is empty\n{proof}"
            );
        }
        format!(
            "$ iptables-save\n{}\n$ ip6tables-save\n{}\n$ nft list ruleset\n{}",
            raw.iptables, raw.ip6tables, raw.nftables
        )
    }

    /// The sysctls CRIU does not save, as pretty JSON (an object: dotted name → value).
    pub fn uncovered_sysctls_json(&self) -> String {
        serde_json::to_string_pretty(&self.uncovered_sysctls).unwrap_or_else(|_| "{}".into())
    }
}

/// [`capture`] plus the sysctls CRIU saves and the canonical netfilter ruleset, for the
/// rungs: the state is re-captured (100 ms apart, for at most `settle_ms` milliseconds) while
/// any address is `tentative`, so a link that just came up is compared after its DAD.
///
/// Errors: as [`capture`]; `Decode` naming `/proc/sys/net` or the netfilter tool that failed.
pub fn capture_full(settle_ms: u64) -> Result<(NetState, CaptureExtras), NetlinkError> {
    capture_with(settle_ms, Sysctls::All)
}

/// [`capture_full`] without the sysctls CRIU does not save: the same compared [`NetState`]
/// (its sysctls read by name, [`super::sysctl::capture_saved_sysctls`]: ~220 files instead of
/// the walk's ~580), and [`CaptureExtras::uncovered_sysctls`] left **empty** — the caller reads
/// them apart ([`super::sysctl::capture_unsaved_sysctls`] in the same netns), off its critical
/// path, and must not write the empty map as evidence.
///
/// Errors: as [`capture_full`].
pub fn capture_compared(settle_ms: u64) -> Result<(NetState, CaptureExtras), NetlinkError> {
    capture_with(settle_ms, Sysctls::SavedOnly)
}

/// Which sysctls [`capture_with`] reads.
#[derive(Clone, Copy)]
enum Sysctls {
    /// Every file under `/proc/sys/net` (saved ones compared, the others as extras).
    All,
    /// The ones CRIU saves only.
    SavedOnly,
}

fn capture_with(settle_ms: u64, which: Sysctls) -> Result<(NetState, CaptureExtras), NetlinkError> {
    let start = std::time::Instant::now();
    let mut retries = 0;
    let mut state = loop {
        let s = capture()?;
        let tentative = s
            .addresses
            .iter()
            .any(|a| a.flags.iter().any(|f| f == "tentative"));
        if !tentative || start.elapsed().as_millis() as u64 >= settle_ms {
            break s;
        }
        retries += 1;
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    // The netfilter tools run on a scoped thread (created here, so in this thread's netns)
    // while this thread reads the sysctls (`/proc/sys/net` answers for the reader's netns).
    let (sysctls, netfilter) = std::thread::scope(|s| {
        let nf = s.spawn(super::netfilter::capture);
        let sysctls = match which {
            Sysctls::All => super::sysctl::capture_sysctls(),
            Sysctls::SavedOnly => {
                super::sysctl::capture_saved_sysctls().map(|c| (c, BTreeMap::new()))
            }
        };
        let nf = nf.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        (sysctls, nf)
    });
    let (covered, uncovered) =
        sysctls.map_err(|e| NetlinkError::decode("capture: /proc/sys/net", 0, e.to_string()))?;
    let (nf, raw) =
        netfilter.map_err(|e| NetlinkError::decode("capture: netfilter", 0, e.to_string()))?;
    state.sysctls = covered;
    state.netfilter = nf;
    Ok((
        state,
        CaptureExtras {
            uncovered_sysctls: uncovered,
            netfilter_raw: raw,
            settle_retries: retries,
        },
    ))
}
