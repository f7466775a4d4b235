//! The evidence directory: created fresh (never reused), every file written to a temporary name
//! in the same folder, then linked into place without ever replacing an existing file.
//!
//! Durability is established once, not per file: [`EvidenceDir::write`] / [`EvidenceDir::adopt`]
//! do not fsync (a run writes ~70 files; per-file fsync of file + folder cost ~70 ms of the
//! ladder). [`EvidenceDir::write_result`] first `syncfs`es the filesystem holding the folder —
//! every file netprobe wrote *and* every file its children (CRIU, runc) wrote there, with every
//! link/rename — and only then writes `netprobe-result.json` (temp name, fsync, link, fsync of
//! the folder). A crash therefore leaves either no result, or a result whose every listed file is
//! durable; a folder without a result is an interrupted run and is treated as such by `verify`.
//!
//! Layout (ARCHITECTURE.md section 4): `DIR/netprobe-result.json` (written last, by
//! [`EvidenceDir::write_result`]), `DIR/host.json`, `DIR/<rung>/…`.

pub use super::error::EvidenceError;
use super::error::io_err;
use crate::evidence::result::{Artifact, RESULT_FILE, RunResult, RungName};
use crate::evidence::schema::validate_result;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The note an interrupted run leaves in its evidence folder instead of a result.
pub const INTERRUPTED_FILE: &str = "interrupted.txt";

/// The marker a run writes into its evidence folder first and removes only once
/// `netprobe-result.json` is written: a folder holding it (and no result) is a run that did not
/// finish — e.g. the disk filled up — even when not even the reason could be appended.
pub const INCOMPLETE_FILE: &str = "incomplete.txt";

/// The line an `incomplete.txt` gives each file that could not be written:
/// `not written: FILE (WHY)\n`.
pub fn not_written_line(file: &str, why: &str) -> String {
    format!("not written: {file} ({why})\n")
}

/// The file a [`not_written_line`] names; `None` for any other line.
pub fn not_written_file(line: &str) -> Option<&str> {
    line.strip_prefix("not written: ")?
        .split_once(" (")
        .map(|(f, _)| f)
}

/// Buffer size for streaming copies and hashes (bytes). 64 KiB stays in the L2 cache: reading
/// page-cache data into a 1 MiB buffer measured 0.7 GB/s here against 5 GB/s into 64 KiB
/// (`dd bs=1M` vs `bs=64k` of the runc binary).
const IO_CHUNK: usize = 1 << 16;

/// Prefix of temporary files; they are renamed away before a write returns.
const TMP_PREFIX: &str = ".netprobe-tmp-";

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh (or, for reading, existing) evidence directory.
#[derive(Debug, Clone)]
pub struct EvidenceDir {
    /// Absolute path of the folder (runtimes change directory before they open paths).
    root: PathBuf,
    /// The folder opened with an exclusive `flock` for as long as this value lives, so two runs
    /// never share one folder; `None` for folders opened read-only.
    _claim: Option<std::sync::Arc<File>>,
}

/// The default evidence folder under `base`: `base/<UTC YYYYmmddTHHMMSSZ>-<pid>`,
/// e.g. `base/20250101T120000Z-4242`. Nothing is created.
pub fn default_path(base: &Path) -> PathBuf {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    base.join(format!("{stamp}-{}", std::process::id()))
}

/// Streams `path` through SHA-256 in 64 KiB blocks. A symlink is followed, but only a regular
/// file is read ([`super::fsio::open_regular`]: a FIFO or device is refused at once instead of
/// blocking or never ending). Recorded evidence files: [`super::fsio::sha256_recorded`].
///
/// Returns `(lower-case hex sha256, size in bytes)`. Errors: any open/read error of `path`;
/// `InvalidInput` when it is not a regular file.
pub fn sha256_file(path: &Path) -> io::Result<(String, u64)> {
    sha256_stream(super::fsio::open_regular(path, true)?, |_| Ok(()))
}

