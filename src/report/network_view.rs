//! The report's per-rung network section (issue 14 part 5): the three-way attribution
//! (live before ↔ images ↔ live after, the differing entries marked, the step that lost each
//! fact) and the decoded images tree (`netprobe images`), for the criu and runtime rungs.
//! Plain text only: the templates escape it on output. Source:
//! [`crate::probe::attribution_view::sections`] (recomputed from the rung folder).

use crate::probe::attribution_view::{RungNetworkSection, lost_at_name, sections};
use serde::Serialize;
use std::path::Path;

/// One rung's network section as the templates see it.
#[derive(Debug, Serialize)]
pub(crate) struct Network {
    /// Rung folder name (`criu`, `oci`, `external-netns`).
    pub rung: &'static str,
    /// The attribution could not be computed: the file and the reason.
    pub error: Option<String>,
    /// CRIU wrote at least one network image.
    pub network_images: bool,
    /// The netns entry carries an external key.
    pub external_netns: bool,
    /// Changed facts per step that lost them (`dump`, `restore`, …), as `name count`.
    pub counts: Vec<(String, usize)>,
    /// Facts whose three columns do not all agree, sorted by kind and key.
    pub rows: Vec<AttrRow>,
    /// `<rung>/images` relative to the evidence directory (the tree's source).
    pub images_dir: String,
    /// The `netprobe images` tree of `<rung>/images`, when that folder exists and decodes.
    pub images_tree: Option<String>,
    /// The images folder exists but does not decode: the file, offset and reason.
    pub images_error: Option<String>,
    /// A Markdown code fence longer than any backtick run in the tree.
    pub fence: String,
}

/// One fact in three columns; `—` stands for "absent".
#[derive(Debug, Serialize)]
pub(crate) struct AttrRow {
    /// `link`, `address`, `route`, `rule`, `sysctl`, `iptables`, …
    pub kind: String,
    /// The fact's identity, e.g. `inet table 100 10.216.0.0/24 oif 3`.
    pub key: String,
    /// Live state before the dump.
    pub before: String,
    /// What the images hold.
    pub image: String,
    /// Live state after the restore.
    pub after: String,
    /// The image column differs from `before` (marked).
    pub image_differs: bool,
    /// The after column differs from `before` (marked).
    pub after_differs: bool,
    /// Which step lost it (human name), or `appeared`.
    pub lost_at: &'static str,
}

fn text(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "—".to_string())
}

fn network(s: RungNetworkSection) -> Network {
    let rung = s.rung.as_str();
    let (images_tree, images_error) = match s.images_tree {
        Some(Ok(t)) => (Some(t), None),
        Some(Err(e)) => (None, Some(e.to_string())),
        None => (None, None),
    };
    let longest = images_tree
        .iter()
        .flat_map(|t| t.split(|c| c != '`'))
        .map(str::len)
        .max()
        .unwrap_or(0);
    let mut n = Network {
        rung,
        error: None,
        network_images: false,
        external_netns: false,
        counts: vec![],
        rows: vec![],
        images_dir: format!("{rung}/images"),
        images_tree,
        images_error,
        fence: "`".repeat(longest.max(2) + 1),
    };
    match s.attribution {
        Err(e) => n.error = Some(e.to_string()),
        Ok(a) => {
            n.network_images = a.network_images;
            n.external_netns = a.external_netns;
            n.counts = a.counts.into_iter().collect();
            n.rows = a
                .changed
                .iter()
                .map(|r| AttrRow {
                    kind: r.kind.clone(),
                    key: r.key.clone(),
                    before: text(&r.before),
                    image: text(&r.image),
                    after: text(&r.after),
                    image_differs: r.image != r.before,
                    after_differs: r.after != r.before,
                    lost_at: r.lost_at.map_or("appeared", lost_at_name),
                })
                .collect();
        }
    }
    n
}

/// The network sections of `evidence_dir`'s criu and runtime rungs (those that recorded a
/// `netstate-after.json`), in ladder order. Never fails: unreadable files become `error` /
/// `images_error` in the section.
pub(crate) fn networks(evidence_dir: &Path) -> Vec<Network> {
    sections(evidence_dir).into_iter().map(network).collect()
}
