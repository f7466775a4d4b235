//! The `oci` rung: does the OCI runtime keep the container's private network namespace through
//! checkpoint/restore? On runc the expected answer is no (runc passes `empty_ns = CLONE_NEWNET`
//! to CRIU: no `netns-*.img`, `No netns-<id>.img image` at restore, `lo` DOWN after restore).
//! The cycle and its files: [`crate::probe::runtime_cycle`].

use crate::evidence::result::RungName;
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
    let lo = |s: &crate::netlink::NetState| match s.lo() {
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
    out.summary = format!(
        "before checkpoint {}; after restore {}; {} netns image(s)",
        lo(&states.before),
        lo(&states.after),
        states.netns_images
    );
    Ok(out)
}
