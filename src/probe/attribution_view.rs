//! Report data for issue 14, ready for the report templates: per rung, the three-way
//! attribution (before | image | after, differing cells marked, the step that lost each
//! fact) and what the images hold about the network. Rendering helpers give Markdown and an
//! HTML fragment; the report module (templates) decides where they go.

use std::fmt::Write;
use std::path::Path;

use super::attribution::{Attribution, AttributionError, LostAt, Row, from_rung_dir};
use crate::evidence::result::RungName;

/// One rung's section: the attribution and the images tree (text, `netprobe images` form).
#[derive(Debug)]
pub struct RungNetworkSection {
    /// The rung.
    pub rung: RungName,
    /// Recomputed from the rung folder (`Err` names the file that could not be read).
    pub attribution: Result<Attribution, AttributionError>,
    /// `netprobe images` tree of `<rung>/images/`, when the folder exists.
    pub images_tree: Option<Result<String, crate::images::ImageError>>,
}

/// The sections of the rungs of `evidence_dir` that have a `netstate-after.json` and an
/// `images/` folder or are runtime rungs (criu, oci, external-netns), in ladder order.
pub fn sections(evidence_dir: &Path) -> Vec<RungNetworkSection> {
    [RungName::Criu, RungName::Oci, RungName::ExternalNetns]
        .into_iter()
        .filter_map(|rung| {
            let dir = evidence_dir.join(rung.as_str());
            if !dir.join("netstate-after.json").is_file() {
                return None;
            }
            let images = dir.join("images");
            let images_tree = images.is_dir().then(|| {
                crate::images::read_dir(&images).map(|i| crate::images::tree::render(&i, false))
            });
            Some(RungNetworkSection {
                rung,
                attribution: from_rung_dir(&dir),
                images_tree,
            })
        })
        .collect()
}

/// Human name of a [`LostAt`].
pub fn lost_at_name(l: LostAt) -> &'static str {
    match l {
        LostAt::Dump => "dump (the image lacks it)",
        LostAt::Restore => "restore (the image has it, the namespace after does not)",
        LostAt::RuntimeChoice => "runtime's choice (no network image / external netns)",
        LostAt::NotCoveredByCriu => "not covered by CRIU (sysctl CRIU does not save)",
    }
}

fn cell(v: &Option<String>, mark: bool) -> String {
    let t = v.as_deref().unwrap_or("—").replace('|', "\\|");
    if mark { format!("**{t}**") } else { t }
}

/// Markdown: a one-line summary, then a table `kind | fact | before | image | after | lost
/// at`, cells that differ from `before` in bold. Says so when nothing changed.
pub fn render_markdown(rung: RungName, a: &Attribution) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "#### {rung}: before ↔ image ↔ after\n\nNetwork images: {}{}. Changed facts: {}{}.\n",
        if a.network_images { "yes" } else { "none" },
        if a.external_netns {
            " (netns external)"
        } else {
            ""
        },
        a.changed.len(),
        a.counts
            .iter()
            .map(|(k, n)| format!(", {k} {n}"))
            .collect::<String>()
    );
    if a.changed.is_empty() {
        let _ = writeln!(o, "Before and after are equal.");
        return o;
    }
    let _ = writeln!(o, "| kind | fact | before | image | after | lost at |");
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    for r in &a.changed {
        let _ = writeln!(o, "{}", md_row(r));
    }
    o
}

fn md_row(r: &Row) -> String {
    format!(
        "| {} | {} | {} | {} | {} | {} |",
        r.kind,
        r.key.replace('|', "\\|"),
        cell(&r.before, false),
        cell(&r.image, r.image != r.before),
        cell(&r.after, r.after != r.before),
        r.lost_at.map_or("appeared", lost_at_name)
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// HTML fragment (a `<table class="attribution">`): the same columns as
/// [`render_markdown`], differing cells with `class="differs"`; text escaped.
pub fn render_html(rung: RungName, a: &Attribution) -> String {
    let mut o = format!(
        "<h4>{}: before ↔ image ↔ after</h4>\n<table class=\"attribution\">\n<tr><th>kind</th><th>fact</th><th>before</th><th>image</th><th>after</th><th>lost at</th></tr>\n",
        esc(rung.as_str())
    );
    let td = |v: &Option<String>, mark: bool| {
        format!(
            "<td{}>{}</td>",
            if mark { " class=\"differs\"" } else { "" },
            esc(v.as_deref().unwrap_or("—"))
        )
    };
    for r in &a.changed {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td>{}{}{}<td>{}</td></tr>",
            esc(&r.kind),
            esc(&r.key),
            td(&r.before, false),
            td(&r.image, r.image != r.before),
            td(&r.after, r.after != r.before),
            esc(r.lost_at.map_or("appeared", lost_at_name))
        );
    }
    o.push_str("</table>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn renders_marked_cells() {
        let a = Attribution {
            network_images: true,
            external_netns: false,
            changed: vec![Row {
                kind: "route".into(),
                key: "inet table 100 10.216.0.0/24 oif 3".into(),
                before: Some("unicast proto boot scope link".into()),
                image: None,
                after: None,
                lost_at: Some(LostAt::Dump),
            }],
            counts: BTreeMap::from([("dump".to_string(), 1)]),
        };
        let md = render_markdown(RungName::Criu, &a);
        assert!(md.contains("| route | inet table 100 10.216.0.0/24 oif 3 | unicast proto boot scope link | **—** | **—** | dump (the image lacks it) |"), "{md}");
        let html = render_html(RungName::Criu, &a);
        assert!(html.contains("<td class=\"differs\">—</td>"), "{html}");
    }
}
