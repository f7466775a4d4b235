//! The HTML report (`netprobe report DIR --format html`): one self-contained page (inline CSS,
//! inline SVG, no script, no external asset), rendered from `templates/report.html`. All text
//! from the result or the evidence is HTML-escaped by the template engine on output
//! (`super::template`); links are relative, percent-encoded and only to paths inside the
//! evidence directory, so log content or file names cannot inject markup or script.

use super::template;
use super::view::Page;
use crate::evidence::result::RunResult;
use std::path::Path;

/// Escapes `& < > " '` for HTML text and attribute values; control characters other than
/// newline and tab are dropped. The escaper the HTML template applies to every value.
pub fn escape(s: &str) -> String {
    template::escape_html(s)
}

/// Renders the run as one self-contained HTML page: an inline SVG of the ladder (one box per
/// rung coloured by outcome — pass green, fail red, error orange, skipped grey — under the
/// verdict), then host and binaries with pin match, each rung's assertions (expected vs observed),
/// the network state before/after of each rung that recorded it (from
/// `evidence_dir/<rung>/netstate-{before,after}.json`, differing lines highlighted), timings,
/// declared differences and relative links to every artifact. Never fails (the template is
/// checked by the tests; should it ever fail, the page says so).
pub fn render_html(result: &RunResult, evidence_dir: &Path) -> String {
    render_page(&Page::new(result, evidence_dir))
}

/// Renders a built page (e.g. one carrying what `netprobe verify` found, shown under the
/// verdict). Never fails, as [`render_html`].
pub(crate) fn render_page(page: &Page) -> String {
    template::render(template::HTML, page).unwrap_or_else(|e| {
        format!(
            "<!DOCTYPE html><html><body><p>netprobe: the report template failed: {}</p></body></html>\n",
            escape(&e.to_string())
        )
    })
}
