//! `verify`'s re-derivation of each rung's facts and summary from the rung's hashed files: the
//! facts a rung computes from what it wrote (image counts, byte-equality of the states, inode
//! and pid files, log versions, `lo`'s state) are computed again from those files, and the
//! summary is rebuilt by the rung's own summary function. Facts that only the live run saw
//! (pids and inodes with no file behind them) are named as recorded, not re-derived.

use crate::criu;
use crate::evidence::result::{HostFacts, RungName, RungResult, Status};
use crate::netlink::{CriuLink, NetState};
use crate::probe::{criu_rung, external_netns, kernel, oci_rung, runner, runtime_cycle};
use serde_json::{Value, json};
use std::path::Path;

/// What re-deriving one part of a result found.
#[derive(Debug, Default)]
pub struct Rederived {
    /// Each field that differs from what the files give, or cannot be re-derived although the
    /// rung ran to the end (fail closed), e.g. `rungs[criu].facts.image_files: recorded 22, the
    /// evidence gives 21`.
    pub mismatches: Vec<String>,
    /// Each field re-derived from the files and compared, e.g. `rungs[criu].facts.image_files`.
    pub checked: Vec<String>,
    /// Each field present in the result that was not re-derived, e.g. `rungs[criu].facts.dumped_pid`.
    pub not_rederived: Vec<String>,
}

/// Why the rung's files cannot give a fact (the text `verify` puts after "cannot be
/// re-derived: "). Clone, as one file's reading serves several facts.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Underivable {
    /// A recorded file could not be read (`path` as it is named in the text).
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The OS error.
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
    /// A recorded file does not hold what it should.
    #[error("{file}: {reason}")]
    Malformed {
        /// The file, e.g. `holder.json`.
        file: String,
        /// What is wrong with it (the parser's error, or what is missing).
        reason: String,
    },
    /// A recorded file lacks the key or line a fact comes from.
    #[error("{file} has no {what}")]
    Lacks {
        /// The file, e.g. `kernel.log`.
        file: &'static str,
        /// The key or line, e.g. `netns_inode`.
        what: String,
    },
    /// The `Version:` line of a CRIU log is missing.
    #[error("{log} names no CRIU version")]
    NoCriuVersion {
        /// The log, e.g. `dump.log`.
        log: String,
    },
    /// The host facts name no runtime whose kind is known.
    #[error("the host facts name no recognised runtime")]
    NoRuntime,
    /// The images folder or a pid file could not be read as CRIU evidence.
    #[error(transparent)]
    Criu(std::sync::Arc<crate::criu::CriuError>),
    /// `images.json` does not list exactly the files of `images/` (each difference named).
    #[error("{0}")]
    ImagesDiffer(String),
}

impl Underivable {
    fn read(path: &Path, source: std::io::Error) -> Self {
        Underivable::Read {
            path: path.to_path_buf(),
            source: std::sync::Arc::new(source),
        }
    }

    fn malformed(file: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        Underivable::Malformed {
            file: file.into(),
            reason: reason.to_string(),
        }
    }
}

/// A fact's value as the files give it, or why they cannot.
type Derived = Result<Value, Underivable>;

/// Facts a rung records that are re-derived elsewhere in `verify` (the attribution is
/// recomputed by [`crate::probe::attribution::verify_recorded`]).
const CHECKED_ELSEWHERE: &[&str] = &["attribution"];

