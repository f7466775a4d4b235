//! The report templates (`templates/report.html`, `templates/report.md`, embedded at compile
//! time) and the minijinja environment that renders them.
//!
//! Auto-escaping is on for both: every `{{ value }}` in a `.html` template goes through
//! [`escape_html`], every one in a `.md` template through [`escape_md`], unless the template
//! marks it `|safe` (only done for text inside a Markdown code fence and for URL paths made of
//! `A-Za-z0-9-._~/%`). Links to evidence files go through the `inside` test and the `url_path`
//! filter ([`super::is_inside`], [`super::url_path`]), so a file name can neither escape the
//! evidence directory nor start a `javascript:` URL.

use minijinja::value::{Serde, Value};
use minijinja::{AutoEscape, Environment, Error, Output, State};
use std::sync::LazyLock;

/// Name of the Markdown auto-escape mode (a custom minijinja [`AutoEscape`]).
const MARKDOWN: &str = "markdown";

/// The HTML report template.
pub(crate) const HTML: &str = "report.html";
/// The Markdown report template.
pub(crate) const MD: &str = "report.md";
/// The HTML report of a matrix folder.
pub(crate) const MATRIX_HTML: &str = "matrix.html";
/// The Markdown report of a matrix folder.
pub(crate) const MATRIX_MD: &str = "matrix.md";
/// The HTML report of a slot's evidence.
pub(crate) const SLOT_HTML: &str = "slot.html";
/// The Markdown report of a slot's evidence.
pub(crate) const SLOT_MD: &str = "slot.md";
/// The HTML fleet table.
pub(crate) const FLEET_HTML: &str = "fleet.html";
/// The Markdown fleet table.
pub(crate) const FLEET_MD: &str = "fleet.md";

static ENV: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(true)
            .build()
            .expect("static syntax config"),
    );
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|name| {
        if name.ends_with(".html") {
            AutoEscape::Html
        } else if name.ends_with(".md") {
            AutoEscape::Custom(MARKDOWN.into())
        } else {
            AutoEscape::None
        }
    });
    env.set_formatter(format_value);
    env.add_filter("url_path", |s: &str| super::url_path(s));
    env.add_test("inside", |s: &str| super::is_inside(s));
    env.add_template(HTML, include_str!("../../templates/report.html"))
        .expect("templates/report.html parses");
    env.add_template(MD, include_str!("../../templates/report.md"))
        .expect("templates/report.md parses");
    env.add_template(MATRIX_HTML, include_str!("../../templates/matrix.html"))
        .expect("templates/matrix.html parses");
    env.add_template(MATRIX_MD, include_str!("../../templates/matrix.md"))
        .expect("templates/matrix.md parses");
    env.add_template(SLOT_HTML, include_str!("../../templates/slot.html"))
        .expect("templates/slot.html parses");
    env.add_template(SLOT_MD, include_str!("../../templates/slot.md"))
        .expect("templates/slot.md parses");
    env.add_template(FLEET_HTML, include_str!("../../templates/fleet.html"))
        .expect("templates/fleet.html parses");
    env.add_template(FLEET_MD, include_str!("../../templates/fleet.md"))
        .expect("templates/fleet.md parses");
    env
});

/// Writes `value` escaped for the template's auto-escape mode (HTML, Markdown or none); values
/// marked safe are written as they are.
fn format_value(out: &mut Output, state: &mut State, value: &Value) -> Result<(), Error> {
    let text = match value.as_str() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(value.to_string()),
    };
    let escaped = if value.is_safe() {
        text
    } else {
        match state.auto_escape() {
            AutoEscape::Html => escape_html(&text).into(),
            AutoEscape::Custom(name) if name == MARKDOWN => escape_md(&text).into(),
            _ => text,
        }
    };
    out.write_str(&escaped).map_err(Error::from)
}

/// Renders template `name` ([`HTML`] or [`MD`]) with `page`. Errors: only on a template bug (a
/// missing field), which the report tests catch.
pub(crate) fn render(name: &str, page: &super::view::Page) -> Result<String, Error> {
    ENV.get_template(name)?
        .render(minijinja::context! { page => Value::from(Serde(page)) })
}

/// Renders matrix template `name` ([`MATRIX_HTML`] or [`MATRIX_MD`]) with `page`. Errors: only
/// on a template bug (a missing field), which the report tests catch.
pub(crate) fn render_matrix(
    name: &str,
    page: &super::matrix_view::MatrixPage,
) -> Result<String, Error> {
    ENV.get_template(name)?
        .render(minijinja::context! { page => Value::from(Serde(page)) })
}

/// Renders slot template `name` ([`SLOT_HTML`] or [`SLOT_MD`]) with `page`. Errors: only on a
/// template bug (a missing field), which the report tests catch.
pub(crate) fn render_slot(name: &str, page: &super::slot_view::SlotPage) -> Result<String, Error> {
    ENV.get_template(name)?
        .render(minijinja::context! { page => Value::from(Serde(page)) })
}

/// Renders fleet template `name` ([`FLEET_HTML`] or [`FLEET_MD`]) with `page`
/// ([`crate::fleet::view::page`]) straight into `w`, row by row. Errors: a template bug (a
/// missing field), which the fleet tests catch, or writing `w` (kind `WriteFailure`, the I/O
/// error its source).
pub(crate) fn render_fleet_to(
    name: &str,
    page: Value,
    w: &mut dyn std::io::Write,
) -> Result<(), Error> {
    ENV.get_template(name)?
        .render_captured_to(minijinja::context! { page => page }, w)
        .map(drop)
}

/// Escapes `& < > " '` for HTML text and attribute values; control characters other than
/// newline and tab are dropped.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Escapes text for a Markdown table cell or paragraph: one line; `` \ ` * _ [ ] | # ~ ! `` are
/// backslash-escaped, `< > &` become entities (no raw HTML can pass through).
pub fn escape_md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => out.push(' '),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '#' | '~' | '!' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup() {
        assert_eq!(
            escape_html(r#"<script>"x"&'y'</script>"#),
            "&lt;script&gt;&quot;x&quot;&amp;&#39;y&#39;&lt;/script&gt;"
        );
        assert_eq!(escape_md("a|b_<i>"), r"a\|b\_&lt;i&gt;");
    }

    #[test]
    fn templates_parse() {
        assert!(ENV.get_template(HTML).is_ok());
        assert!(ENV.get_template(MD).is_ok());
        assert!(ENV.get_template(MATRIX_HTML).is_ok());
        assert!(ENV.get_template(MATRIX_MD).is_ok());
        assert!(ENV.get_template(SLOT_HTML).is_ok());
        assert!(ENV.get_template(SLOT_MD).is_ok());
    }
}
