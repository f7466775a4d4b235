//! The generated tables of `docs/REFERENCE.md`: the slot gates from [`GateId`] (name, exit
//! class, the fact each must prove, the verbs that require it and the function that evaluates
//! it) and the command-line flags from clap's [`clap::Command`] of the `netprobe` binary.
//!
//! Each table sits between two marker comments in `docs/REFERENCE.md`
//! (`<!-- BEGIN GENERATED NAME … -->` and `<!-- END GENERATED NAME -->`). The unit tests of this
//! module render the tables and compare them with the text between the markers;
//! `NETPROBE_BLESS=1 cargo test --lib reference` rewrites the blocks instead.

use crate::slot::{GateClass, GateId, Verb};
use std::fmt::Write as _;

/// The name of the gate table's block in `docs/REFERENCE.md`.
pub const GATES_BLOCK: &str = "gates";
/// The name of the flag tables' block in `docs/REFERENCE.md`.
pub const FLAGS_BLOCK: &str = "flags";

/// Why a generated block could not be put into a document.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReferenceError {
    /// The document has no begin marker, no end marker, or they are out of order.
    #[error(
        "the document has no block {name:?}: it needs a line starting with \"<!-- BEGIN GENERATED {name}\" and, below it, \"<!-- END GENERATED {name} -->\""
    )]
    MissingBlock {
        /// The block's name, e.g. `gates`.
        name: String,
    },
}

/// Escapes a text for one Markdown table cell: `|` escaped, line breaks joined by a space.
fn cell(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The verbs whose [`GateId::required_before`] list holds `id`, e.g. `snapshot, restore`.
fn required_by(id: GateId) -> String {
    let verbs: Vec<&str> = Verb::ALL
        .iter()
        .filter(|v| GateId::required_before(**v).contains(&id))
        .map(|v| v.as_str())
        .collect();
    if verbs.is_empty() {
        "–".to_string()
    } else {
        verbs.join(", ")
    }
}

/// The gate table: one row per [`GateId`] in declaration order, columns gate name, exit class
/// on failure (`gate` exit 1, `host` exit 3), required before the first destructive step of
/// which verbs, the fact, and the function(s) that evaluate it (`src/` paths).
pub fn gates_table() -> String {
    let mut out = String::from(
        "| gate | fails with | required before | fact it must prove | evaluated by (`src/`) |\n|---|---|---|---|---|\n",
    );
    for id in GateId::ALL {
        let class = match id.class() {
            GateClass::Gate => "gate (exit 1)",
            GateClass::Host => "host (exit 3)",
        };
        let by: Vec<String> = id
            .evaluated_by()
            .split(", ")
            .map(|p| format!("`{p}`"))
            .collect();
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} |",
            id.name(),
            class,
            required_by(*id),
            cell(id.fact()),
            by.join(", ")
        );
    }
    out
}

/// How one argument is written on the command line: `--name` (with `-s`), or `NAME` for a
/// positional.
fn arg_spelling(a: &clap::Arg) -> String {
    match (a.get_long(), a.get_short()) {
        (Some(l), Some(s)) => format!("`-{s}`, `--{l}`"),
        (Some(l), None) => format!("`--{l}`"),
        (None, Some(s)) => format!("`-{s}`"),
        (None, None) => format!("`{}`", a.get_id().as_str().to_uppercase()),
    }
}

