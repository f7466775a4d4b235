//! A checkpoint archive (`podman container checkpoint --export`, a CRI-O/kubelet checkpoint)
//! read as a stream: tar, tar.gz or tar.zst, told apart by its first bytes (never by its
//! name), decompressed and walked entry by entry, never unpacked to disk.
//!
//! Kept in memory: `checkpoint/inventory.img` and the network images of `checkpoint/` (each at
//! most [`IMAGE_READ_CAP`], together at most that too: the bounds of `netprobe images DIR`),
//! and the engine's metadata at the top (`config.dump`, `spec.dump`, `network.status`, each at
//! most [`METADATA_CAP`]). Every other entry is read through and dropped, so the memory used
//! does not grow with the archive.
//!
//! Refused, naming the entry and the offset of its header in the (decompressed) tar stream: a
//! path leaving the archive (absolute, or with `..`), a link (symbolic or hard), a device or
//! FIFO, a sparse or unknown entry type, an entry declaring more than [`MAX_ENTRY_BYTES`], more
//! than [`MAX_ARCHIVE_BYTES`] declared in all, more than [`MAX_ARCHIVE_ENTRIES`] entries, a
//! network image or metadata file twice, an entry shorter than it declares or an archive
//! without its end-of-archive blocks (truncated), a corrupt gzip/zstd stream, and bytes other
//! than zeros after the end of the archive.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use super::format::IMAGE_READ_CAP;
use super::netimg::is_network_image;

/// The most entries (headers, extension headers included) read from one archive: 65536. A CRIU
/// dump of a container writes tens to a few thousand files.
pub const MAX_ARCHIVE_ENTRIES: u64 = 65_536;
/// The largest entry accepted: 8 GiB (a CRIU `pages-` image of a large process, a rootfs diff).
pub const MAX_ENTRY_BYTES: u64 = 8 << 30;
/// The most bytes all entries may declare together: 64 GiB.
pub const MAX_ARCHIVE_BYTES: u64 = 64 << 30;
/// The largest engine metadata file read (`config.dump`, `spec.dump`, `network.status`):
/// 4 MiB (Podman's are ~20 KiB).
pub const METADATA_CAP: u64 = 4 << 20;
/// The largest GNU long-name or PAX extension header read: 64 KiB.
const EXT_HEADER_CAP: u64 = 64 << 10;
/// The most bytes read after the end-of-archive blocks (they must be zeros: tar's record
/// padding).
const TRAILER_CAP: u64 = 1 << 20;
/// The metadata files kept, by their path at the archive's top.
pub const METADATA_FILES: &[&str] = &["config.dump", "spec.dump", "network.status"];

/// How an archive is compressed, as its first bytes say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Compression {
    /// A plain tar (`ustar` at offset 257).
    Tar,
    /// gzip (`1f 8b`).
    Gzip,
    /// zstd (`28 b5 2f fd`).
    Zstd,
}

impl Compression {
    /// `tar`, `gzip` or `zstd`.
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::Tar => "tar",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }
}

/// Why an entry is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// An absolute path or one with a `..` component.
    #[error("its path leaves the archive (absolute, or with `..`)")]
    Escapes,
    /// A symbolic or hard link.
    #[error(
        "a {kind} link (to {target}): a checkpoint archive holds regular files and folders only"
    )]
    Link {
        /// `symbolic` or `hard`.
        kind: &'static str,
        /// The link's target as recorded.
        target: String,
    },
    /// A character or block device, or a FIFO.
    #[error("a {0}: a checkpoint archive holds regular files and folders only")]
    Special(&'static str),
    /// A sparse file or an entry type netprobe does not read.
    #[error("entry type {0:?} is not one a checkpoint archive holds (regular files and folders)")]
    EntryType(char),
    /// An entry declaring more than its bound.
    #[error("it declares {size} bytes, more than the {cap} bytes {what}")]
    Oversized {
        /// The declared size in bytes.
        size: u64,
        /// The bound in bytes.
        cap: u64,
        /// What the bound is for.
        what: &'static str,
    },
    /// More entries than [`MAX_ARCHIVE_ENTRIES`].
    #[error("more than {MAX_ARCHIVE_ENTRIES} entries: a tar bomb, not a checkpoint")]
    TooManyEntries,
    /// A network image or metadata file met twice (an unpacker keeps the last one).
    #[error("it appears twice")]
    Duplicate,
    /// A header netprobe cannot read (checksum, size field, PAX record).
    #[error("unreadable header: {0}")]
    Header(String),
    /// Bytes other than zeros after the end-of-archive blocks.
    #[error("data after the end-of-archive blocks")]
    Trailing,
}

