//! CRIU's image framing, checked strictly: magics, then size-prefixed protobuf entries.
//!
//! Facts (CRIU v4.2 source): `criu/image.c` `img_write_magic()` writes `IMG_COMMON_MAGIC`
//! then the image's own magic (from `criu/include/magic.h`), except for `inventory.img`,
//! which has only `INVENTORY_MAGIC`, and for raw images (`RAW_IMAGE_MAGIC` = 0: `ifaddr-`,
//! `route-`, `route6-`, `rule-`, `iptables-`, `ip6tables-`, `nftables-`), which have no magic
//! at all. `criu/protobuf.c` `do_pb_read_one()` then reads entries: a native-endian `u32`
//! size followed by that many bytes of protobuf payload, until end of file.

use std::path::{Path, PathBuf};

/// `IMG_COMMON_MAGIC` ("Sarov"): first `u32` of every protobuf image except the inventory.
pub const IMG_COMMON_MAGIC: u32 = 0x5456_4319;
/// `INVENTORY_MAGIC` ("Veliky Novgorod"): the only magic of `inventory.img`.
pub const INVENTORY_MAGIC: u32 = 0x5831_3116;
/// `NETDEV_MAGIC` ("Yaroslavl"): second `u32` of `netdev-<id>.img`.
pub const NETDEV_MAGIC: u32 = 0x5737_3951;
/// `NETNS_MAGIC` ("Dolgoprudny"): second `u32` of `netns-<id>.img`.
pub const NETNS_MAGIC: u32 = 0x5593_3752;

/// A malformed or unreadable image: the file, the byte offset where reading stopped, and why.
#[derive(Debug, thiserror::Error)]
#[error("{}: offset {offset}: {reason}", file.display())]
pub struct ImageError {
    /// The image file (as given).
    pub file: PathBuf,
    /// Byte offset in the file where the problem starts (0 for I/O errors).
    pub offset: u64,
    /// What is wrong (e.g. "entry size 4096 is larger than the 12 bytes left").
    pub reason: String,
}

impl ImageError {
    /// An error at `offset` of `file`.
    pub fn new(file: &Path, offset: usize, reason: impl Into<String>) -> ImageError {
        ImageError {
            file: file.to_path_buf(),
            offset: offset as u64,
            reason: reason.into(),
        }
    }
}

/// Reads `file` whole. Errors: [`ImageError`] at offset 0 with the I/O error.
pub fn read_file(file: &Path) -> Result<Vec<u8>, ImageError> {
    std::fs::read(file).map_err(|e| ImageError::new(file, 0, format!("cannot read: {e}")))
}

/// Native-endian `u32` at `off`, or an error naming `what` when fewer than 4 bytes are left.
pub(crate) fn u32_at(file: &Path, bytes: &[u8], off: usize, what: &str) -> Result<u32, ImageError> {
    match bytes.get(off..off + 4) {
        Some(b) => Ok(u32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        None => Err(ImageError::new(
            file,
            off,
            format!(
                "truncated {what}: {} of 4 bytes",
                bytes.len().saturating_sub(off)
            ),
        )),
    }
}

/// Checks the magics of a protobuf image: `IMG_COMMON_MAGIC` then `magic`, or, when `magic` is
/// [`INVENTORY_MAGIC`], that alone. Returns the offset of the first entry.
///
/// Errors: [`ImageError`] "wrong magic" (with expected and found values) or "truncated".
pub fn check_magic(file: &Path, bytes: &[u8], magic: u32) -> Result<usize, ImageError> {
    let mut off = 0;
    let mut expect = |want: u32, what: &str| -> Result<(), ImageError> {
        let got = u32_at(file, bytes, off, what)?;
        if got != want {
            return Err(ImageError::new(
                file,
                off,
                format!("wrong {what}: 0x{got:08x}, expected 0x{want:08x}"),
            ));
        }
        off += 4;
        Ok(())
    };
    if magic != INVENTORY_MAGIC {
        expect(IMG_COMMON_MAGIC, "IMG_COMMON_MAGIC")?;
    }
    expect(magic, "image magic")?;
    Ok(off)
}

/// Splits a protobuf image into its entries' payloads (with each payload's offset), after
/// checking its magics (see [`check_magic`]). An image with no entry gives an empty vector.
///
/// Errors: [`ImageError`] for a wrong magic, a size field cut short, or a size larger than
/// the bytes left in the file.
pub fn entries<'a>(
    file: &Path,
    bytes: &'a [u8],
    magic: u32,
) -> Result<Vec<(usize, &'a [u8])>, ImageError> {
    let mut off = check_magic(file, bytes, magic)?;
    let mut out = Vec::new();
    while off < bytes.len() {
        let size = u32_at(file, bytes, off, "entry size")? as usize;
        let start = off + 4;
        let left = bytes.len() - start;
        if size > left {
            return Err(ImageError::new(
                file,
                off,
                format!("entry size {size} is larger than the {left} bytes left in the file"),
            ));
        }
        out.push((start, &bytes[start..start + size]));
        off = start + size;
    }
    Ok(out)
}