/// The value an argument takes: its possible values, its value name, or `–` for a switch.
fn arg_value(a: &clap::Arg) -> String {
    if !a.get_num_args().is_some_and(|n| n.takes_values()) {
        return "–".to_string();
    }
    let possible: Vec<String> = a
        .get_possible_values()
        .iter()
        .filter(|p| !p.is_hide_set())
        .map(|p| p.get_name().to_string())
        .collect();
    if !possible.is_empty() {
        return cell(&possible.join(" | "));
    }
    match a.get_value_names() {
        Some(names) if !names.is_empty() => cell(
            &names
                .iter()
                .map(|n| n.as_str().to_string())
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => a.get_id().as_str().to_uppercase(),
    }
}

/// An argument's default (`–` when it has none), with `repeatable` for an appending flag.
fn arg_default(a: &clap::Arg) -> String {
    if matches!(a.get_action(), clap::ArgAction::SetTrue) {
        return "–".to_string();
    }
    let defaults: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect();
    let mut s = if defaults.is_empty() {
        "–".to_string()
    } else {
        format!("`{}`", defaults.join(","))
    };
    if matches!(a.get_action(), clap::ArgAction::Append) {
        s.push_str("; repeatable");
    }
    if a.is_required_set() {
        s = "required".to_string();
    }
    s
}

/// Appends the section of one command (and of its visible subcommands, depth first).
fn command_section(out: &mut String, path: &str, cmd: &clap::Command) {
    let about = cmd
        .get_long_about()
        .or(cmd.get_about())
        .map(|s| s.to_string())
        .unwrap_or_default();
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    let subs: Vec<&clap::Command> = cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    if !path.contains(' ') || !args.is_empty() || subs.is_empty() {
        let _ = writeln!(out, "### `{path}`\n");
        if !about.is_empty() {
            let _ = writeln!(out, "{}\n", cell(&about));
        }
    }
    if !args.is_empty() {
        out.push_str("| argument | value | default | meaning |\n|---|---|---|---|\n");
        for a in &args {
            let help = a
                .get_long_help()
                .or(a.get_help())
                .map(|s| s.to_string())
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                arg_spelling(a),
                arg_value(a),
                arg_default(a),
                cell(&help)
            );
        }
        out.push('\n');
    }
    for s in subs {
        command_section(out, &format!("{path} {}", s.get_name()), s);
    }
}

/// The flag tables: for the command and each visible subcommand (depth first), a heading
/// `### \`netprobe SUB\``, its help line and a table of its visible arguments (spelling,
/// value, default, help). `--help`/`--version` and hidden arguments are left out.
pub fn flags_reference(cmd: &clap::Command) -> String {
    // Built, clap fills in what derive leaves implicit (how many values each argument takes).
    let mut cmd = cmd.clone();
    cmd.build();
    let cmd = &cmd;
    let mut out = String::new();
    for s in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        command_section(&mut out, &format!("{} {}", cmd.get_name(), s.get_name()), s);
    }
    out.trim_end().to_string() + "\n"
}

/// Replaces the text between the markers of block `name` in `doc` with `body`; the marker
/// lines themselves are kept.
///
/// Errors: [`ReferenceError::MissingBlock`] when either marker is missing or they are out of
/// order.
pub fn replace_block(doc: &str, name: &str, body: &str) -> Result<String, ReferenceError> {
    let (start, end) = block_span(doc, name)?;
    Ok(format!("{}{}{}", &doc[..start], body, &doc[end..]))
}

/// The text between the markers of block `name` in `doc`.
///
/// Errors: [`ReferenceError::MissingBlock`] as for [`replace_block`].
pub fn block_text<'a>(doc: &'a str, name: &str) -> Result<&'a str, ReferenceError> {
    let (start, end) = block_span(doc, name)?;
    Ok(&doc[start..end])
}

/// Byte offsets of the block's body: after the begin marker's line, up to the end marker.
fn block_span(doc: &str, name: &str) -> Result<(usize, usize), ReferenceError> {
    let missing = || ReferenceError::MissingBlock {
        name: name.to_string(),
    };
    let begin = format!("<!-- BEGIN GENERATED {name} ");
    let end = format!("<!-- END GENERATED {name} -->");
    let b = doc.find(&begin).ok_or_else(missing)?;
    let body = b + doc[b..].find('\n').ok_or_else(missing)? + 1;
    let e = body + doc[body..].find(&end).ok_or_else(missing)?;
    Ok((body, e))
}

#[cfg(test)]
mod tests;