/// Streams `reader` to its end through SHA-256 in 64 KiB blocks, handing every block to `sink`
/// as well (e.g. to copy it while hashing). Memory: one block, whatever the size.
///
/// Returns `(lower-case hex sha256, bytes read)`. Errors: the first read error of `reader`
/// (EINTR is retried) or error of `sink`.
pub fn sha256_stream<R: Read>(
    mut reader: R,
    mut sink: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<(String, u64)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; IO_CHUNK];
    let mut total = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        sink(&buf[..n])?;
        total += n as u64;
    }
    Ok((hex::encode(hasher.finalize()), total))
}

/// The first non-empty line of a note (`interrupted.txt`, `incomplete.txt`: what stopped the
/// writer and what to do), read as a recorded file and made printable (control characters
/// escaped, at most 1000 characters); `(empty)` or `(unreadable)` when it says nothing.
pub fn note_first_line(path: &Path) -> String {
    match super::fsio::read_recorded_text(path) {
        Ok(t) => super::fsio::printable(
            t.lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("(empty)"),
            1000,
        ),
        Err(_) => "(unreadable)".to_string(),
    }
}

/// Reads and checks `DIR/netprobe-result.json`: it must parse as JSON, validate against the
/// schema, and deserialize into [`RunResult`].
///
/// Errors: [`EvidenceError::Missing`] (no folder), [`EvidenceError::NotAnEvidenceFolder`] (a
/// file, e.g. one inside an evidence folder), [`EvidenceError::Interrupted`] (no result,
/// `interrupted.txt` present), [`EvidenceError::Incomplete`] (no result, `incomplete.txt`
/// present), [`EvidenceError::Io`] (no result file), [`EvidenceError::Json`],
/// [`EvidenceError::Invalid`].
pub fn read_result(dir: &Path) -> Result<RunResult, EvidenceError> {
    if !dir.is_dir() {
        return Err(if dir.exists() {
            not_an_evidence_folder(dir)
        } else {
            EvidenceError::Missing(dir.to_path_buf())
        });
    }
    let path = dir.join(RESULT_FILE);
    if !path.exists() && dir.join(INTERRUPTED_FILE).is_file() {
        return Err(EvidenceError::Interrupted(
            dir.to_path_buf(),
            note_first_line(&dir.join(INTERRUPTED_FILE)),
        ));
    }
    if !path.exists() && dir.join(INCOMPLETE_FILE).is_file() {
        let note = super::fsio::read_recorded_text(&dir.join(INCOMPLETE_FILE)).unwrap_or_default();
        let reason = note
            .lines()
            .find_map(|l| l.strip_prefix("reason: "))
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        let first = note.lines().next().unwrap_or("").to_string();
        return Err(EvidenceError::Incomplete(dir.to_path_buf(), reason, first));
    }
    let text = super::fsio::read_recorded(&path).map_err(io_err("read", &path))?;
    let value: serde_json::Value =
        serde_json::from_slice(&text).map_err(|source| EvidenceError::Json {
            path: path.clone(),
            source,
        })?;
    validate_result(&value).map_err(|errors| EvidenceError::Invalid {
        path: path.clone(),
        errors,
    })?;
    serde_json::from_value(value).map_err(|source| EvidenceError::Json { path, source })
}

/// The file `path` was to become: a temporary file of [`EvidenceDir`]'s atomic writes
/// (`.netprobe-tmp-<pid>-<n>-<name>`) is named by its destination in the same folder; any other
/// path is returned as it is.
pub fn written_name(path: &Path) -> PathBuf {
    let dest = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix(TMP_PREFIX))
        .and_then(|rest| rest.splitn(3, '-').nth(2));
    match dest {
        Some(name) if !name.is_empty() => path.with_file_name(name),
        _ => path.to_path_buf(),
    }
}

/// [`EvidenceError::NotAnEvidenceFolder`] for `path` (an existing non-directory), naming the
/// nearest folder above it that holds a result.
fn not_an_evidence_folder(path: &Path) -> EvidenceError {
    let folder = fs::canonicalize(path).ok().and_then(|real| {
        real.ancestors()
            .skip(1)
            .find(|a| a.join(RESULT_FILE).is_file())
            .map(Path::to_path_buf)
    });
    EvidenceError::NotAnEvidenceFolder {
        path: path.to_path_buf(),
        folder,
    }
}