/// Decodes every entry of a protobuf image as message `M` (see [`entries`]).
///
/// Errors: as [`entries`], plus "protobuf" with prost's reason at the entry's offset.
pub fn decode_all<M: prost::Message + Default>(
    file: &Path,
    bytes: &[u8],
    magic: u32,
) -> Result<Vec<M>, ImageError> {
    entries(file, bytes, magic)?
        .into_iter()
        .map(|(off, payload)| {
            M::decode(payload).map_err(|e| ImageError::new(file, off, format!("protobuf: {e}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(magic: u32, entries: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        if magic != INVENTORY_MAGIC {
            v.extend_from_slice(&IMG_COMMON_MAGIC.to_ne_bytes());
        }
        v.extend_from_slice(&magic.to_ne_bytes());
        for e in entries {
            v.extend_from_slice(&(e.len() as u32).to_ne_bytes());
            v.extend_from_slice(e);
        }
        v
    }

    #[test]
    fn splits_entries_and_checks_magic() {
        let f = Path::new("netdev-9.img");
        let img = image(NETDEV_MAGIC, &[b"ab", b"", b"xyz"]);
        let e = entries(f, &img, NETDEV_MAGIC).unwrap();
        assert_eq!(e, vec![(12, &b"ab"[..]), (18, &b""[..]), (22, &b"xyz"[..])]);
        let err = entries(f, &img, NETNS_MAGIC).unwrap_err();
        assert_eq!(err.offset, 4);
        assert!(
            err.to_string()
                .starts_with("netdev-9.img: offset 4: wrong image magic")
        );
        let mut bad = img.clone();
        bad[0] ^= 1;
        assert_eq!(entries(f, &bad, NETDEV_MAGIC).unwrap_err().offset, 0);
        let inv = image(INVENTORY_MAGIC, &[b"q"]);
        assert_eq!(
            entries(f, &inv, INVENTORY_MAGIC).unwrap(),
            vec![(8, &b"q"[..])]
        );
    }

    #[test]
    fn size_larger_than_file_names_offset() {
        let f = Path::new("netns-1.img");
        let mut img = image(NETNS_MAGIC, &[b"abc"]);
        img[8..12].copy_from_slice(&4096u32.to_ne_bytes());
        let err = entries(f, &img, NETNS_MAGIC).unwrap_err();
        assert_eq!(err.offset, 8);
        assert!(
            err.reason.contains("4096") && err.reason.contains("3 bytes left"),
            "{err}"
        );
    }

    #[test]
    fn every_truncation_is_an_error_or_a_shorter_image_never_a_panic() {
        let f = Path::new("netdev-1.img");
        let img = image(NETDEV_MAGIC, &[b"0123456789", b"ab"]);
        for cut in 0..img.len() {
            let r = entries(f, &img[..cut], NETDEV_MAGIC);
            // Only cuts on an entry boundary are well-formed (fewer entries).
            match cut {
                8 | 22 => assert!(r.is_ok(), "cut {cut}"),
                _ => {
                    let e = r.unwrap_err();
                    assert!(e.offset as usize <= cut, "cut {cut}: {e}");
                }
            }
            let _ = decode_all::<crate::images::pb::NetDeviceEntry>(f, &img[..cut], NETDEV_MAGIC);
        }
    }
}
