//! A disk image's partition table and filesystems (`partx`, `blkid -p`): which partition holds
//! the root filesystem a slot mounts (the profile's `image.partition`), found or named.

use std::path::Path;
use std::process::Command;

use crate::proc::TreeError;
use crate::slot::resources::mounts::bounded;

/// Why the partition table of an image could not be read, or no partition matches.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    /// `partx` could not run.
    #[error("cannot run partx (util-linux): {0}")]
    Partx(#[source] TreeError),
    /// `partx` failed for another reason than a missing table (its stderr).
    #[error("partx {}: {stderr}", file.display())]
    PartxFailed {
        /// The image file.
        file: std::path::PathBuf,
        /// partx's stderr, trimmed.
        stderr: String,
    },
    /// A number or label was given for an image without a partition table.
    #[error("image {} has no partition table, but image.partition is {sel:?}; remove image.partition (the whole image is one filesystem)", file.display())]
    NoTable {
        /// The image file.
        file: std::path::PathBuf,
        /// The profile's selection.
        sel: Partition,
    },
    /// No partition matches the selection (the listing names them all).
    #[error("image {}: no partition matches {sel:?} (partitions: {listing}); set image.partition in the profile to a partition number or GPT name", file.display())]
    NoMatch {
        /// The image file.
        file: std::path::PathBuf,
        /// The profile's selection.
        sel: Partition,
        /// Each partition: number, name, size, filesystem.
        listing: String,
    },
}

/// Which partition of a disk image holds the root filesystem (the profile's `image.partition`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Partition {
    /// Find it: the whole file when it has no partition table; else the partition with a Linux
    /// filesystem (ext2/3/4, xfs, btrfs by `blkid -p`) whose GPT type is an x86-64 root
    /// (4f68bce3-…), else the largest partition with a Linux filesystem.
    Auto,
    /// Partition number `N` (1-based, as `partx` and `/dev/loopXpN` count).
    Number(u32),
    /// The partition whose GPT name (partition label) is this, e.g. `root`.
    Label(String),
}

/// One partition of a disk image, from `partx --bytes` (util-linux).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartitionInfo {
    /// 1-based partition number.
    pub number: u32,
    /// Byte offset of its first sector in the image.
    pub start: u64,
    /// Size in bytes.
    pub size: u64,
    /// GPT partition name (label); empty for MBR or unnamed.
    pub name: String,
    /// Partition type: GPT type GUID (lower case) or MBR type (e.g. `0x83`).
    pub type_id: String,
}

/// GPT type GUID of a Linux filesystem partition.
pub const GPT_LINUX_FS: &str = "0fc63daf-8483-4772-8e79-3d69d8477de4";
/// GPT type GUID of an x86-64 root partition (Discoverable Partitions Specification).
pub const GPT_ROOT_X86_64: &str = "4f68bce3-e8cd-4db1-96e7-fbcaf984b709";
const LINUX_FS: [&str; 5] = ["ext4", "ext3", "ext2", "xfs", "btrfs"];

/// The partitions of a disk image file (`partx -g -b -o NR,START,SIZE,TYPE,NAME`; START in
/// 512-byte sectors). Empty when the file has no partition table (a bare filesystem).
///
/// Errors: partx could not run, or failed for another reason than a missing table.
pub fn partitions(file: &Path) -> Result<Vec<PartitionInfo>, PartitionError> {
    let out = bounded(
        Command::new("partx")
            .args(["-g", "-b", "-P", "-o", "NR,START,SIZE,TYPE,NAME"])
            .arg(file),
    )
    .map_err(PartitionError::Partx)?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("failed to read partition table") {
            return Ok(Vec::new());
        }
        return Err(PartitionError::PartxFailed {
            file: file.to_path_buf(),
            stderr: err.trim().to_string(),
        });
    }
    Ok(parse_partx_pairs(&String::from_utf8_lossy(&out.stdout)))
}

/// Parses `partx -P -o NR,START,SIZE,TYPE,NAME` lines (`KEY="value"` pairs; START in 512-byte
/// sectors, SIZE in bytes with `-b`). Lines that do not parse are skipped.
pub fn parse_partx_pairs(text: &str) -> Vec<PartitionInfo> {
    let mut v = Vec::new();
    for line in text.lines() {
        let mut f = std::collections::HashMap::new();
        let mut rest = line.trim();
        while let Some(eq) = rest.find("=\"") {
            let key = rest[..eq].trim().to_string();
            let after = &rest[eq + 2..];
            let Some(end) = after.find('"') else { break };
            f.insert(key, after[..end].to_string());
            rest = &after[end + 1..];
        }
        let num = |k: &str| f.get(k).and_then(|s| s.parse::<u64>().ok());
        if let (Some(nr), Some(start), Some(size)) = (num("NR"), num("START"), num("SIZE")) {
            v.push(PartitionInfo {
                number: nr as u32,
                start: start * 512,
                size,
                name: f.get("NAME").cloned().unwrap_or_default(),
                type_id: f.get("TYPE").cloned().unwrap_or_default().to_lowercase(),
            });
        }
    }
    v
}