/// Re-derives the facts and the summary of `rung` (as `verify` left it: re-evaluated assertions
/// and recomputed status) from its folder `dir`; `host` gives the runtime kind (the result's
/// host facts, which `verify` compares with `host.json`). A skipped rung must say so; an
/// errored rung's summary must be the one its recorded error gives, and its facts are compared
/// where recorded.
pub fn rung(dir: &Path, rung: &RungResult, host: &HostFacts) -> Rederived {
    let mut out = Rederived::default();
    let field = |f: &str| format!("rungs[{}].{f}", rung.name);
    let derived: Vec<(&str, Derived)> = match rung.status {
        Status::Skipped => vec![],
        _ => facts(dir, rung.name, host),
    };
    let ran_to_end = matches!(rung.status, Status::Pass | Status::Fail);
    for (key, d) in &derived {
        let name = field(&format!("facts.{key}"));
        match (rung.facts.get(*key), d) {
            (Some(rec), Ok(v)) if rec == v => out.checked.push(name),
            (Some(rec), Ok(v)) => out
                .mismatches
                .push(format!("{name}: recorded {rec}, the evidence gives {v}")),
            // A rung that stopped early may lack the file behind a fact it recorded first.
            (Some(_), Err(_)) if !ran_to_end => out.not_rederived.push(name),
            (Some(rec), Err(why)) => out.mismatches.push(format!(
                "{name}: recorded {rec}, but it cannot be re-derived: {why}"
            )),
            (None, Ok(v)) if ran_to_end => out.mismatches.push(format!(
                "{name}: missing from the result, the evidence gives {v}"
            )),
            (None, Err(why)) if ran_to_end => out
                .mismatches
                .push(format!("{name}: missing, and cannot be re-derived: {why}")),
            (None, _) => {}
        }
    }
    for key in rung.facts.keys() {
        let known = derived.iter().any(|(k, _)| k == key) || CHECKED_ELSEWHERE.contains(&&**key);
        if !known {
            out.not_rederived.push(field(&format!("facts.{key}")));
        }
    }
    let summary = match rung.status {
        Status::Skipped => Ok("not requested with --phases".to_string()),
        Status::Error => Ok(error_summary(rung.error.as_deref().unwrap_or(""))),
        Status::Pass | Status::Fail => deciding_fact(dir, rung.name)
            .map(|core| runner::summarize(rung.status, &core, &rung.assertions)),
    };
    let name = field("summary");
    match summary {
        Ok(s) if s == rung.summary => out.checked.push(name),
        Ok(s) => out.mismatches.push(format!(
            "{name}: recorded {:?}, the evidence gives {s:?}",
            rung.summary
        )),
        Err(why) => out
            .mismatches
            .push(format!("{name}: cannot be re-derived: {why}")),
    }
    if rung.status == Status::Error {
        out.not_rederived.push(field("error"));
    }
    out
}

/// The summary the runner writes for a rung that could not run, from its recorded `error`.
fn error_summary(error: &str) -> String {
    if error.starts_with("probes/") {
        format!("could not load {error}")
    } else {
        format!("could not run: {error}")
    }
}

/// The facts of rung `name` that its files give, by fact name.
fn facts(dir: &Path, name: RungName, host: &HostFacts) -> Vec<(&'static str, Derived)> {
    match name {
        RungName::Kernel => {
            let log = kernel_log_ids(dir);
            vec![
                ("links_fresh", links_fresh(dir).map(|l| json!(l.len()))),
                ("reply_bytes_fresh", file_len(&dir.join("reply-fresh.bin"))),
                ("lo_up_with_127_after", lo_up_after(dir)),
                ("netns_inode", log.clone().map(|(inode, _)| json!(inode))),
                ("holder_pid", log.map(|(_, pid)| json!(pid))),
            ]
        }
        RungName::Criu => vec![
            ("dumped_pid", dump_log_pid(dir)),
            ("criu_version_dump_log", log_version(dir, "dump.log")),
            ("criu_version_restore_log", log_version(dir, "restore.log")),
            ("image_files", images(dir).map(|i| json!(i.len()))),
            ("state_byte_equal", states_equal(dir).map(Value::Bool)),
            (
                "restored_pid",
                criu::read_pidfile(&dir.join("restore.pid"))
                    .map(|p| json!(p))
                    .map_err(|e| Underivable::Criu(std::sync::Arc::new(e))),
            ),
        ],
        RungName::Oci | RungName::ExternalNetns => {
            let mut f = cycle_facts(dir, host);
            if name == RungName::ExternalNetns {
                let h = holder(dir);
                for (k, key) in [
                    ("holder_pid", "pid"),
                    ("holder_start_time", "start_time"),
                    ("holder_netns_inode", "netns_inode"),
                ] {
                    let v = h.clone().and_then(|h| {
                        h.get(key).cloned().ok_or_else(|| Underivable::Lacks {
                            file: "holder.json",
                            what: key.to_string(),
                        })
                    });
                    f.push((k, v));
                }
            }
            f
        }
    }
}

