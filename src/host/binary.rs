//! Facts about the CRIU and OCI runtime binaries: resolution through `PATH`, version, sha256.

use super::error::HostError;
use crate::criu::{CmdOutcome, parse_criu_version, sha256_file};
use crate::evidence::result::BinaryFacts;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where `host/install-criu.sh` installs CRIU 4.1.1 (Debian 12's CRIU 3.17 cannot run on
/// kernels >= 6.13).
pub const PRIVATE_CRIU: &str = "/opt/criu-4.2.1/sbin/criu";

/// CRIU 4.1.1 (Debian trixie's source), installed beside [`PRIVATE_CRIU`] by
/// `host/install-criu.sh`. It cannot dump a process holding an inet socket on kernels ≥ 6.16
/// (`Can't get 1:16 opt`: SO_PASSCRED became unix/netlink-only; fixed in CRIU 4.2), so it is
/// the fallback, not the default; pass it with `--criu` for a regression comparison.
pub const PRIVATE_CRIU_4_1: &str = "/opt/criu-4.1.1/sbin/criu";

/// Which kind of binary [`binary_facts`] inspects; decides how `--version` is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryKind {
    /// CRIU: `--version` prints `Version: X`.
    Criu,
    /// An OCI runtime (runc, crun, …): `--version` prints `<name> version X` first.
    Runtime,
}

impl BinaryKind {
    /// `CRIU` or `OCI runtime`, as used in messages.
    pub fn label(self) -> &'static str {
        match self {
            BinaryKind::Criu => "CRIU",
            BinaryKind::Runtime => "OCI runtime",
        }
    }

    fn article(self) -> &'static str {
        match self {
            BinaryKind::Criu => "a",
            BinaryKind::Runtime => "an",
        }
    }
}

/// Parses an OCI runtime's `--version` output: the first line of the form `<name> version <v>`
/// where `<name>` is a lower-case word (`runc`, `crun`, `youki`, …) and `<v>` starts with a digit.
/// Returns `(name, version)`, e.g. `"runc version 1.1.5+ds1\ncommit: …"` →
/// `Some(("runc", "1.1.5+ds1"))`, `"crun version 1.8.1\n…"` → `Some(("crun", "1.8.1"))`.
/// `None` for anything else.
pub fn parse_runtime_version(output: &str) -> Option<(String, String)> {
    output.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        let name = words.next()?;
        if words.next()? != "version" {
            return None;
        }
        let version = words.next()?;
        let name_ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        let version_ok = version.starts_with(|c: char| c.is_ascii_digit());
        (name_ok && version_ok).then(|| (name.to_string(), version.to_string()))
    })
}

/// The program name and version an observed binary reports, for sentences: `("runc",
/// "1.1.5+ds1")` for a runtime, `("CRIU", "4.1.1")` for CRIU; falls back to the file name of
/// `facts.path` when the output no longer parses.
pub fn program_name(facts: &BinaryFacts) -> String {
    if let Some((name, _)) = parse_runtime_version(&facts.version_output) {
        return name;
    }
    if parse_criu_version(&facts.version_output).is_some() {
        return "CRIU".to_string();
    }
    Path::new(&facts.path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| facts.path.clone())
}

