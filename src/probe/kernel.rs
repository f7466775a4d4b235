//! The `kernel` rung: does the kernel answer CRIU's exact `RTM_GETLINK` dump in a fresh netns?
//!
//! A holder child of netprobe calls `unshare(CLONE_NEWNET)`; netprobe's calling thread enters
//! its netns (and switches back afterwards) and sends the 20-byte request CRIU's `dump_links()` sends
//! (criu/net.c, CRIU 4.x), decodes the replies as `dump_one_link()` does, records the request
//! and reply bytes, then brings `lo` up and dumps links and addresses again.
//! Files: `request.bin`, `reply-fresh.bin`, `links-fresh.json`, `reply-lo-up.bin`,
//! `links-lo-up.json`, `kernel.log` (CRIU's own line format), `netstate-before.json`,
//! `netstate-after.json`, `ip-addr.txt` (iproute2's view, for people).

use crate::evidence::result::RungName;
use crate::netlink::{self, LinkDump, NetState};
use crate::ns;
use crate::probe::rung::{RungCtx, RungError, RungOutput, at};
use crate::probe::util;

/// Runs the rung. Errors: `holder` when the fresh-netns child cannot start, `RTM_GETLINK` when
/// the dump fails (NLMSG_ERROR or socket error), `evidence` when a file cannot be written.
pub fn run(ctx: &RungCtx) -> Result<RungOutput, RungError> {
    let ev = ctx.evidence;
    let rel = |f: &str| format!("{}/{f}", RungName::Kernel.as_str());
    let mut out = RungOutput::default();

    let holder = ctx.holder(RungName::Kernel).map_err(at("holder"))?;
    let id = *holder.identity();
    out.fact("holder_pid", id.pid);
    out.fact("netns_inode", id.netns_inode);
    out.fact("own_netns_inode", ns::own_netns_inode().ok());

    type Probe = (LinkDump, NetState, LinkDump, NetState);
    let step = |what: &'static str| move |source| KernelStepError::Netlink { what, source };
    let res: Result<Probe, KernelStepError> = out.timed("dumps", || {
        ns::run_in_netns(
            &holder.netns_path(),
            || -> Result<Probe, KernelStepError> {
                let fresh =
                    netlink::dump_links_criu().map_err(step("RTM_GETLINK (fresh netns)"))?;
                let before = crate::netlink::capture().map_err(step("state capture"))?;
                let lo = netlink::link_index("lo").map_err(step("finding lo"))?;
                netlink::set_link_up(lo).map_err(step("bringing lo up"))?;
                let up = netlink::dump_links_criu().map_err(step("RTM_GETLINK (lo up)"))?;
                let after = crate::netlink::capture().map_err(step("state capture"))?;
                Ok((fresh, before, up, after))
            },
        )
        .map_err(KernelStepError::Enter)
        .and_then(|r| r)
    });
    let (fresh, before, up, after) = res.map_err(|e| RungError::new("RTM_GETLINK", e))?;
    let ip_text =
        util::ip_view(id.pid).unwrap_or_else(|e| format!("ip could not run in the netns: {e}\n"));

    let w = |f: &str, b: &[u8]| ev.write(&rel(f), b).map_err(at("evidence"));
    w("request.bin", &fresh.request)?;
    w("reply-fresh.bin", &fresh.reply)?;
    w("reply-lo-up.bin", &up.reply)?;
    ev.write_json(&rel("links-fresh.json"), &fresh.links)
        .map_err(at("evidence"))?;
    ev.write_json(&rel("links-lo-up.json"), &up.links)
        .map_err(at("evidence"))?;
    let mut log = String::new();
    log.push_str(&format!(
        "netprobe kernel rung: CRIU-exact RTM_GETLINK dump ({} request bytes, seq {}, AF_PACKET, flags 0x301) in a fresh netns\n",
        fresh.request.len(),
        netlink::CRIU_LINK_DUMP_SEQ
    ));
    for (label, d) in [("fresh netns", &fresh), ("after lo up", &up)] {
        log.push_str(&format!(
            "Dump NET namespace info {} via {} ({label})\n",
            id.netns_inode, id.pid
        ));
        for l in &d.links {
            log.push_str(&l.criu_log_line());
            log.push('\n');
        }
    }
    w("kernel.log", log.as_bytes())?;
    w("ip-addr.txt", ip_text.as_bytes())?;
    w(
        "netstate-before.json",
        before.to_canonical_json().as_bytes(),
    )?;
    w("netstate-after.json", after.to_canonical_json().as_bytes())?;
    holder.stop().map_err(at("holder stop"))?;

    out.fact("links_fresh", fresh.links.len());
    out.fact("reply_bytes_fresh", fresh.reply.len());
    out.fact("lo_up_with_127_after", after.lo_up_with_127());
    out.summary = summary(&fresh.links, after.lo_up_with_127());
    Ok(out)
}

/// The rung's deciding fact from the links of the fresh-netns dump (`links-fresh.json`) and
/// whether `lo` is UP with 127.0.0.1/8 after bring-up (`netstate-after.json`), e.g.
/// `RTM_GETLINK answered: 1 link(s), lo type 772; after bring-up lo UP with 127.0.0.1/8: true`.
/// Pure: `verify` rebuilds it from the files.
pub fn summary(fresh: &[netlink::CriuLink], lo_up_after: bool) -> String {
    let lo_type = fresh.iter().find(|l| l.name == "lo").map(|l| l.link_type);
    format!(
        "RTM_GETLINK answered: {} link(s), lo type {}; after bring-up lo UP with 127.0.0.1/8: {}",
        fresh.len(),
        lo_type
            .map(|t| t.to_string())
            .unwrap_or_else(|| "missing".into()),
        lo_up_after
    )
}

/// Why the kernel rung's dumps inside the holder's netns failed.
#[derive(Debug, thiserror::Error)]
enum KernelStepError {
    /// The holder's netns could not be entered.
    #[error(transparent)]
    Enter(ns::NsError),
    /// A netlink step failed.
    #[error("{what}: {source}")]
    Netlink {
        /// The step, e.g. `RTM_GETLINK (fresh netns)`.
        what: &'static str,
        /// The netlink error.
        #[source]
        source: crate::netlink::NetlinkError,
    },
}