/// Why an archive cannot be read. Every message names the archive and the fix; those about an
/// entry name it and the offset of its header in the decompressed tar stream.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The file cannot be opened or read.
    #[error("{}: cannot read it: {source}; give a checkpoint archive (podman container checkpoint --export, a kubelet checkpoint) or a CRIU images folder", archive.display())]
    Open {
        /// The archive as given.
        archive: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// Neither tar, gzip nor zstd.
    #[error("{}: not a tar, gzip or zstd archive (first bytes {magic}); give the file podman container checkpoint --export or the kubelet wrote, or a CRIU images folder", archive.display())]
    NotAnArchive {
        /// The archive as given.
        archive: PathBuf,
        /// Its first bytes in hex (at most 8).
        magic: String,
    },
    /// An entry refused.
    #[error("{}: entry {entry} (offset {offset}): {why}; give an unmodified checkpoint archive as podman or the kubelet wrote it", archive.display())]
    Refused {
        /// The archive as given.
        archive: PathBuf,
        /// The entry's path as recorded (or the position it would take).
        entry: String,
        /// Offset of its header in the decompressed tar stream.
        offset: u64,
        /// Why.
        why: Refusal,
    },
    /// The archive ends early.
    #[error("{}: truncated: it ends inside {entry} (offset {offset}); copy the whole archive again (its size must match the original's)", archive.display())]
    Truncated {
        /// The archive as given.
        archive: PathBuf,
        /// The entry being read, or the end-of-archive blocks.
        entry: String,
        /// Offset of that entry's header in the decompressed tar stream.
        offset: u64,
    },
    /// The compressed stream is corrupt.
    #[error("{}: corrupt {} stream in {entry} (offset {offset}): {source}; the archive is damaged: export the checkpoint again", archive.display(), compression.as_str())]
    Corrupt {
        /// The archive as given.
        archive: PathBuf,
        /// The compression.
        compression: Compression,
        /// The entry being read.
        entry: String,
        /// Offset of its header in the decompressed tar stream.
        offset: u64,
        /// The decompressor's error.
        source: io::Error,
    },
    /// No `checkpoint/` in the archive.
    #[error("{}: no checkpoint/ among its {entries} entries: not a Podman or CRI-O/kubelet checkpoint archive; give the file podman container checkpoint --export or the kubelet's checkpoint API wrote, or a CRIU images folder", archive.display())]
    NoCheckpoint {
        /// The archive as given.
        archive: PathBuf,
        /// Entries read.
        entries: u64,
    },
}

/// What the stream held that netprobe reads.
#[derive(Debug, Clone)]
pub struct ArchiveRead {
    /// The archive as given.
    pub archive: PathBuf,
    /// Its compression.
    pub compression: Compression,
    /// Entries read (headers, extension headers included).
    pub entries: u64,
    /// Files under `checkpoint/`.
    pub checkpoint_files: u64,
    /// `(name, bytes)` of `checkpoint/inventory.img` and the network images, name without
    /// `checkpoint/`.
    pub images: Vec<(String, Vec<u8>)>,
    /// [`METADATA_FILES`] present, by name.
    pub metadata: BTreeMap<String, Vec<u8>>,
    /// The other top-level names (first 64), e.g. `bind.mounts`, `rootfs-diff.tar`.
    pub top_level: Vec<String>,
}

/// Whether `head` (the file's first bytes, at least 262 when the file has them) starts an
/// archive, and which.
pub fn sniff(head: &[u8]) -> Option<Compression> {
    if head.starts_with(&[0x1f, 0x8b]) {
        Some(Compression::Gzip)
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Some(Compression::Zstd)
    } else if head.get(257..262) == Some(b"ustar") {
        Some(Compression::Tar)
    } else {
        None
    }
}

/// The failure a decompressor reported, kept by [`Tap`] so a tar-level error can be told
/// from a compression one.
type Seen = Rc<RefCell<Option<io::ErrorKind>>>;

/// Counts the decompressed bytes and keeps the kind of the first read error.
struct Tap<R> {
    inner: R,
    pos: Rc<RefCell<u64>>,
    failed: Seen,
}

impl<R: Read> Read for Tap<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => {
                *self.pos.borrow_mut() += n as u64;
                Ok(n)
            }
            Err(e) => {
                self.failed.borrow_mut().get_or_insert(e.kind());
                Err(e)
            }
        }
    }
}

