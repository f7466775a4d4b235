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

/// CRIU 4.3, the seed's pin, installed from Debian's binary package by `host/install-pins.sh`.
pub const PRIVATE_CRIU_4_3: &str = "/opt/criu-4.3/sbin/criu";

/// The ladder's default CRIU (`netprobe run`, `doctor`): the one closest to the pin that set-up
/// installed, [`PRIVATE_CRIU_4_3`], else [`default_criu`]. (The slot driver keeps
/// [`default_criu`].)
pub fn pinned_default_criu() -> PathBuf {
    let p = Path::new(PRIVATE_CRIU_4_3);
    if is_executable_file(p) {
        return p.to_path_buf();
    }
    default_criu()
}

/// The ladder's default OCI runtime (`netprobe run`, `doctor`): the runc closest to the seed's
/// pin (runc 1.5.2) that set-up installed, i.e. the newest `/opt/runc-<version>/sbin/runc`
/// (`host/install-pins.sh`: 1.4.3 and 1.3.6; `host/install-runc.sh`: an operator's 1.5.2), else
/// [`default_runtime`].
pub fn pinned_default_runtime() -> PathBuf {
    newest_runc_under(Path::new("/opt")).unwrap_or_else(default_runtime)
}

/// The `<dir>/runc-<version>/sbin/runc` with the highest version (numeric, dot-separated
/// components compared in order), among executable files; `None` when there is none.
pub fn newest_runc_under(dir: &Path) -> Option<PathBuf> {
    let key = |v: &str| -> Vec<u64> { v.split('.').map(|c| c.parse().unwrap_or(0)).collect() };
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            let version = name.strip_prefix("runc-")?.to_string();
            let bin = dir.join(&name).join("sbin/runc");
            (version.starts_with(|c: char| c.is_ascii_digit()) && is_executable_file(&bin))
                .then(|| (key(&version), bin))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, bin)| bin)
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
            script_interpreter: script_interpreter(&resolved),
            installed_sha256: super::pins::installed_sha256(&resolved),
        },
        t,
    ))
}

/// Runs `<resolved> --version` and parses it per `kind`: `(version, whole output)`.
///
/// Errors: [`HostError::Unusable`] (cannot start), [`HostError::NotRecognised`].
fn recognise(resolved: &Path, kind: BinaryKind, what: &str) -> Result<(String, String), HostError> {
    let outcome = run_version(resolved).map_err(|e| {
        let detail = match missing_loader(resolved) {
            Some(l) => format!(
                "cannot run --version: its ELF interpreter (loader) {} is missing; reinstall it (run: sudo bash host/setup.sh)",
                l.display()
            ),
            None => format!("cannot run --version: {e}"),
        };
        HostError::Unusable {
            what: what.to_string(),
            path: resolved.to_path_buf(),
            detail,
        }
    })?;
    let output = format!("{}{}", outcome.stdout, outcome.stderr);
    if let Some(lib) = missing_library(&output) {
        return Err(HostError::Unusable {
            what: what.to_string(),
            path: resolved.to_path_buf(),
            detail: format!(
                "cannot run: the shared library {lib} is missing (its loader said: {:?}); install the binary's libraries (run: sudo bash host/setup.sh)",
                output.lines().next().unwrap_or("").trim()
            ),
        });
    }
    if kind == BinaryKind::Runtime
        && let Some((name, _)) = parse_runtime_version(&output)
        && name != "runc"
        && name != "crun"
    {
        return Err(HostError::NotRecognised {
            what: format!("{what} netprobe knows (runc or crun; this is {name})"),
            article: kind.article().to_string(),
            path: resolved.to_path_buf(),
            output: output
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .chars()
                .take(200)
                .collect(),
        });
    }
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

/// The shared library the dynamic loader could not find, from its message
/// (`…: error while loading shared libraries: libseccomp.so.2: cannot open shared object file…`
/// → `libseccomp.so.2`); `None` when the output says nothing of the kind.
pub fn missing_library(output: &str) -> Option<String> {
    const MARK: &str = "error while loading shared libraries: ";
    let at = output.find(MARK)? + MARK.len();
    let lib = output[at..].split(':').next()?.trim();
    (!lib.is_empty()).then(|| lib.to_string())
}

/// The ELF interpreter (`PT_INTERP`, e.g. `/opt/runc-1.4.3/lib/ld-linux-x86-64.so.2`) of the
/// 64-bit little-endian ELF at `path` when that interpreter does not exist: why `execve` says
/// "No such file or directory" for a file that exists. `None` otherwise.
pub fn missing_loader(path: &Path) -> Option<PathBuf> {
    let b = std::fs::read(path).ok()?;
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return None;
    }
    let u = |o: usize, n: usize| -> Option<usize> {
        let s = b.get(o..o + n)?;
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(s);
        Some(u64::from_le_bytes(a) as usize)
    };
    let (phoff, phentsize, phnum) = (u(0x20, 8)?, u(0x36, 2)?, u(0x38, 2)?);
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if u(ph, 4)? == 3 {
            let (off, size) = (u(ph + 8, 8)?, u(ph + 32, 8)?);
            let raw = b.get(off..off + size)?;
            let interp = PathBuf::from(
                String::from_utf8_lossy(raw)
                    .trim_end_matches('\0')
                    .to_string(),
            );
            return (!interp.exists()).then_some(interp);
        }
    }
    None
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

/// The interpreter line of a `#!` script at `p` (the first line after `#!`, trimmed, at most
/// 200 characters, e.g. `/bin/sh` or `/usr/bin/env bash`); `None` for an ELF executable, any
/// other file, or one that cannot be read.
pub fn script_interpreter(p: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = Vec::with_capacity(256);
    std::fs::File::open(p)
        .ok()?
        .take(256)
        .read_to_end(&mut head)
        .ok()?;
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|b| *b == b'\n').next().unwrap_or(rest);
    let line: String = String::from_utf8_lossy(line)
        .trim()
        .chars()
        .take(200)
        .collect();
    Some(if line.is_empty() {
        "(an empty #! line)".to_string()
    } else {
        line
    })
}

/// True when `p` is a regular file (after following symlinks) with at least one execute bit.
pub fn is_executable_file(p: &Path) -> bool {
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