/// Checks that `rel` is a plain relative `/`-separated path with no `.`/`..`/empty parts.
fn check_rel(rel: &str) -> Result<(), EvidenceError> {
    let bad = |reason| {
        Err(EvidenceError::BadPath {
            rel: rel.to_string(),
            reason,
        })
    };
    if rel.is_empty() {
        return bad("empty path");
    }
    if rel.starts_with('/') {
        return bad("absolute path");
    }
    if rel.contains('\0') || rel.contains('\\') {
        return bad("NUL or backslash in path");
    }
    for part in rel.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return bad("empty, `.` or `..` component");
        }
    }
    if rel
        .split('/')
        .next_back()
        .is_some_and(|n| n.starts_with(TMP_PREFIX))
    {
        return bad("name reserved for netprobe's temporary files");
    }
    Ok(())
}

/// fsyncs a directory so a rename/link inside it is durable.
fn sync_dir(dir: &Path) -> Result<(), EvidenceError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("fsync directory", dir))
}

impl EvidenceDir {
    /// Creates a fresh evidence folder at `path` (parents too) and claims it: the folder is
    /// held with an exclusive `flock` while the returned value lives, and its emptiness is
    /// checked after the claim, so two runs given the same folder never mix their files. `path`
    /// must not exist, or be an empty directory. The root is made absolute (a relative `path` is
    /// resolved against the current directory once, here).
    ///
    /// Errors: [`EvidenceError::InsideEvidence`] (inside a folder netprobe wrote, see
    /// [`super::enclosing`]), [`EvidenceError::NotEmpty`] (holds anything),
    /// [`EvidenceError::NotADirectory`], [`EvidenceError::Symlink`] (not followed),
    /// [`EvidenceError::InUse`] (another netprobe holds it), [`EvidenceError::Io`] (cannot
    /// create, claim, list or write into it — `access(W_OK)`, e.g. EROFS on a read-only mount).
    pub fn create(path: &Path) -> Result<EvidenceDir, EvidenceError> {
        Self::create_part(path, None)
    }

