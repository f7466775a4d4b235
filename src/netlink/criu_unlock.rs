//! Removing CRIU's network lock from the calling thread's network namespace, the way CRIU's own
//! `network_unlock_internal()` does (`criu/net.c`, CRIU 4.x), for a CRIU that was killed before
//! it got there (an interrupted or failed restore).
//!
//! CRIU locks a namespace's network on dump and on restore and unlocks it at the end of a
//! successful restore. Two methods (`--network-lock`):
//! - iptables (the default): `iptables-restore -w --noflush` (and `ip6tables-restore` when the
//!   kernel has IPv6) of [`IPTABLES_LOCK`]; unlocked by [`IPTABLES_DELETE_JUMPS`], once more if
//!   `iptables -C INPUT -j CRIU` still finds a jump (iptables-nft), then
//!   [`IPTABLES_DELETE_CHAIN`]. Each lock adds one `-j CRIU` jump to `INPUT` and `OUTPUT`, so a
//!   restore killed after its lock leaves two of each (the dump's and its own), which the next
//!   restore's unlock (at most two passes) cannot all remove: the `CRIU` chain stays.
//! - nftables: a table `inet CRIU-<id>` (id: the dump's CRIU run id, or the root task's pid for
//!   older images); unlocked by `nft delete table inet CRIU-<id>`.
//!
//! [`unlock_here`] acts only on what a capture ([`super::netfilter::capture_with_tools_here`],
//! no helper thread: it also runs on the signal thread) shows
//! of the lock ([`super::netfilter::criu_lock`]), removes every jump (not only two), and proves
//! the lock gone by a second capture.

use super::netfilter::{NetfilterState, capture_with_tools_here, criu_lock};
use super::{ToolError, UnlockError};
use std::process::{Command, Stdio};
use std::time::Duration;

/// CRIU's iptables lock script (`iptables_network_lock_internal`, `SOCCR_MARK` 0xC114), as CRIU
/// feeds it to `iptables-restore -w --noflush` (and `ip6tables-restore`). Kept here to plant
/// CRIU's exact lock in tests.
pub const IPTABLES_LOCK: &str = "*filter\n:CRIU - [0:0]\n-I INPUT -j CRIU\n-I OUTPUT -j CRIU\n-A CRIU -m mark --mark 0xC114 -j ACCEPT\n-A CRIU -j DROP\nCOMMIT\n";

/// CRIU's first unlock script (`iptables_network_unlock_internal`: `delete_jump_targets`).
pub const IPTABLES_DELETE_JUMPS: &str =
    "*filter\n:CRIU - [0:0]\n-D INPUT -j CRIU\n-D OUTPUT -j CRIU\nCOMMIT\n";

/// CRIU's last unlock script (`delete_criu_chain`): the chain is flushed by its declaration and
/// deleted.
pub const IPTABLES_DELETE_CHAIN: &str = "*filter\n:CRIU - [0:0]\n-X CRIU\nCOMMIT\n";

/// How many times at most the jumps to `CRIU` are deleted from one built-in chain (each lock
/// adds one; a dump and a killed restore leave two).
const MAX_JUMP_PASSES: usize = 8;

/// How long one tool may take (default 30 s; `NETPROBE_STEP_TIMEOUT_S` overrides it).
const TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// What [`unlock_here`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unlocked {
    /// CRIU's lock as the capture before showed it ([`criu_lock`]); empty: nothing to remove,
    /// nothing was run.
    pub found: Vec<String>,
    /// The commands run, in order, each with its stdin script when it had one.
    pub commands: Vec<String>,
}

impl Unlocked {
    /// One line for people: `none found`, or what was found and removed.
    pub fn summary(&self) -> String {
        if self.found.is_empty() {
            "none found (iptables-save, ip6tables-save, nft list ruleset)".into()
        } else {
            format!(
                "removed {} ({} commands, as CRIU's network_unlock); none left",
                self.found.join(", "),
                self.commands.len()
            )
        }
    }
}

/// Runs `program args` in the calling thread's netns as a bounded process tree, `input` on its
/// stdin; records it in `log`. Errors: it could not run, or exited non-zero (its stderr).
fn run(
    log: &mut Vec<String>,
    program: &str,
    args: &[&str],
    input: Option<&str>,
) -> Result<(), ToolError> {
    let shown = format!("{program} {}", args.join(" "));
    log.push(match input {
        Some(i) => format!("{shown} <<< {:?}", i),
        None => shown.clone(),
    });
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let limit = crate::proc::step_timeout(TOOL_TIMEOUT);
    let o = crate::proc::run_tree(&mut cmd, limit, input.map(str::as_bytes)).map_err(|source| {
        ToolError::Run {
            command: shown.clone(),
            source,
        }
    })?;
    if o.status.success() {
        Ok(())
    } else {
        Err(ToolError::Failed {
            command: shown,
            status: o.status,
            stderr: String::from_utf8_lossy(&o.stderr).trim().to_string(),
        })
    }
}