/// The facts the runtime cycle ([`runtime_cycle::run_cycle`]) records from its files.
fn cycle_facts(dir: &Path, host: &HostFacts) -> Vec<(&'static str, Derived)> {
    let kind = host
        .runtime
        .as_ref()
        .and_then(|r| crate::oci::RuntimeKind::from_version_output(&r.version_output))
        .map(|k| json!(k.as_str()))
        .ok_or(Underivable::NoRuntime);
    let argv = restore_argv(dir);
    vec![
        ("container_pid_before", dump_log_pid(dir)),
        (
            "container_id",
            argv.clone().and_then(|a| {
                a.last()
                    .map(|id| json!(id))
                    .ok_or_else(|| Underivable::malformed("runtime-restore.json", "empty argv"))
            }),
        ),
        ("work_area", argv.and_then(|a| work_area(&a))),
        ("image_files", images(dir).map(|i| json!(i.len()))),
        (
            "netns_images",
            images(dir).map(|i| {
                json!(
                    i.iter()
                        .filter(|f| f.name.starts_with("netns-"))
                        .map(|f| format!("{} ({} bytes)", f.name, f.bytes))
                        .collect::<Vec<_>>()
                )
            }),
        ),
        ("state_byte_equal", states_equal(dir).map(Value::Bool)),
        ("lo_up_with_127_after", lo_up_after(dir)),
        (
            "container_netns_inode_after",
            inode_file(&dir.join("netns-inode-restored.txt")).map(|i| json!(i)),
        ),
        (
            "config_sha256",
            crate::evidence::sha256_recorded(&dir.join("config.json"))
                .map(|(s, _)| json!(s))
                .map_err(|e| Underivable::malformed("config.json", e)),
        ),
        ("criu_version_dump_log", log_version(dir, "dump.log")),
        ("criu_version_restore_log", log_version(dir, "restore.log")),
        ("runtime_kind", kind),
    ]
}

/// The deciding fact the rung's own summary function gives from its files (before the runner
/// appends the failing assertions).
fn deciding_fact(dir: &Path, name: RungName) -> Result<String, Underivable> {
    match name {
        RungName::Kernel => Ok(kernel::summary(
            &links_fresh(dir)?,
            state(dir, "after")?.lo_up_with_127(),
        )),
        RungName::Criu => Ok(criu_rung::summary(
            images(dir)?.len(),
            state(dir, "after")?.lo_up_with_127(),
            states_equal(dir)?,
        )),
        RungName::Oci => {
            let netns = images(dir)?
                .iter()
                .filter(|f| f.name.starts_with("netns-"))
                .count();
            Ok(oci_rung::summary(
                &state(dir, "before")?,
                &state(dir, "after")?,
                netns,
            ))
        }
        RungName::ExternalNetns => {
            let holder_inode = holder(dir)?
                .get("netns_inode")
                .and_then(Value::as_u64)
                .ok_or_else(|| Underivable::Lacks {
                    file: "holder.json",
                    what: "netns_inode".into(),
                })?;
            Ok(external_netns::summary(
                inode_file(&dir.join("netns-inode-restored.txt")).ok(),
                holder_inode,
                state(dir, "after")?.lo_up_with_127(),
                states_equal(dir)?,
            ))
        }
    }
}

/// The CRIU version the `Version:` line of `dir/<log>` names.
fn log_version(dir: &Path, log: &str) -> Derived {
    let text = read_text(&dir.join(log))?;
    runtime_cycle::criu_version_in_log(&text)
        .map(|v| json!(v))
        .ok_or_else(|| Underivable::NoCriuVersion { log: log.into() })
}

fn read_text(p: &Path) -> Result<String, Underivable> {
    crate::evidence::read_recorded_text(p).map_err(|e| Underivable::read(p, e))
}

fn file_len(p: &Path) -> Derived {
    std::fs::metadata(p)
        .map(|m| json!(m.len()))
        .map_err(|e| Underivable::read(p, e))
}

/// The files of `dir/images` (read from the folder itself), which must also be exactly what
/// `images.json` lists.
fn images(dir: &Path) -> Result<Vec<criu::ImageFile>, Underivable> {
    let inv = criu::inventory(&dir.join("images"))
        .map_err(|e| Underivable::Criu(std::sync::Arc::new(e)))?;
    let listed: Vec<criu::ImageFile> = serde_json::from_str(&read_text(&dir.join("images.json"))?)
        .map_err(|e| Underivable::malformed("images.json", e))?;
    if listed != inv {
        return Err(Underivable::ImagesDiffer(images_differ(&listed, &inv)));
    }
    Ok(inv)
}

