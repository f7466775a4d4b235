//! The Markdown report (`netprobe report DIR --format md`): fit to paste into an issue or PR,
//! rendered from `templates/report.md`. All text from the result or the evidence is escaped by
//! the template engine on output (`super::template::escape_md`): it can neither break a table
//! nor inject HTML; artifact links are relative to the evidence directory and percent-encoded.

use super::template;
use super::view::{Page, Verification};
use crate::evidence::result::{RunResult, VerifyOutcome};
use std::path::Path;

/// Renders the run as GitHub-flavoured Markdown: verdict, ladder table, host and binaries with
/// pin match, each rung's assertions (expected vs observed), the network-state diff of each rung
/// that recorded one (read from `evidence_dir/<rung>/netstate-{before,after}.json`), timings,
/// declared differences and relative links to every artifact. Every number names its source
/// (`netprobe-result.json` or an artifact path). Never fails: unreadable netstate files are
/// reported in the text (and a template failure, which the tests rule out, is too).
pub fn render_markdown(result: &RunResult, evidence_dir: &Path) -> String {
    render_markdown_verified(result, evidence_dir, None)
}

/// [`render_markdown`] with what `netprobe verify` found at render time (`Some(Ok)`: its outcome;
/// `Some(Err)`: why it could not run), shown under the verdict: reproduced with its counts, or
/// NOT VERIFIED with every mismatch.
pub fn render_markdown_verified(
    result: &RunResult,
    evidence_dir: &Path,
    verify: Option<Result<&VerifyOutcome, String>>,
) -> String {
    let mut page = Page::new(result, evidence_dir);
    page.verification = verify.map(Verification::of);
    template::render(template::MD, &page).unwrap_or_else(|e| {
        format!(
            "netprobe: the report template failed: {}\n",
            template::escape_md(&e.to_string())
        )
    })
}
