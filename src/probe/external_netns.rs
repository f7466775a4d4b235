//! The `external-netns` rung: the documented workaround. A holder process (netprobe re-executed
//! in its hidden `holder` mode) owns the network namespace; `config.json` names it by path
//! (`/proc/<holder>/ns/net`), so runc passes `--external net[<inode>]:extRootNetNS` at
//! checkpoint and an inherit-fd with that key at restore. The holder's identity (pid, start
//! time, netns inode) is proven before `holder.json` is written and re-verified before every
//! later step; it is stopped through a pidfd after the container is proven gone (its Drop does
//! so on failure and panic too).

use crate::evidence::result::RungName;
use crate::oci::NetnsSpec;
use crate::probe::rung::{RungCtx, RungError, RungOutput, at};
use crate::probe::runtime_cycle::run_cycle;

/// Runs the rung. Errors: `holder` (could not start, or its identity changed: fail closed),
/// `evidence`, and those of [`run_cycle`].
pub fn run(ctx: &RungCtx) -> Result<RungOutput, RungError> {
    let mut out = RungOutput::default();
    let holder = ctx.holder(RungName::ExternalNetns).map_err(at("holder"))?;
    let id = *holder.identity();
    let holder_json = serde_json::json!({
        "schema_version": 1,
        "pid": id.pid,
        "start_time": id.start_time,
        "netns_inode": id.netns_inode,
        "netns_path": holder.netns_path().display().to_string(),
        "exe": ctx.exe.display().to_string(),
        "created_at": crate::evidence::now_rfc3339(),
    });
    crate::evidence::validate_holder(&holder_json)
        .map_err(|e| RungError::new("holder.json", e.join("; ")))?;
    ctx.evidence
        .write_json(
            &format!("{}/holder.json", RungName::ExternalNetns.as_str()),
            &holder_json,
        )
        .map_err(at("evidence"))?;
    out.fact("holder_pid", id.pid);
    out.fact("holder_start_time", id.start_time);
    out.fact("holder_netns_inode", id.netns_inode);
    // Beside the restored container init's (`netns-inode-restored.txt`, written by the cycle):
    // `netns-inode-equal` in probes/external-netns.toml asserts the two files equal.
    ctx.evidence
        .write(
            &format!(
                "{}/netns-inode-holder.txt",
                RungName::ExternalNetns.as_str()
            ),
            format!("{}\n", id.netns_inode).as_bytes(),
        )
        .map_err(at("evidence"))?;

    let reverify = || holder.verify();
    let res = run_cycle(
        ctx,
        RungName::ExternalNetns,
        NetnsSpec::Path(holder.netns_path()),
        &reverify,
        &mut out,
    );
    // The container is proven gone (or never existed) here; stop the holder through its pidfd.
    let stop = holder.stop();
    let states = match res {
        Ok(s) => s,
        Err(e) => return Err(e.with(out)),
    };
    stop.map_err(at("holder stop"))?;
    let restored = out
        .facts
        .get("container_netns_inode_after")
        .and_then(|v| v.as_u64());
    out.summary = summary(
        restored,
        id.netns_inode,
        states.after.lo_up_with_127(),
        states.before.to_canonical_json() == states.after.to_canonical_json(),
    );
    Ok(out)
}

/// The rung's deciding fact from the restored init's netns inode (`netns-inode-restored.txt`;
/// `None` when unknown), the holder's (`netns-inode-holder.txt`), whether `lo` is UP with
/// 127.0.0.1/8 after restore and whether the states are byte-equal (`netstate-*.json`).
/// Pure: `verify` rebuilds it from the files.
pub fn summary(
    restored: Option<u64>,
    holder: u64,
    lo_up_after: bool,
    state_byte_equal: bool,
) -> String {
    format!(
        "restored init's netns inode {} vs the holder's {holder} ({}); lo UP with 127.0.0.1/8 after restore: {lo_up_after}, state byte-equal: {state_byte_equal}",
        restored.map_or("unknown".into(), |i| i.to_string()),
        if restored == Some(holder) {
            "equal"
        } else {
            "DIFFERENT"
        },
    )
}