/// Reads the archive at `path` as a stream (see the module docs for what is kept and refused).
///
/// Errors: [`ArchiveError`]: `Open`, `NotAnArchive`, `Refused`, `Truncated`, `Corrupt`,
/// `NoCheckpoint`.
pub fn read_archive(path: &Path) -> Result<ArchiveRead, ArchiveError> {
    let open = |source| ArchiveError::Open {
        archive: path.to_path_buf(),
        source,
    };
    let mut file = BufReader::with_capacity(256 << 10, File::open(path).map_err(open)?);
    let head = file.fill_buf().map_err(open)?;
    let Some(compression) = sniff(head) else {
        return Err(ArchiveError::NotAnArchive {
            archive: path.to_path_buf(),
            magic: if head.is_empty() {
                "none: the file is empty".into()
            } else {
                hex::encode(&head[..head.len().min(8)])
            },
        });
    };
    let stream: Box<dyn Read> = match compression {
        Compression::Tar => Box::new(file),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(file)),
        Compression::Zstd => {
            Box::new(zstd::stream::read::Decoder::with_buffer(file).map_err(open)?)
        }
    };
    let pos = Rc::new(RefCell::new(0));
    let failed: Seen = Rc::default();
    let tap = Tap {
        inner: stream,
        pos: pos.clone(),
        failed: failed.clone(),
    };
    let mut walk = Walk {
        path,
        compression,
        failed,
        pos,
        out: ArchiveRead {
            archive: path.to_path_buf(),
            compression,
            entries: 0,
            checkpoint_files: 0,
            images: Vec::new(),
            metadata: BTreeMap::new(),
            top_level: Vec::new(),
        },
        saw_checkpoint: false,
        images_bytes: 0,
        declared: 0,
        next_header: 0,
        last: String::new(),
        long_name: None,
    };
    walk.run(tap)?;
    if !walk.saw_checkpoint {
        return Err(ArchiveError::NoCheckpoint {
            archive: path.to_path_buf(),
            entries: walk.out.entries,
        });
    }
    Ok(walk.out)
}

/// The state of one pass over the entries.
struct Walk<'a> {
    path: &'a Path,
    compression: Compression,
    failed: Seen,
    pos: Rc<RefCell<u64>>,
    out: ArchiveRead,
    saw_checkpoint: bool,
    images_bytes: u64,
    declared: u64,
    /// Where the next header starts: the end of the last entry's padded data.
    next_header: u64,
    /// The last entry met, for errors between entries.
    last: String,
    /// A GNU long name or PAX `path` for the next entry.
    long_name: Option<String>,
}

/// What to do with an entry's data.
enum Take {
    Skip,
    Image(String),
    Metadata(String),
    LongName(bool),
}

