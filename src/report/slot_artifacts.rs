//! A slot verb's evidence folder against the `artifacts` its `verb.json` lists (path relative
//! to the folder, bytes, sha256 of every file the verb wrote before `verb.json`, as a run's
//! result lists its artifacts): each file hashed again, and a file stored compressed
//! (`….zst`) decoded and its content's sha256 and size compared too. With `verb.json`'s own sha256 in the
//! slot's journal ([`super::slot_view`]), the chain journal → `verb.json` → every file holds:
//! a file changed, missing or added after the verb wrote `verb.json` is a MISMATCH.
//!
//! The folder is listed and hashed by [`crate::evidence::EvidenceDir::inventory_except`], the
//! listing the verb made its list with, leaving out the same files
//! ([`crate::evidence::enclosing::SLOT_VERB_UNLISTED`]: `verb.json`, notes written after it,
//! derived reports); a listed path is never opened by itself, so a name in `verb.json` that
//! leaves the folder reads nothing. A directory holding no file, which no list of files can
//! name, is a MISMATCH unless a verb makes it ([`crate::evidence::empty_dirs`]).

use crate::evidence::EvidenceDir;
use crate::evidence::enclosing::SLOT_VERB_UNLISTED;
use crate::evidence::result::Artifact;
use serde::Serialize;
use std::path::Path;

/// How a verb folder's files compare with the artifacts its `verb.json` lists.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ArtifactCheck {
    /// `matches`, `DIFFERS` or `unchecked`.
    pub state: &'static str,
    /// The sentence the report shows.
    pub detail: String,
    /// One line per file that changed, is missing, or is in the folder but not listed.
    pub mismatches: Vec<String>,
}

/// The first 12 characters of a sha256, for people.
fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

/// True when the slot verb whose folder is `verb_dir` (`NNNN-<verb>`) may leave the directory
/// `rel` of it without any file in it ([`crate::evidence::empty_dirs`]): `criu-work/`, the
/// runtime's work path a snapshot, restore or reset creates before it runs, and CRIU's cgroup
/// yard in it. No other verb makes one (a folder of another name: none).
fn made_by_verb(verb_dir: &Path, rel: &str) -> bool {
    let runs_criu = verb_dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split_once('-'))
        .is_some_and(|(_, verb)| matches!(verb, "snapshot" | "restore" | "reset"));
    runs_criu
        && (rel == "criu-work"
            || rel
                .strip_prefix("criu-work/")
                .is_some_and(crate::evidence::empty_dirs::is_criu_cgroup_yard))
}

/// The line for a listed file whose stored bytes match but whose decoded content does not
/// (`on_disk`: what the stored file decodes to, `None` when it does not decode).
fn content_mismatch(a: &Artifact, on_disk: Option<&crate::evidence::result::Content>) -> String {
    // What the stored file is, in the three sentences: a reference's target, or a zstd stream.
    let is_ref = crate::evidence::reference::is_reference(&a.path);
    let (now, unreadable, unlisted) = if is_ref {
        (
            "refers to a file with sha256",
            "the file it refers to cannot be read (removed outside netprobe?)",
            "kept by reference",
        )
    } else {
        (
            "decodes to sha256",
            "does not decode as zstd",
            "stored compressed",
        )
    };
    let (when, changed) = match is_ref {
        true => (" now", ": the referenced file was changed"),
        false => ("", ""),
    };
    match (&a.content, on_disk) {
        (Some(want), Some(got)) => format!(
            "{}: {now} {}… ({} bytes){when}, not the {}… ({} bytes) verb.json lists{changed}",
            a.path,
            short(&got.sha256),
            got.bytes,
            short(&want.sha256),
            want.bytes
        ),
        (Some(want), None) => format!(
            "{}: {unreadable}, but verb.json lists its content ({}…, {} bytes)",
            a.path,
            short(&want.sha256),
            want.bytes
        ),
        (None, _) => format!(
            "{}: {unlisted}, but verb.json lists no content for it",
            a.path
        ),
    }
}

/// The files `verb_dir`'s `incomplete.txt` names as not written (`not written: FILE (why)`
/// lines, as the verb's end writes them); none without the note.
fn not_written_by_note(verb_dir: &Path) -> Vec<String> {
    let note = verb_dir.join(crate::evidence::dir::INCOMPLETE_FILE);
    std::fs::read_to_string(note)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| crate::evidence::dir::not_written_file(l).map(str::to_string))
        .collect()
}

