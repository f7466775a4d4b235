//! The Markdown report (`netprobe report DIR --format md`): fit to paste into an issue or PR,
//! rendered from `templates/report.md`. All text from the result or the evidence is escaped by
//! the template engine on output (`super::template::escape_md`): it can neither break a table
//! nor inject HTML; artifact links are relative to the evidence directory and percent-encoded.

use super::template;
use super::view::Page;
use crate::evidence::result::RunResult;
use std::path::Path;

/// Renders the run as GitHub-flavoured Markdown: verdict, ladder table, host and binaries with
/// pin match, each rung's assertions (expected vs observed), the network-state diff of each rung
/// that recorded one (read from `evidence_dir/<rung>/netstate-{before,after}.json`), timings,
/// declared differences and relative links to every artifact. Every number names its source
/// (`netprobe-result.json` or an artifact path). Never fails: unreadable netstate files are
/// reported in the text (and a template failure, which the tests rule out, is too).
pub fn render_markdown(result: &RunResult, evidence_dir: &Path) -> String {
    render_page(&Page::new(result, evidence_dir))
}

/// Renders a built page (e.g. one carrying what `netprobe verify` found, shown under the
/// verdict). Never fails, as [`render_markdown`].
pub(crate) fn render_page(page: &Page) -> String {
    template::render(template::MD, page).unwrap_or_else(|e| {
        format!(
            "netprobe: the report template failed: {}\n",
            template::escape_md(&e.to_string())
        )
    })
}