impl Walk<'_> {
    fn refused(&self, entry: &str, offset: u64, why: Refusal) -> ArchiveError {
        ArchiveError::Refused {
            archive: self.path.to_path_buf(),
            entry: entry.to_string(),
            offset,
            why,
        }
    }

    /// The error for an I/O failure while reading `entry` (header at `offset`): corrupt or
    /// truncated compressed data when the decompressor failed, else a bad tar header.
    fn io_error(&self, entry: &str, offset: u64, e: io::Error) -> ArchiveError {
        match *self.failed.borrow() {
            Some(io::ErrorKind::UnexpectedEof) => ArchiveError::Truncated {
                archive: self.path.to_path_buf(),
                entry: entry.to_string(),
                offset,
            },
            Some(_) if self.compression != Compression::Tar => ArchiveError::Corrupt {
                archive: self.path.to_path_buf(),
                compression: self.compression,
                entry: entry.to_string(),
                offset,
                source: e,
            },
            _ if e.kind() == io::ErrorKind::UnexpectedEof => ArchiveError::Truncated {
                archive: self.path.to_path_buf(),
                entry: entry.to_string(),
                offset,
            },
            _ => self.refused(entry, offset, Refusal::Header(e.to_string())),
        }
    }

    fn run<R: Read>(&mut self, tap: Tap<R>) -> Result<(), ArchiveError> {
        let mut ar = tar::Archive::new(tap);
        let entries = ar
            .entries()
            .map_err(|e| self.io_error("the first header", 0, e))?
            .raw(true);
        for entry in entries {
            let after = match self.last.is_empty() {
                true => "the first header".to_string(),
                false => format!("the header after {}", self.last),
            };
            let mut entry = entry.map_err(|e| self.io_error(&after, self.next_header, e))?;
            self.out.entries += 1;
            let offset = entry.raw_header_position();
            if self.out.entries > MAX_ARCHIVE_ENTRIES {
                return Err(self.refused(&after, offset, Refusal::TooManyEntries));
            }
            let take = self.classify(&entry, offset)?;
            let size = entry.size();
            let name = self.last.clone();
            let data = entry.raw_file_position();
            self.next_header = data + size.div_ceil(512) * 512;
            let kept = match take {
                Take::Skip => {
                    let got = io::copy(&mut entry, &mut io::sink())
                        .map_err(|e| self.io_error(&name, offset, e))?;
                    self.check_len(&name, offset, got, size)?;
                    continue;
                }
                _ => {
                    let mut v = Vec::with_capacity(size as usize);
                    let got = entry
                        .read_to_end(&mut v)
                        .map_err(|e| self.io_error(&name, offset, e))?;
                    self.check_len(&name, offset, got as u64, size)?;
                    v
                }
            };
            match take {
                Take::Image(n) => self.out.images.push((n, kept)),
                Take::Metadata(n) => {
                    self.out.metadata.insert(n, kept);
                }
                Take::LongName(pax) => self.long_name = self.ext_name(&name, offset, pax, &kept)?,
                Take::Skip => {}
            }
        }
        self.end_of_archive(ar.into_inner())
    }

    fn check_len(&self, entry: &str, offset: u64, got: u64, want: u64) -> Result<(), ArchiveError> {
        if got < want {
            return Err(ArchiveError::Truncated {
                archive: self.path.to_path_buf(),
                entry: entry.to_string(),
                offset,
            });
        }
        Ok(())
    }

    /// Checks one entry's header and says what to do with its data.
    fn classify<R: Read>(
        &mut self,
        entry: &tar::Entry<'_, R>,
        offset: u64,
    ) -> Result<Take, ArchiveError> {
        let header = entry.header();
        let raw = match self.long_name.take() {
            Some(n) => n,
            None => String::from_utf8_lossy(&header.path_bytes()).into_owned(),
        };
        self.last = raw.clone();
        let kind = header.entry_type();
        let size = header
            .entry_size()
            .map_err(|e| self.refused(&raw, offset, Refusal::Header(e.to_string())))?;
        let cap_check =
            |cap: u64, what: &'static str| over_cap(self.path, &raw, offset, size, cap, what);
        use tar::EntryType as T;
        match kind {
            T::GNULongName | T::XHeader => {
                cap_check(EXT_HEADER_CAP, "an extension header may hold")?;
                return Ok(Take::LongName(kind == T::XHeader));
            }
            T::XGlobalHeader => {
                cap_check(EXT_HEADER_CAP, "an extension header may hold")?;
                return Ok(Take::Skip);
            }
            T::Symlink | T::Link | T::GNULongLink => {
                let target = header
                    .link_name_bytes()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                let kind = if kind == T::Symlink {
                    "symbolic"
                } else {
                    "hard"
                };
                return Err(self.refused(&raw, offset, Refusal::Link { kind, target }));
            }
            T::Char => {
                return Err(self.refused(&raw, offset, Refusal::Special("character device")));
            }
            T::Block => return Err(self.refused(&raw, offset, Refusal::Special("block device"))),
            T::Fifo => return Err(self.refused(&raw, offset, Refusal::Special("FIFO"))),
            T::Regular | T::Continuous | T::Directory => {}
            other => {
                return Err(self.refused(
                    &raw,
                    offset,
                    Refusal::EntryType(other.as_byte() as char),
                ));
            }
        }
        let Some(path) = clean_path(&raw) else {
            return Err(self.refused(&raw, offset, Refusal::Escapes));
        };
        cap_check(MAX_ENTRY_BYTES, "one entry may declare")?;
        self.declared = self.declared.saturating_add(size);
        if self.declared > MAX_ARCHIVE_BYTES {
            return Err(self.refused(
                &raw,
                offset,
                Refusal::Oversized {
                    size: self.declared,
                    cap: MAX_ARCHIVE_BYTES,
                    what: "all entries may declare together",
                },
            ));
        }
        if path == "checkpoint" || path.starts_with("checkpoint/") {
            self.saw_checkpoint = true;
        }
        if kind == T::Directory {
            return Ok(Take::Skip);
        }
        if let Some(name) = path.strip_prefix("checkpoint/") {
            self.out.checkpoint_files += 1;
            if name.contains('/') || !is_network_image(name) {
                return Ok(Take::Skip);
            }
            cap_check(IMAGE_READ_CAP, "a CRIU network image may hold")?;
            if self.out.images.iter().any(|(n, _)| n == name) {
                return Err(self.refused(&raw, offset, Refusal::Duplicate));
            }
            self.images_bytes += size;
            if self.images_bytes > IMAGE_READ_CAP {
                return Err(self.refused(
                    &raw,
                    offset,
                    Refusal::Oversized {
                        size: self.images_bytes,
                        cap: IMAGE_READ_CAP,
                        what: "all the network images of a CRIU dump may hold together",
                    },
                ));
            }
            return Ok(Take::Image(name.to_string()));
        }
        if METADATA_FILES.contains(&path.as_str()) {
            cap_check(METADATA_CAP, "an engine metadata file may hold")?;
            if self.out.metadata.contains_key(&path) {
                return Err(self.refused(&raw, offset, Refusal::Duplicate));
            }
            return Ok(Take::Metadata(path));
        }
        if !path.contains('/') && self.out.top_level.len() < 64 {
            self.out.top_level.push(path);
        }
        Ok(Take::Skip)
    }

    /// The path a GNU long-name (`pax == false`: the name, NUL-terminated) or PAX extension
    /// header (`path=` record) gives the next entry.
    fn ext_name(
        &self,
        entry: &str,
        offset: u64,
        pax: bool,
        data: &[u8],
    ) -> Result<Option<String>, ArchiveError> {
        if !pax {
            let end = data.iter().position(|b| *b == 0).unwrap_or(data.len());
            return Ok(Some(String::from_utf8_lossy(&data[..end]).into_owned()));
        }
        let mut name = None;
        for rec in tar::PaxExtensions::new(data) {
            let rec =
                rec.map_err(|e| self.refused(entry, offset, Refusal::Header(e.to_string())))?;
            match rec.key() {
                Ok("path") => name = Some(String::from_utf8_lossy(rec.value_bytes()).into_owned()),
                Ok("size") => {
                    return Err(self.refused(
                        entry,
                        offset,
                        Refusal::Header("a PAX `size` record (an entry over 8 GiB)".into()),
                    ));
                }
                _ => {}
            }
        }
        Ok(name)
    }

    /// After the last entry: the end-of-archive blocks were read (else the archive is
    /// truncated), and what follows them is zeros up to the end of the stream.
    fn end_of_archive<R: Read>(&self, mut tap: Tap<R>) -> Result<(), ArchiveError> {
        let end = match self.last.is_empty() {
            true => "the end-of-archive blocks".to_string(),
            false => format!("the end-of-archive blocks after {}", self.last),
        };
        if *self.pos.borrow() < self.next_header + 512 {
            return Err(ArchiveError::Truncated {
                archive: self.path.to_path_buf(),
                entry: end,
                offset: self.next_header,
            });
        }
        let mut buf = vec![0u8; 64 << 10];
        let mut rest = 0u64;
        loop {
            let n = tap
                .read(&mut buf)
                .map_err(|e| self.io_error(&end, self.next_header, e))?;
            if n == 0 {
                return Ok(());
            }
            rest += n as u64;
            if rest > TRAILER_CAP || buf[..n].iter().any(|b| *b != 0) {
                return Err(self.refused(&end, self.next_header, Refusal::Trailing));
            }
        }
    }
}