/// The files of `verb_dir` against `listed` (`verb.json`'s `artifacts`; `None`: it lists
/// none — an interrupted verb's, or one written before netprobe listed them — so nothing is
/// checked).
pub(crate) fn check(verb_dir: &Path, listed: Option<&[Artifact]>) -> ArtifactCheck {
    let Some(listed) = listed else {
        return ArtifactCheck {
            state: "unchecked",
            detail: "verb.json lists no artifacts (an interrupted verb's, or one written before netprobe listed them): the folder's other files are not checked".into(),
            mismatches: Vec::new(),
        };
    };
    let on_disk =
        match EvidenceDir::open(verb_dir).and_then(|d| d.inventory_except(&SLOT_VERB_UNLISTED)) {
            Ok(files) => files,
            Err(e) => {
                return ArtifactCheck {
                    state: "DIFFERS",
                    detail: format!(
                        "the folder cannot be listed to check the {} file(s) verb.json lists: {e}",
                        listed.len()
                    ),
                    mismatches: vec![format!(
                        "the folder cannot be listed to check the files verb.json lists: {e}"
                    )],
                };
            }
        };
    let mut mismatches = Vec::new();
    for a in listed {
        match on_disk.iter().find(|f| f.path == a.path) {
            Some(f) if f.sha256 == a.sha256 && f.bytes == a.bytes && f.content == a.content => {}
            Some(f) if f.sha256 == a.sha256 && f.bytes == a.bytes => {
                mismatches.push(content_mismatch(a, f.content.as_ref()))
            }
            Some(f) => mismatches.push(format!(
                "{}: sha256 {}… ({} bytes) is not the {}… ({} bytes) verb.json lists: the file was changed after the verb wrote it",
                a.path,
                short(&f.sha256),
                f.bytes,
                short(&a.sha256),
                a.bytes
            )),
            None => mismatches.push(format!(
                "{}: listed in verb.json ({}…, {} bytes) but not in the folder: removed after the verb wrote it",
                a.path,
                short(&a.sha256),
                a.bytes
            )),
        }
    }
    for f in &on_disk {
        if !listed.iter().any(|a| a.path == f.path) {
            mismatches.push(format!(
                "{}: in the folder but not among the artifacts verb.json lists: added after the verb wrote it",
                f.path
            ));
        }
    }
    // `artifacts` names files only: a directory holding none is checked apart. One standing
    // where the verb's `incomplete.txt` says a file of that name could not be written is what
    // that note explains (the write found it there), not an addition.
    let not_written = not_written_by_note(verb_dir);
    let made = |rel: &str| made_by_verb(verb_dir, rel) || not_written.iter().any(|f| f == rel);
    match crate::evidence::empty_dirs::fileless_dirs(verb_dir, &made) {
        Ok(dirs) => mismatches.extend(dirs.into_iter().map(|d| {
            format!(
                "{d}/: a directory in the folder holding no file, which no verb makes (only a snapshot, restore or reset leaves one: criu-work/, or CRIU's cgroup yard .criu.cgyard.XXXXXX in it): added after the verb wrote it"
            )
        })),
        Err(e) => mismatches.push(format!(
            "the folder cannot be listed to check its directories: {e}"
        )),
    }
    if mismatches.is_empty() {
        ArtifactCheck {
            state: "matches",
            detail: format!(
                "the folder's {} other file(s) have the sha256 and size verb.json lists",
                listed.len()
            ),
            mismatches,
        }
    } else {
        ArtifactCheck {
            state: "DIFFERS",
            detail: format!(
                "{} of the folder's files differ from the artifacts verb.json lists",
                mismatches.len()
            ),
            mismatches,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_missing_and_added_files_are_each_named() {
        let d = tempfile::tempdir().unwrap();
        let ev = EvidenceDir::open(d.path()).unwrap();
        ev.write("gates.json", b"[]").unwrap();
        ev.write("criu-work/restore.log", b"restored\n").unwrap();
        ev.write("netstate-after.json", b"{}").unwrap();
        let listed = ev.inventory_except(&SLOT_VERB_UNLISTED).unwrap();
        // Written after verb.json: never listed, never a mismatch.
        for late in SLOT_VERB_UNLISTED {
            std::fs::write(d.path().join(late), "x").unwrap();
        }
        let c = check(d.path(), Some(&listed));
        assert_eq!(c.state, "matches", "{c:?}");
        assert!(c.detail.contains("3 other file(s)"), "{c:?}");
        assert_eq!(check(d.path(), None).state, "unchecked");

        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .open(d.path().join("criu-work/restore.log"))
            .unwrap();
        std::io::Write::write_all(&mut log, b"appended\n").unwrap();
        std::fs::remove_file(d.path().join("netstate-after.json")).unwrap();
        std::fs::write(d.path().join("added.txt"), "x").unwrap();
        let c = check(d.path(), Some(&listed));
        assert_eq!(c.state, "DIFFERS");
        assert_eq!(c.mismatches.len(), 3, "{c:#?}");
        assert!(
            c.mismatches[0].starts_with("criu-work/restore.log: sha256 ")
                && c.mismatches[0].contains("(18 bytes) is not the")
                && c.mismatches[0].contains("(9 bytes) verb.json lists"),
            "{c:#?}"
        );
        assert!(
            c.mismatches[1].starts_with("netstate-after.json: listed in verb.json"),
            "{c:#?}"
        );
        assert!(
            c.mismatches[2].starts_with("added.txt: in the folder but not among"),
            "{c:#?}"
        );
    }

    /// A compressed file is proven by its stored bytes and by what it decodes to: a list
    /// whose `content` is not what the file decodes to is named.
    #[test]
    fn a_compressed_files_content_is_checked_too() {
        let d = tempfile::tempdir().unwrap();
        let ev = EvidenceDir::open(d.path()).unwrap();
        ev.write("criu-work/dump.log", &b"(00.1) dumped\n".repeat(2000))
            .unwrap();
        ev.compress("criu-work/dump.log").unwrap();
        let mut listed = ev.inventory_except(&SLOT_VERB_UNLISTED).unwrap();
        assert_eq!(check(d.path(), Some(&listed)).state, "matches");
        let c = listed[0].content.as_mut().unwrap();
        c.sha256 = "00".repeat(32);
        let c = check(d.path(), Some(&listed));
        assert_eq!(c.state, "DIFFERS");
        assert!(
            c.mismatches[0].starts_with("criu-work/dump.log.zst: decodes to sha256 "),
            "{c:#?}"
        );
        listed[0].content = None;
        let c = check(d.path(), Some(&listed));
        assert!(
            c.mismatches[0].contains("stored compressed, but verb.json lists no content"),
            "{c:#?}"
        );
    }

    #[test]
    fn a_listed_name_that_leaves_the_folder_is_never_opened_and_a_fifo_never_read() {
        let root = tempfile::tempdir().unwrap();
        let d = root.path().join("0003-restore");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(root.path().join("owner.json"), "{}").unwrap();
        let forged = [Artifact {
            path: "../owner.json".into(),
            bytes: 2,
            sha256: crate::evidence::sha256_hex(b"{}"),
            content: None,
        }];
        let c = check(&d, Some(&forged));
        assert_eq!(c.state, "DIFFERS");
        assert!(c.mismatches[0].contains("not in the folder"), "{c:#?}");
        nix::unistd::mkfifo(
            &d.join("pipe"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let c = check(&d, Some(&[]));
        assert_eq!(c.state, "DIFFERS");
        assert!(c.mismatches[0].contains("cannot be listed"), "{c:#?}");
    }

    /// Finding 14 of trial 20: an empty directory added to a folder went unnoticed, while an
    /// added file is named.
    #[test]
    fn an_added_empty_directory_is_named_but_criu_work_and_its_cgroup_yard_are_not() {
        let root = tempfile::tempdir().unwrap();
        // Only a verb that runs CRIU makes criu-work/: in a provision's folder it is added.
        let prov = root.path().join("0001-provision");
        std::fs::create_dir_all(prov.join("criu-work")).unwrap();
        let c = check(&prov, Some(&[]));
        assert_eq!(c.mismatches.len(), 1, "{c:#?}");
        assert!(c.mismatches[0].starts_with("criu-work/: "), "{c:#?}");
        let dir = root.path().join("0002-reset");
        std::fs::create_dir(&dir).unwrap();
        let d = dir.as_path();
        let ev = EvidenceDir::open(d).unwrap();
        ev.write("gates.json", b"[]").unwrap();
        std::fs::create_dir_all(d.join("criu-work/.criu.cgyard.Ab12Cd")).unwrap();
        let listed = ev.inventory_except(&SLOT_VERB_UNLISTED).unwrap();
        let c = check(d, Some(&listed));
        assert_eq!(c.state, "matches", "{c:?}");
        std::fs::create_dir_all(d.join("added/deeper")).unwrap();
        std::fs::create_dir(d.join("criu-work/images")).unwrap();
        let c = check(d, Some(&listed));
        assert_eq!(c.state, "DIFFERS");
        assert_eq!(c.mismatches.len(), 2, "{c:#?}");
        assert!(
            c.mismatches[0].starts_with("added/: a directory in the folder holding no file"),
            "{c:#?}"
        );
        assert!(c.mismatches[1].starts_with("criu-work/images/: "), "{c:#?}");
        // A directory where incomplete.txt says a file of that name could not be written is
        // what the note explains; the others stay named.
        std::fs::create_dir(d.join("timings.json")).unwrap();
        std::fs::write(
            d.join(crate::evidence::dir::INCOMPLETE_FILE),
            "not written: timings.json (a file of that name is already there)\n",
        )
        .unwrap();
        let c = check(d, Some(&listed));
        assert_eq!(c.mismatches.len(), 2, "{c:#?}");
        assert!(
            !c.mismatches.iter().any(|m| m.starts_with("timings.json")),
            "{c:#?}"
        );
    }
}