/// Whether `iptables -C CHAIN -j CRIU` (or ip6tables) finds a jump: a bounded run, true only on
/// exit 0.
fn has_jump(iptables: &str, chain: &str) -> bool {
    run(
        &mut Vec::new(),
        iptables,
        &["-w", "-C", chain, "-j", "CRIU"],
        None,
    )
    .is_ok()
}

/// CRIU's iptables unlock for one family (`iptables` or `ip6tables`), every jump removed.
fn unlock_iptables(family: &str, log: &mut Vec<String>) -> Result<(), ToolError> {
    let restore = format!("{family}-restore");
    // CRIU's first script fails as a whole when a jump is missing from one chain: then the
    // remaining jumps are deleted one by one below.
    let _ = run(
        log,
        &restore,
        &["-w", "--noflush"],
        Some(IPTABLES_DELETE_JUMPS),
    );
    for chain in ["INPUT", "OUTPUT"] {
        let mut passes = 0;
        while has_jump(family, chain) {
            passes += 1;
            if passes > MAX_JUMP_PASSES {
                return Err(ToolError::JumpsLeft {
                    family: family.to_string(),
                    chain,
                    passes: MAX_JUMP_PASSES,
                });
            }
            run(log, family, &["-w", "-D", chain, "-j", "CRIU"], None)?;
        }
    }
    run(
        log,
        &restore,
        &["-w", "--noflush"],
        Some(IPTABLES_DELETE_CHAIN),
    )
}

/// The `inet CRIU-…` tables of a capture (CRIU's nftables lock).
fn nft_lock_tables(s: &NetfilterState) -> Vec<String> {
    s.nftables
        .iter()
        .filter_map(|l| l.strip_prefix("table inet CRIU-"))
        .map(|rest| format!("CRIU-{}", rest.trim_end_matches(" {").trim()))
        .collect()
}

/// Removes CRIU's network lock from the calling thread's netns if a capture shows it: the
/// iptables method per family whose `*filter` has chain `CRIU` (see the module docs), and each
/// nftables table `inet CRIU-<id>`. Nothing is run when nothing is found.
///
/// Errors: the capture failed, a removal command failed (its stderr), or the capture after
/// still shows part of the lock (named; fail closed).
pub fn unlock_here() -> Result<Unlocked, UnlockError> {
    let (before, _) = capture_with_tools_here()?;
    let found = criu_lock(&before);
    let mut out = Unlocked {
        found,
        commands: Vec::new(),
    };
    if out.found.is_empty() {
        return Ok(out);
    }
    let mut problems = Vec::new();
    for family in ["iptables", "ip6tables"] {
        let prefix = format!("{family}: chain CRIU in table filter");
        if out.found.contains(&prefix)
            && let Err(e) = unlock_iptables(family, &mut out.commands)
        {
            problems.push(e);
        }
    }
    for t in nft_lock_tables(&before) {
        if let Err(e) = run(
            &mut out.commands,
            "nft",
            &["delete", "table", "inet", &t],
            None,
        ) {
            problems.push(e);
        }
    }
    let (after, _) = capture_with_tools_here()?;
    let left = criu_lock(&after);
    if left.is_empty() {
        return Ok(out);
    }
    Err(UnlockError::Left { left, problems })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_nft_lock_tables_and_summarises() {
        let s = NetfilterState {
            nftables: vec![
                "table inet CRIU-abc123 {".into(),
                "chain input {".into(),
                "}".into(),
                "table ip filter {".into(),
            ],
            ..Default::default()
        };
        assert_eq!(nft_lock_tables(&s), vec!["CRIU-abc123"]);
        assert!(Unlocked::default().summary().starts_with("none found"));
        let u = Unlocked {
            found: vec!["iptables: chain CRIU in table filter".into()],
            commands: vec!["a".into(), "b".into()],
        };
        assert_eq!(
            u.summary(),
            "removed iptables: chain CRIU in table filter (2 commands, as CRIU's network_unlock); none left"
        );
    }
}