/// What differs between `images.json` (`listed`) and the files of `images/` (`found`), each
/// file named: `images/netdev-9.img changed (sha256 a… in images.json, b… in images/)`, a file
/// not listed, a listed file missing.
fn images_differ(listed: &[criu::ImageFile], found: &[criu::ImageFile]) -> String {
    let mut out = Vec::new();
    for f in found {
        match listed.iter().find(|l| l.name == f.name) {
            None => out.push(format!("images/{} is not listed in images.json", f.name)),
            Some(l) if l.sha256 != f.sha256 || l.bytes != f.bytes => out.push(format!(
                "images/{} changed ({} bytes sha256 {} in images.json, {} bytes sha256 {} in images/)",
                f.name, l.bytes, l.sha256, f.bytes, f.sha256
            )),
            Some(_) => {}
        }
    }
    for l in listed {
        if !found.iter().any(|f| f.name == l.name) {
            out.push(format!(
                "images/{} listed in images.json is missing",
                l.name
            ));
        }
    }
    if out.is_empty() {
        out.push("images.json lists the files of images/ in another order".into());
    }
    out.join("; ")
}

/// Whether `netstate-before.json` and `netstate-after.json` are byte-equal (both are written
/// canonical, so bytes equal exactly when the states do).
fn states_equal(dir: &Path) -> Result<bool, Underivable> {
    let read = |f: &str| {
        crate::evidence::read_recorded(&dir.join(f)).map_err(|e| Underivable::read(Path::new(f), e))
    };
    Ok(read("netstate-before.json")? == read("netstate-after.json")?)
}

fn state(dir: &Path, when: &str) -> Result<NetState, Underivable> {
    let f = format!("netstate-{when}.json");
    NetState::from_json(&read_text(&dir.join(&f))?).map_err(|e| Underivable::malformed(f, e))
}

fn lo_up_after(dir: &Path) -> Derived {
    state(dir, "after").map(|s| json!(s.lo_up_with_127()))
}

fn links_fresh(dir: &Path) -> Result<Vec<CriuLink>, Underivable> {
    serde_json::from_str(&read_text(&dir.join("links-fresh.json"))?)
        .map_err(|e| Underivable::malformed("links-fresh.json", e))
}

/// The netns inode and holder pid `kernel.log` names: `Dump NET namespace info <inode> via <pid>`.
fn kernel_log_ids(dir: &Path) -> Result<(u64, i64), Underivable> {
    let text = read_text(&dir.join("kernel.log"))?;
    text.lines()
        .find_map(|l| {
            let rest = l.strip_prefix("Dump NET namespace info ")?;
            let mut w = rest.split_whitespace();
            let inode = w.next()?.parse().ok()?;
            (w.next()? == "via").then_some(())?;
            Some((inode, w.next()?.parse().ok()?))
        })
        .ok_or_else(|| Underivable::Lacks {
            file: "kernel.log",
            what: "'Dump NET namespace info <inode> via <pid>' line".into(),
        })
}

/// The pid CRIU dumped: the number after `Dumping processes (pid: ` in `dump.log`, the line
/// `cr_dump_tasks()` in criu/cr-dump.c logs first (`(pid: %d)` in CRIU 3.x, `(pid: %d comm:
/// %s)` in 4.x). For the criu rung the dumped task, for a runtime rung the container's init
/// (the pid the runtime handed to CRIU).
fn dump_log_pid(dir: &Path) -> Derived {
    const MARK: &str = "Dumping processes (pid: ";
    let text = read_text(&dir.join("dump.log"))?;
    let rest = text
        .split_once(MARK)
        .map(|(_, r)| r)
        .ok_or_else(|| Underivable::Lacks {
            file: "dump.log",
            what: format!("{MARK:?} line"),
        })?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse::<u64>()
        .map(|p| json!(p))
        .map_err(|_| Underivable::malformed("dump.log", format!("no pid after {MARK:?}")))
}

/// The runtime's restore argv as `runtime-restore.json` records it
/// ([`crate::oci::RuntimeOutcome`]`.argv`, binary first; the container id last).
fn restore_argv(dir: &Path) -> Result<Vec<String>, Underivable> {
    let v: Value = serde_json::from_str(&read_text(&dir.join("runtime-restore.json"))?)
        .map_err(|e| Underivable::malformed("runtime-restore.json", e))?;
    serde_json::from_value(v.get("argv").cloned().unwrap_or(Value::Null))
        .map_err(|e| Underivable::malformed("runtime-restore.json", format!("argv: {e}")))
}

