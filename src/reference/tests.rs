//! The checked-in reference text against the code, and every relative link of the docs.

use super::*;
use clap::CommandFactory;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The blocks of `docs/REFERENCE.md` and what the code renders for each.
fn rendered() -> Vec<(&'static str, String)> {
    vec![
        (GATES_BLOCK, gates_table()),
        (FLAGS_BLOCK, flags_reference(&crate::cli::Cli::command())),
    ]
}

#[test]
fn reference_tables_match_the_code() {
    let path = root().join("docs/REFERENCE.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    if std::env::var_os("NETPROBE_BLESS").is_some() {
        let mut new = doc.clone();
        for (name, body) in rendered() {
            new = replace_block(&new, name, &body).unwrap();
        }
        if new != doc {
            // Whole or not at all: the link test may read the file meanwhile.
            let tmp = path.with_extension("md.bless");
            std::fs::write(&tmp, new).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        }
        return;
    }
    for (name, body) in rendered() {
        let have = block_text(&doc, name).unwrap();
        assert!(
            have == body,
            "docs/REFERENCE.md: the generated block {name:?} differs from what the code renders; \
             regenerate it with `NETPROBE_BLESS=1 cargo test --lib reference` and commit the result.\n\
             --- rendered now ---\n{body}"
        );
    }
}

#[test]
fn every_gate_names_an_evaluator_that_exists() {
    for id in GateId::ALL {
        for at in id.evaluated_by().split(", ") {
            let (file, func) = at
                .split_once("::")
                .unwrap_or_else(|| panic!("{}: {at:?} is not FILE::FUNCTION", id.name()));
            let text = std::fs::read_to_string(root().join("src").join(file))
                .unwrap_or_else(|e| panic!("gate {}: src/{file}: {e}", id.name()));
            assert!(
                text.contains(&format!("fn {func}(")) || text.contains(&format!("fn {func}<")),
                "gate {}: src/{file} defines no `fn {func}`: update GateId::evaluated_by",
                id.name()
            );
        }
    }
}

#[test]
fn a_block_is_replaced_between_its_markers_only() {
    let doc = "a\n<!-- BEGIN GENERATED x (regenerate: …) -->\nold\n<!-- END GENERATED x -->\nb\n";
    let new = replace_block(doc, "x", "new\n").unwrap();
    assert_eq!(
        new,
        "a\n<!-- BEGIN GENERATED x (regenerate: …) -->\nnew\n<!-- END GENERATED x -->\nb\n"
    );
    assert_eq!(block_text(&new, "x").unwrap(), "new\n");
    assert!(matches!(
        replace_block(doc, "y", ""),
        Err(ReferenceError::MissingBlock { .. })
    ));
    assert!(
        block_text(
            "<!-- END GENERATED x -->\n<!-- BEGIN GENERATED x -->\n",
            "x"
        )
        .is_err()
    );
}

#[test]
fn the_gate_table_has_one_row_per_gate_with_escaped_cells() {
    let t = gates_table();
    assert_eq!(t.lines().count(), GateId::ALL.len() + 2);
    for line in t.lines().skip(2) {
        assert_eq!(line.matches(" | ").count(), 4, "{line}");
    }
    assert_eq!(cell("a | b\nc"), "a \\| b c");
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every heading anchor of a Markdown file (duplicates numbered as GitHub numbers them).
fn anchors(text: &str) -> HashSet<String> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let base = slug(line.trim_start_matches('#'));
        let mut a = base.clone();
        let mut n = 0;
        while seen.contains(&a) {
            n += 1;
            a = format!("{base}-{n}");
        }
        seen.insert(a);
    }
    seen
}

/// The targets of the inline links `[text](target)` outside code blocks and code spans.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop code spans: a link inside backticks is text, not a link.
        let plain: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_docs_resolves() {
    let mut files = vec![
        root().join("README.md"),
        root().join("benches/RESULTS.md"),
        root().join("deploy/ansible/README.md"),
    ];
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    let mut broken = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let dest: PathBuf = if path.is_empty() {
                f.clone()
            } else {
                f.parent().unwrap_or(Path::new(".")).join(path)
            };
            if !dest.exists() {
                broken.push(format!("{}: {target}: no such file", f.display()));
                continue;
            }
            if let Some(a) = anchor
                && dest.extension().is_some_and(|x| x == "md")
            {
                let there = std::fs::read_to_string(&dest).unwrap();
                if !anchors(&there).contains(a) {
                    broken.push(format!(
                        "{}: {target}: no heading with anchor #{a}",
                        f.display()
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn headings_get_githubs_anchors() {
    let a = anchors(
        "# A pin matrix in one command\n## `slot status`: phase\n```\n# not\n```\n## A pin matrix in one command\n",
    );
    assert!(a.contains("a-pin-matrix-in-one-command"));
    assert!(a.contains("slot-status-phase"));
    assert!(a.contains("a-pin-matrix-in-one-command-1"));
    assert!(!a.contains("not"));
    assert_eq!(
        link_targets("see [x](docs/GUIDE.md#a) and `[y](no)`\n```\n[z](no)\n```"),
        ["docs/GUIDE.md#a"]
    );
}