/// The filesystem type at byte `offset` of `file` (`blkid -p -O offset -s TYPE`), if any.
pub fn probe_fstype(file: &Path, offset: u64) -> Option<String> {
    let out = bounded(
        Command::new("blkid")
            .args(["-p", "-O", &offset.to_string(), "-o", "value", "-s", "TYPE"])
            .arg(file),
    )
    .ok()?;
    let t = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!t.is_empty()).then_some(t)
}

fn describe(parts: &[PartitionInfo], fstypes: &[Option<String>]) -> String {
    parts
        .iter()
        .zip(fstypes)
        .map(|(p, t)| {
            format!(
                "{} (name {:?}, {} MiB, {})",
                p.number,
                p.name,
                p.size >> 20,
                t.as_deref().unwrap_or("no filesystem")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Picks the partition `sel` names among `parts` (with `fstypes[i]` the probed filesystem of
/// `parts[i]`). None means the whole file (no partition table and `sel` is `Auto`).
///
/// Errors (each lists the image's partitions and says to set `image.partition` in the profile):
/// a number or label that does not exist; `Auto` with no partition holding a Linux filesystem;
/// a number or label on an image without a partition table.
pub fn select_partition<'a>(
    file: &Path,
    parts: &'a [PartitionInfo],
    fstypes: &[Option<String>],
    sel: &Partition,
) -> Result<Option<&'a PartitionInfo>, PartitionError> {
    if parts.is_empty() {
        return match sel {
            Partition::Auto => Ok(None),
            other => Err(PartitionError::NoTable {
                file: file.to_path_buf(),
                sel: other.clone(),
            }),
        };
    }
    let listing = describe(parts, fstypes);
    let found = match sel {
        Partition::Number(n) => parts.iter().find(|p| p.number == *n),
        Partition::Label(l) => parts.iter().find(|p| &p.name == l),
        Partition::Auto => {
            let linux: Vec<(&PartitionInfo, bool)> = parts
                .iter()
                .zip(fstypes)
                .filter(|(_, t)| t.as_deref().is_some_and(|t| LINUX_FS.contains(&t)))
                .map(|(p, _)| (p, p.type_id == GPT_ROOT_X86_64))
                .collect();
            linux
                .iter()
                .find(|(_, root)| *root)
                .or_else(|| linux.iter().max_by_key(|(p, _)| p.size))
                .map(|(p, _)| *p)
        }
    };
    found.map(Some).ok_or_else(|| PartitionError::NoMatch {
        file: file.to_path_buf(),
        sel: sel.clone(),
        listing,
    })
}

#[cfg(test)]
mod partition_tests {
    use super::*;

    const PARTX: &str = "NR=\"1\" START=\"2048\" SIZE=\"33554432\" TYPE=\"c12a7328-f81f-11d2-ba4b-00a0c93ec93b\" NAME=\"EFI\"\nNR=\"2\" START=\"67584\" SIZE=\"734003200\" TYPE=\"0FC63DAF-8483-4772-8E79-3D69D8477DE4\" NAME=\"root\"\nNR=\"3\" START=\"2000000\" SIZE=\"1048576\" TYPE=\"0fc63daf-8483-4772-8e79-3d69d8477de4\" NAME=\"a b\"\n";

    fn parts() -> Vec<PartitionInfo> {
        parse_partx_pairs(PARTX)
    }

    #[test]
    fn parses_partx_pairs() {
        let p = parts();
        assert_eq!(p.len(), 3);
        assert_eq!(p[1].number, 2);
        assert_eq!(p[1].start, 67584 * 512);
        assert_eq!(p[1].size, 734003200);
        assert_eq!(p[1].name, "root");
        assert_eq!(p[1].type_id, GPT_LINUX_FS);
        assert_eq!(p[2].name, "a b");
    }

    #[test]
    fn selects_by_number_label_and_auto() {
        let p = parts();
        let t = vec![
            Some("vfat".to_string()),
            Some("ext4".into()),
            Some("ext4".into()),
        ];
        let f = Path::new("/x.raw");
        let n = |s: &Partition| select_partition(f, &p, &t, s).unwrap().map(|p| p.number);
        assert_eq!(n(&Partition::Number(1)), Some(1));
        assert_eq!(n(&Partition::Label("root".into())), Some(2));
        assert_eq!(n(&Partition::Auto), Some(2), "largest Linux filesystem");
        let mut p2 = p.clone();
        p2[2].type_id = GPT_ROOT_X86_64.into();
        assert_eq!(
            select_partition(f, &p2, &t, &Partition::Auto)
                .unwrap()
                .map(|p| p.number),
            Some(3),
            "an x86-64 root type wins"
        );
    }

    #[test]
    fn bad_selection_names_partitions_and_fix() {
        let p = parts();
        let t = vec![Some("vfat".to_string()), None, None];
        let f = Path::new("/x.raw");
        for sel in [
            Partition::Number(9),
            Partition::Label("nope".into()),
            Partition::Auto,
        ] {
            let e = select_partition(f, &p, &t, &sel).unwrap_err().to_string();
            assert!(
                e.contains("image.partition") && e.contains("1 (name \"EFI\""),
                "{e}"
            );
        }
        assert_eq!(
            select_partition(f, &[], &[], &Partition::Auto).unwrap(),
            None
        );
        let e = select_partition(f, &[], &[], &Partition::Number(2))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no partition table"), "{e}");
    }
}