/// The work area: the folder holding the OCI bundle (`--bundle <work area>/bundle`, as
/// [`runtime_cycle`] lays it out for runc and crun alike).
fn work_area(argv: &[String]) -> Derived {
    let bundle = argv
        .iter()
        .position(|a| a == "--bundle")
        .and_then(|i| argv.get(i + 1))
        .ok_or_else(|| Underivable::malformed("runtime-restore.json", "no --bundle in argv"))?;
    let bundle = Path::new(bundle);
    match (bundle.file_name(), bundle.parent()) {
        (Some(n), Some(p)) if n == "bundle" => Ok(json!(p.display().to_string())),
        _ => Err(Underivable::malformed(
            "runtime-restore.json",
            format!("--bundle {} is not <work area>/bundle", bundle.display()),
        )),
    }
}

fn inode_file(p: &Path) -> Result<u64, Underivable> {
    read_text(p)?
        .trim()
        .parse()
        .map_err(|e| Underivable::malformed(p.display().to_string(), e))
}

fn holder(dir: &Path) -> Result<Value, Underivable> {
    serde_json::from_str(&read_text(&dir.join("holder.json"))?)
        .map_err(|e| Underivable::malformed("holder.json", e))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_changed_image_is_named() {
        let f = |name: &str, sha: &str| criu::ImageFile {
            name: name.into(),
            bytes: 4,
            sha256: sha.into(),
            blake3: None,
        };
        let listed = [f("inventory.img", "a"), f("netdev-9.img", "b")];
        let found = [f("inventory.img", "a"), f("netdev-9.img", "c")];
        assert_eq!(
            images_differ(&listed, &found),
            "images/netdev-9.img changed (4 bytes sha256 b in images.json, 4 bytes sha256 c in images/)"
        );
        assert_eq!(
            images_differ(&listed, &found[..1]),
            "images/netdev-9.img listed in images.json is missing"
        );
    }

    use super::*;

    #[test]
    fn error_summaries_follow_the_runner() {
        assert_eq!(
            error_summary("criu dump: exited 1"),
            "could not run: criu dump: exited 1"
        );
        assert_eq!(
            error_summary("probes/oci.toml: bad"),
            "could not load probes/oci.toml: bad"
        );
    }

    #[test]
    fn kernel_log_names_inode_and_pid() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("kernel.log"),
            "netprobe kernel rung: x\nDump NET namespace info 4026532322 via 28057 (fresh netns)\n",
        )
        .unwrap();
        assert_eq!(kernel_log_ids(d.path()).unwrap(), (4026532322, 28057));
    }

    #[test]
    fn dump_log_names_the_dumped_pid_in_both_formats() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("dump.log");
        for (line, pid) in [
            (
                "(00.026567) Dumping processes (pid: 24855 comm: netprobe)\n",
                24855,
            ),
            ("(00.000100) Dumping processes (pid: 7)\n", 7),
        ] {
            std::fs::write(
                &log,
                format!("(00.000001) ====\n{line}(00.1) Seized task\n"),
            )
            .unwrap();
            assert_eq!(dump_log_pid(d.path()).unwrap(), json!(pid));
        }
        std::fs::write(&log, "(00.000100) Dumping processes (pid: x)\n").unwrap();
        assert!(dump_log_pid(d.path()).is_err());
        std::fs::write(&log, "no such line\n").unwrap();
        assert!(
            dump_log_pid(d.path())
                .unwrap_err()
                .to_string()
                .contains("Dumping processes")
        );
    }

    #[test]
    fn work_area_is_the_parent_of_the_bundle() {
        let argv = |bundle: &str| -> Vec<String> {
            [
                "crun",
                "--root",
                "/run/crun",
                "restore",
                "--bundle",
                bundle,
                "id-1",
            ]
            .map(String::from)
            .to_vec()
        };
        assert_eq!(
            work_area(&argv("/var/tmp/netprobe-x/bundle")).unwrap(),
            json!("/var/tmp/netprobe-x")
        );
        assert!(work_area(&argv("/srv/b")).is_err());
        assert!(work_area(&["crun".to_string()]).is_err());
    }
}
