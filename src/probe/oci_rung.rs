//! The `oci` rung: does the OCI runtime keep the container's private network namespace through
//! checkpoint/restore? On runc the expected answer is no (runc passes `empty_ns = CLONE_NEWNET`
//! to CRIU: no `netns-*.img`, `No netns-<id>.img image` at restore, `lo` DOWN after restore).
//! The cycle and its files: [`crate::probe::runtime_cycle`].

use crate::evidence::result::RungName;
use crate::netlink::NetState;
use crate::oci::NetnsSpec;
use crate::probe::rung::{RungCtx, RungError, RungOutput};
use crate::probe::runtime_cycle::run_cycle;

/// Runs the rung. Errors: see [`run_cycle`].
pub fn run(ctx: &RungCtx) -> Result<RungOutput, RungError> {
    let mut out = RungOutput::default();
    let states = match run_cycle(ctx, RungName::Oci, NetnsSpec::Private, &|| Ok(()), &mut out) {
        Ok(s) => s,
        Err(e) => return Err(e.with(out)),
    };
    out.summary = summary(&states.before, &states.after, states.netns_images);
    Ok(out)
}

/// The rung's deciding fact from the states before checkpoint and after restore
/// (`netstate-*.json`) and the number of `netns-*` images (`images.json`), e.g. `before
/// checkpoint lo UP with 2 address(es); after restore lo DOWN with 0 address(es); 0 netns
/// image(s)`. Pure: `verify` rebuilds it from the files.
pub fn summary(before: &NetState, after: &NetState, netns_images: usize) -> String {
    let lo = |s: &NetState| match s.lo() {
        None => "no lo".to_string(),
        Some(l) => {
            let addrs = s
                .addresses
                .iter()
                .filter(|a| a.ifindex == l.ifindex)
                .count();
            format!(
                "lo {} with {} address(es)",
                if l.up { "UP" } else { "DOWN" },
                addrs
            )
        }
    };
    format!(
        "before checkpoint {}; after restore {}; {netns_images} netns image(s)",
        lo(before),
        lo(after)
    )
}