    /// [`EvidenceDir::create`] for a run that may be a matrix's part: `matrix` is the folder
    /// `netprobe matrix` named to it (`--part-of-matrix`), which `path` may then be directly in
    /// once that is proven ([`super::enclosing::refuse_inside_evidence`]); `None` is `create`.
    ///
    /// Errors: those of `create`, and [`EvidenceError::NotAMatrixPart`] (`matrix` not proven).
    pub fn create_part(path: &Path, matrix: Option<&Path>) -> Result<EvidenceDir, EvidenceError> {
        super::enclosing::refuse_inside_evidence(path, matrix)?;
        match fs::symlink_metadata(path) {
            Ok(md) if md.is_dir() => {}
            Ok(md) if md.is_symlink() => {
                return Err(EvidenceError::Symlink {
                    path: path.to_path_buf(),
                    real: fs::canonicalize(path).ok(),
                });
            }
            Ok(_) => return Err(EvidenceError::NotADirectory(path.to_path_buf())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(path).map_err(io_err("create", path))?;
            }
            Err(e) => return Err(io_err("inspect", path)(e)),
        }
        let root = fs::canonicalize(path).map_err(io_err("resolve", path))?;
        let claim = File::open(&root).map_err(io_err("open", &root))?;
        {
            use std::os::fd::AsRawFd;
            // SAFETY: flock on a descriptor we own; no memory is passed.
            if unsafe { libc::flock(claim.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                return Err(EvidenceError::InUse(path.to_path_buf()));
            }
        }
        let mut entries = fs::read_dir(&root).map_err(io_err("list", &root))?;
        if entries.next().is_some() {
            return Err(EvidenceError::NotEmpty(path.to_path_buf()));
        }
        // An existing folder netprobe cannot write (read-only mount, permissions) is refused
        // here, as a new one that cannot be created is: one cause, one class.
        nix::unistd::access(&root, nix::unistd::AccessFlags::W_OK)
            .map_err(|e| io_err("write into", &root)(io::Error::from(e)))?;
        Ok(EvidenceDir {
            root,
            _claim: Some(std::sync::Arc::new(claim)),
        })
    }

    /// Opens an existing evidence folder for reading (`verify`, `report`). Nothing is written.
    ///
    /// Errors: [`EvidenceError::Missing`], [`EvidenceError::NotAnEvidenceFolder`].
    pub fn open(path: &Path) -> Result<EvidenceDir, EvidenceError> {
        match fs::metadata(path) {
            Ok(md) if md.is_dir() => Ok(EvidenceDir {
                root: path.to_path_buf(),
                _claim: None,
            }),
            Ok(_) => Err(not_an_evidence_folder(path)),
            Err(_) => Err(EvidenceError::Missing(path.to_path_buf())),
        }
    }

    /// Writes [`INCOMPLETE_FILE`] (the run's first file): when and by which pid the run
    /// started, and that the note goes once the result is written.
    ///
    /// Errors: [`EvidenceError::Io`] (e.g. ENOSPC).
    pub fn mark_incomplete(&self, started_at: &str) -> Result<(), EvidenceError> {
        let p = self.root.join(INCOMPLETE_FILE);
        let text = format!(
            "netprobe run (pid {}) started at {started_at} and has not finished: this note is \
             removed once netprobe-result.json is written; if it is still here, the run ended \
             without a result (the reason follows when it could be written)\n",
            std::process::id()
        );
        fs::write(&p, text).map_err(io_err("write", &p))
    }

    /// Appends `reason: …` to [`INCOMPLETE_FILE`] (best effort: a full disk may refuse it; the
    /// marker itself then still says the run did not finish).
    pub fn note_incomplete(&self, reason: &str) {
        let p = self.root.join(INCOMPLETE_FILE);
        if let Ok(mut f) = fs::OpenOptions::new().append(true).open(&p) {
            let _ = writeln!(f, "reason: {}", reason.replace('\n', " "));
        }
    }

    /// Removes [`INCOMPLETE_FILE`] (after the result is written).
    ///
    /// Errors: [`EvidenceError::Io`].
    pub fn clear_incomplete(&self) -> Result<(), EvidenceError> {
        let p = self.root.join(INCOMPLETE_FILE);
        match fs::remove_file(&p) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err("remove", &p)(e)),
            _ => Ok(()),
        }
    }

    /// The evidence folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `DIR/<rung>/`, created if missing (e.g. `DIR/external-netns/`).
    ///
    /// Errors: [`EvidenceError::Io`] when it cannot be created.
    pub fn rung_dir(&self, rung: RungName) -> Result<PathBuf, EvidenceError> {
        let p = self.root.join(rung.as_str());
        fs::create_dir_all(&p).map_err(io_err("create", &p))?;
        Ok(p)
    }

    /// Resolves `rel` under the root, creating its parent folders. Refuses existing targets.
    fn prepare(&self, rel: &str) -> Result<(PathBuf, PathBuf), EvidenceError> {
        check_rel(rel)?;
        let dest = self.root.join(rel);
        let parent = dest
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.root.clone());
        fs::create_dir_all(&parent).map_err(io_err("create", &parent))?;
        if fs::symlink_metadata(&dest).is_ok() {
            return Err(EvidenceError::Exists(dest));
        }
        Ok((dest, parent))
    }

    /// Writes a temp file in `parent` via `fill` (which returns the bytes written and the
    /// sha256) and links it to `dest` without replacing anything. With `durable`, the file is
    /// fsynced before the link and the folder after it (only the result is written so; every
    /// other file is made durable by the `syncfs` in [`write_result`](Self::write_result)).
    pub(super) fn atomic<F>(
        &self,
        rel: &str,
        durable: bool,
        fill: F,
    ) -> Result<Artifact, EvidenceError>
    where
        F: FnOnce(&mut File, &Path) -> Result<(u64, String), EvidenceError>,
    {
        let (dest, parent) = self.prepare(rel)?;
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned());
        let tmp = parent.join(format!(
            "{TMP_PREFIX}{}-{}-{}",
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed),
            name.unwrap_or_default()
        ));
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io_err("create", &tmp))?;
        let outcome = (|| {
            let (bytes, sha256) = fill(&mut f, &tmp)?;
            if durable {
                f.sync_all().map_err(io_err("fsync", &tmp))?;
            }
            // link(2) fails with EEXIST instead of replacing: never overwrite evidence.
            fs::hard_link(&tmp, &dest).map_err(|e| {
                if e.kind() == io::ErrorKind::AlreadyExists {
                    EvidenceError::Exists(dest.clone())
                } else {
                    io_err("link into place", &dest)(e)
                }
            })?;
            Ok((bytes, sha256))
        })();
        let _ = fs::remove_file(&tmp);
        let (bytes, sha256) = outcome?;
        if durable {
            sync_dir(&parent)?;
        }
        Ok(Artifact {
            path: rel.to_string(),
            bytes,
            sha256,
            content: None,
        })
    }

    /// Writes `bytes` to `DIR/<rel>` atomically (temp name in the same folder, link into
    /// place; made durable together with everything else by [`write_result`](Self::write_result)),
    /// creating parent folders. `rel` is `/`-separated and relative (e.g.
    /// `criu/request.bin`).
    ///
    /// Returns the [`Artifact`] (`rel`, size, sha256). Errors: [`EvidenceError::Exists`] if the
    /// file exists (never overwritten), [`EvidenceError::BadPath`], [`EvidenceError::Io`].
    pub fn write(&self, rel: &str, bytes: &[u8]) -> Result<Artifact, EvidenceError> {
        if rel == RESULT_FILE {
            return Err(EvidenceError::BadPath {
                rel: rel.to_string(),
                reason: "the result is written only by write_result",
            });
        }
        self.write_unchecked(rel, false, bytes)
    }

    fn write_unchecked(
        &self,
        rel: &str,
        durable: bool,
        bytes: &[u8],
    ) -> Result<Artifact, EvidenceError> {
        self.atomic(rel, durable, |f, tmp| {
            f.write_all(bytes).map_err(io_err("write", tmp))?;
            Ok((bytes.len() as u64, super::fsio::sha256_hex(bytes)))
        })
    }

    /// Serializes `value` as pretty JSON with a trailing newline and [`write`](Self::write)s it.
    ///
    /// Errors: as `write`, plus [`EvidenceError::Json`] if `value` cannot be serialized.
    pub fn write_json<T: Serialize + ?Sized>(
        &self,
        rel: &str,
        value: &T,
    ) -> Result<Artifact, EvidenceError> {
        let mut text = serde_json::to_vec_pretty(value).map_err(|source| EvidenceError::Json {
            path: self.root.join(rel),
            source,
        })?;
        text.push(b'\n');
        self.write(rel, &text)
    }

    /// Copies the external file `src` (a CRIU log, an image) to `DIR/<rel>` atomically,
    /// streaming and hashing in 64 KiB blocks.
    ///
    /// Errors: [`EvidenceError::Io`] naming `src` when it cannot be read, plus those of `write`.
    pub fn adopt(&self, rel: &str, src: &Path) -> Result<Artifact, EvidenceError> {
        if rel == RESULT_FILE {
            return Err(EvidenceError::BadPath {
                rel: rel.to_string(),
                reason: "the result is written only by write_result",
            });
        }
        let input = File::open(src).map_err(io_err("open", src))?;
        self.atomic(rel, false, |f, tmp| {
            let (sha256, total) = sha256_stream(input, |block| f.write_all(block))
                .map_err(io_err("copy into", tmp))?;
            Ok((total, sha256))
        })
    }

    /// Copies every regular file under `src_dir` to `DIR/<rel>/…` (recursively, same relative
    /// layout), each atomically. Returns the artifacts sorted by path. Symlinks and special
    /// files are refused (CRIU image folders hold none).
    ///
    /// Errors: [`EvidenceError::NotAFile`] for a symlink/special file, those of `adopt`.
    pub fn adopt_dir(&self, rel: &str, src_dir: &Path) -> Result<Vec<Artifact>, EvidenceError> {
        check_rel(rel)?;
        let mut files = Vec::new();
        walk(src_dir, "", &mut files)?;
        fs::create_dir_all(self.root.join(rel)).map_err(io_err("create", &self.root.join(rel)))?;
        let mut out = Vec::with_capacity(files.len());
        for (sub, path) in files {
            out.push(self.adopt(&format!("{rel}/{sub}"), &path)?);
        }
        Ok(out)
    }

    /// Validates `result` against `netprobe-result.schema.json`, makes everything already in the
    /// folder durable (one `syncfs` of its filesystem: the files netprobe and its children wrote,
    /// and their links), then writes `DIR/netprobe-result.json` atomically and durably (temp
    /// name, fsync, link, fsync of the folder). Call it last, after
    /// [`inventory`](Self::inventory): a result on disk implies every file it lists is on disk.
    ///
    /// Errors: [`EvidenceError::Invalid`] (nothing written), [`EvidenceError::Exists`],
    /// [`EvidenceError::Io`].
    pub fn write_result(&self, result: &RunResult) -> Result<Artifact, EvidenceError> {
        let path = self.root.join(RESULT_FILE);
        let value = serde_json::to_value(result).map_err(|source| EvidenceError::Json {
            path: path.clone(),
            source,
        })?;
        validate_result(&value).map_err(|errors| EvidenceError::Invalid {
            path: path.clone(),
            errors,
        })?;
        let mut text = serde_json::to_vec_pretty(&value)
            .map_err(|source| EvidenceError::Json { path, source })?;
        text.push(b'\n');
        self.sync_everything()?;
        self.write_unchecked(RESULT_FILE, true, &text)
    }

    /// Starts a `syncfs(2)` of the folder's filesystem on a background thread (e.g. when a rung
    /// ends, while the next rung's runtime and CRIU run), so the `syncfs` in
    /// [`write_result`](Self::write_result) finds less left to write. Durability is still
    /// established only by that final `syncfs`; the returned handle's result is informational.
    pub fn sync_in_background(&self) -> std::thread::JoinHandle<Result<(), EvidenceError>> {
        let dir = self.clone();
        std::thread::spawn(move || dir.sync_everything())
    }

    /// `syncfs(2)` of the filesystem holding the folder: every evidence file and every link
    /// written so far becomes durable in one call (instead of one fsync per file and folder).
    fn sync_everything(&self) -> Result<(), EvidenceError> {
        use std::os::fd::AsRawFd;
        let d = File::open(&self.root).map_err(io_err("open", &self.root))?;
        // SAFETY: syncfs on a descriptor we own; no memory is passed.
        if unsafe { libc::syncfs(d.as_raw_fd()) } != 0 {
            return Err(io_err("syncfs", &self.root)(io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Makes every file and folder under the evidence folder readable by everyone (files
    /// `| 0o444`, folders `| 0o555`; nothing made writable). Tools that netprobe runs write some
    /// files owner-only (CRIU's logs are 0600); evidence is for reviewers, and `netprobe verify`
    /// must run without root. Symlinks are left alone.
    ///
    /// Errors: [`EvidenceError::Io`] naming the entry that could not be read or changed.
    pub fn make_readable(&self) -> Result<(), EvidenceError> {
        use std::os::unix::fs::PermissionsExt;
        fn walk(dir: &Path) -> Result<(), EvidenceError> {
            let io = |action: &'static str, path: &Path| {
                let path = path.to_path_buf();
                move |source| EvidenceError::Io {
                    action,
                    path,
                    source,
                }
            };
            for entry in fs::read_dir(dir).map_err(io("read folder", dir))? {
                let entry = entry.map_err(io("read folder", dir))?;
                let path = entry.path();
                let meta = fs::symlink_metadata(&path).map_err(io("stat", &path))?;
                let extra = if meta.is_dir() {
                    0o555
                } else if meta.is_file() {
                    0o444
                } else {
                    continue;
                };
                let mode = meta.permissions().mode();
                if mode & extra != extra {
                    fs::set_permissions(&path, fs::Permissions::from_mode(mode | extra))
                        .map_err(io("chmod", &path))?;
                }
                if meta.is_dir() {
                    walk(&path)?;
                }
            }
            Ok(())
        }
        walk(&self.root)
    }

    /// Every file under the folder except `netprobe-result.json`, sorted by relative
    /// `/`-separated path, each hashed by streaming.
    ///
    /// Errors: [`EvidenceError::Io`] (unreadable entry), [`EvidenceError::NotAFile`].
    pub fn inventory(&self) -> Result<Vec<Artifact>, EvidenceError> {
        // The result is not its own artifact; the incomplete marker is removed once the result
        // is written.
        self.inventory_except(&[RESULT_FILE, INCOMPLETE_FILE])
    }

    /// Every file under the folder except those whose relative path is one of `skip`, sorted by
    /// relative `/`-separated path, each hashed by streaming — a `.zst` one also decoded and
    /// hashed for its `content` ([`super::compressed`]) — (a slot verb's `verb.json` lists
    /// its folder so, leaving out itself and the notes written after it).
    ///
    /// Errors: [`EvidenceError::Io`] (unreadable entry), [`EvidenceError::NotAFile`] (a
    /// symlink, FIFO, socket or device: never opened).
    pub fn inventory_except(&self, skip: &[&str]) -> Result<Vec<Artifact>, EvidenceError> {
        let mut files = Vec::new();
        walk(&self.root, "", &mut files)?;
        let mut out = Vec::with_capacity(files.len());
        for (rel, path) in files {
            if skip.contains(&rel.as_str()) {
                continue;
            }
            let (sha256, bytes) = sha256_file(&path).map_err(io_err("hash", &path))?;
            // A file stored compressed is listed with what it decodes to as well; one that does
            // not decode is listed without (and so differs from a list that has it).
            let content = if super::compressed::is_compressed(&rel) {
                super::compressed::content_of(&path).ok()
            } else if super::reference::is_reference(&rel) {
                // What it refers to, hashed now (none when it cannot be read).
                super::reference::content_of(&path).ok()
            } else {
                None
            };
            out.push(Artifact {
                path: rel,
                bytes,
                sha256,
                content,
            });
        }
        Ok(out)
    }
}

/// The `/`-separated path of entry `name` in the folder at relative path `prefix` (`""` for
/// the evidence folder itself).
pub(crate) fn rel_path(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    }
}

/// Collects `(relative "/" path, absolute path)` of every regular file under `dir`, sorted.
fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, PathBuf)>) -> Result<(), EvidenceError> {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .map_err(io_err("list", dir))?
        .collect::<Result<_, _>>()
        .map_err(io_err("list", dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let rel = rel_path(prefix, &entry.file_name().to_string_lossy());
        let ft = entry.file_type().map_err(io_err("inspect", &path))?;
        if ft.is_dir() {
            walk(&path, &rel, out)?;
        } else if ft.is_file() {
            out.push((rel, path));
        } else {
            return Err(EvidenceError::NotAFile(path));
        }
    }
    // Sort by the full relative path so `a/b` vs `a.b` orders the same everywhere.
    if prefix.is_empty() {
        out.sort_by(|a, b| a.0.cmp(&b.0));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rel_paths_are_checked() {
        for bad in ["", "/abs", "a/../b", "a//b", "./a", "a/.netprobe-tmp-x"] {
            assert!(check_rel(bad).is_err(), "{bad:?} accepted");
        }
        check_rel("criu/images/netns-1.img").unwrap();
    }
}