/// Looks `name` up in `$PATH` (each entry joined with `name`; the first executable regular file
/// wins, as `execvp` would choose).
/// A `name` containing `/` is returned unchanged if it exists. `None` when not found.
pub fn find_in_path(name: &Path) -> Option<PathBuf> {
    if name.as_os_str().is_empty() {
        return None;
    }
    if name.components().count() > 1 || name.is_absolute() {
        return name.exists().then(|| name.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(name))
        .find(|p| is_executable_file(p))
}

/// The default CRIU: [`PRIVATE_CRIU`] (4.2.1) if it exists, else [`PRIVATE_CRIU_4_1`], else
/// `criu` found in `$PATH`, else the bare name `criu` (so that [`binary_facts`] reports it
/// missing).
pub fn default_criu() -> PathBuf {
    for private in [PRIVATE_CRIU, PRIVATE_CRIU_4_1] {
        let private = Path::new(private);
        if private.is_file() {
            return private.to_path_buf();
        }
    }
    find_in_path(Path::new("criu")).unwrap_or_else(|| PathBuf::from("criu"))
}

/// The default OCI runtime: `runc` found in `$PATH`, else the bare name `runc`.
pub fn default_runtime() -> PathBuf {
    find_in_path(Path::new("runc")).unwrap_or_else(|| PathBuf::from("runc"))
}

/// Facts about the binary at `path` (a bare name is resolved through `$PATH`): it must be an
/// executable regular file; `<path> --version` is run (30 s bound, no shell, stdin `/dev/null`)
/// and parsed per `kind` (`Version: 4.1.1` → `4.1.1`; `runc version 1.1.5+ds1` → `1.1.5+ds1`);
/// the sha256 is streamed and the size recorded. `BinaryFacts::path` is the resolved absolute
/// path (symlinks are not resolved: the path that is executed).
///
/// Errors: [`HostError::NotFound`], [`HostError::NotRegularFile`], [`HostError::NotAProgram`]
/// (neither ELF nor `#!`), [`HostError::NotExecutable`],
/// [`HostError::Unusable`] (cannot hash or start), [`HostError::NotRecognised`] (the output is not
/// that of `kind`; a non-zero exit with unrecognised output is reported the same way).
pub fn binary_facts(path: &Path, kind: BinaryKind) -> Result<BinaryFacts, HostError> {
    binary_facts_then(path, kind, |_| Ok(())).map(|(facts, ())| facts)
}

/// [`binary_facts`], and `then(resolved path)` once the version output is recognised, while the
/// file is still being hashed on another thread (e.g. `criu check` for CRIU).
///
/// Errors: those of [`binary_facts`] (a hash error before `then`'s), then `then`'s own.
pub fn binary_facts_then<T>(
    path: &Path,
    kind: BinaryKind,
    then: impl FnOnce(&Path) -> Result<T, HostError>,
) -> Result<(BinaryFacts, T), HostError> {
    let what = kind.label().to_string();
    let resolved = resolve(path, kind)?;
    let meta = std::fs::metadata(&resolved).map_err(|e| HostError::Unusable {
        what: what.clone(),
        path: resolved.clone(),
        detail: format!("cannot stat: {e}"),
    })?;
    if !meta.is_file() {
        return Err(HostError::NotRegularFile {
            what,
            path: resolved,
        });
    }
    if let Some(start) = not_a_program(&resolved) {
        return Err(HostError::NotAProgram {
            what,
            path: resolved,
            start,
        });
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(HostError::NotExecutable {
            what,
            path: resolved,
        });
    }
    // The file is hashed on a second thread while `--version` (and `then`) run.
    let (hashed, recognised, then_ran) = std::thread::scope(|s| {
        let hashing = s.spawn(|| sha256_file(&resolved));
        let recognised = recognise(&resolved, kind, &what);
        let then_ran = recognised.is_ok().then(|| then(&resolved));
        let hashed = hashing
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (hashed, recognised, then_ran)
    });
    let (version, output) = recognised?;
    let (sha256, bytes) = hashed.map_err(|e| HostError::Unusable {
        what,
        path: resolved.clone(),
        detail: format!("cannot read to hash: {e}"),
    })?;
    let t = then_ran.expect("`then` runs once the version is recognised")?;
    Ok((
        BinaryFacts {
            path: resolved.display().to_string(),
            version,
            version_output: output,
            sha256,
            bytes,
        },
        t,
    ))
}

/// Runs `<resolved> --version` and parses it per `kind`: `(version, whole output)`.
///
/// Errors: [`HostError::Unusable`] (cannot start), [`HostError::NotRecognised`].
fn recognise(resolved: &Path, kind: BinaryKind, what: &str) -> Result<(String, String), HostError> {
    let outcome = run_version(resolved).map_err(|e| HostError::Unusable {
        what: what.to_string(),
        path: resolved.to_path_buf(),
        detail: format!("cannot run --version: {e}"),
    })?;
    let output = format!("{}{}", outcome.stdout, outcome.stderr);
    let version = match kind {
        BinaryKind::Criu => parse_criu_version(&output),
        BinaryKind::Runtime => parse_runtime_version(&output).map(|(_, v)| v),
    };
    let Some(version) = version else {
        // The first line says what the program is; the rest is licence text and the like.
        let first = output.lines().next().unwrap_or("").trim();
        let shown: String = first.chars().take(200).collect();
        return Err(HostError::NotRecognised {
            what: what.to_string(),
            article: kind.article().to_string(),
            path: resolved.to_path_buf(),
            output: shown,
        });
    };
    Ok((version, output))
}

/// `<path> --version`: no shell, stdin `/dev/null`, `$CRIU_CONFIG_FILE` removed, 30 s bound.
fn run_version(path: &Path) -> Result<CmdOutcome, crate::criu::RunError> {
    let mut cmd = Command::new(path);
    cmd.arg("--version")
        .env_remove(crate::criu::CRIU_CONFIG_ENV);
    CmdOutcome::run(&mut cmd, Some(Duration::from_secs(30)))
}

fn resolve(path: &Path, kind: BinaryKind) -> Result<PathBuf, HostError> {
    let bare = path.components().count() == 1 && !path.is_absolute();
    if bare {
        return find_in_path(path)
            .map(|p| std::path::absolute(&p).unwrap_or(p))
            .ok_or_else(|| HostError::NotFound {
                what: kind.label().to_string(),
                name: path.to_path_buf(),
                searched: format!("not in $PATH={}", std::env::var("PATH").unwrap_or_default()),
            });
    }
    if !path.exists() {
        return Err(HostError::NotFound {
            what: kind.label().to_string(),
            name: path.to_path_buf(),
            searched: "no such file".to_string(),
        });
    }
    Ok(std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()))
}

/// `Some(first bytes, lossy, at most 16)` when the file at `p` starts with neither the ELF magic
/// (`\x7fELF`) nor `#!`, i.e. no exec(2) could run it; `None` for a program or when unreadable
/// (the later checks then report the real error).
fn not_a_program(p: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 16];
    let mut f = std::fs::File::open(p).ok()?;
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(_) => return None,
        }
    }
    let head = &head[..n];
    if head.starts_with(b"\x7fELF") || head.starts_with(b"#!") {
        None
    } else {
        Some(String::from_utf8_lossy(head).into_owned())
    }
}

/// True when `p` is a regular file (after following symlinks) with at least one execute bit.
pub fn is_executable_file(p: &Path) -> bool {
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
