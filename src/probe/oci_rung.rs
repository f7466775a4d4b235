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
    let lo = |s: &crate::netlink::NetState| {
        if s.lo_up_with_127() {
            "lo UP with 127.0.0.1/8"
        } else {
            "lo DOWN or without 127.0.0.1/8"
        }
    };
    out.summary = format!(
        "before checkpoint: {}; after restore: {}; {} image files",
        lo(&states.before),
        lo(&states.after),
        states.image_files
    );
    Ok(out)
}