/// [`Refusal::Oversized`] for `entry` when `size` is over `cap`.
fn over_cap(
    archive: &Path,
    entry: &str,
    offset: u64,
    size: u64,
    cap: u64,
    what: &'static str,
) -> Result<(), ArchiveError> {
    if size <= cap {
        return Ok(());
    }
    Err(ArchiveError::Refused {
        archive: archive.to_path_buf(),
        entry: entry.to_string(),
        offset,
        why: Refusal::Oversized { size, cap, what },
    })
}

/// The entry path without leading `./`, or `None` when it is absolute or has a `..`
/// component.
fn clean_path(raw: &str) -> Option<String> {
    if raw.starts_with('/') {
        return None;
    }
    let mut parts = Vec::new();
    for c in raw.split('/') {
        match c {
            "" | "." => {}
            ".." => return None,
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_cleaned_or_refused() {
        assert_eq!(
            clean_path("./checkpoint/netns-10.img").as_deref(),
            Some("checkpoint/netns-10.img")
        );
        assert_eq!(clean_path("checkpoint/").as_deref(), Some("checkpoint"));
        assert_eq!(clean_path("/etc/passwd"), None);
        assert_eq!(clean_path("checkpoint/../../x"), None);
    }

    #[test]
    fn sniffs_by_content() {
        assert_eq!(sniff(&[0x28, 0xb5, 0x2f, 0xfd, 4]), Some(Compression::Zstd));
        assert_eq!(sniff(&[0x1f, 0x8b, 8]), Some(Compression::Gzip));
        let mut t = vec![0u8; 512];
        t[257..262].copy_from_slice(b"ustar");
        assert_eq!(sniff(&t), Some(Compression::Tar));
        assert_eq!(sniff(b"PK\x03\x04"), None);
    }
}
