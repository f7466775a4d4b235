//! CRIU's image framing, checked strictly: magics, then size-prefixed protobuf entries.
//!
//! Facts (CRIU v4.2 source): `criu/image.c` `img_write_magic()` writes `IMG_COMMON_MAGIC`
//! then the image's own magic (from `criu/include/magic.h`), except for `inventory.img`,
//! which has only `INVENTORY_MAGIC`, and for raw images (`RAW_IMAGE_MAGIC` = 0: `ifaddr-`,
//! `route-`, `route6-`, `rule-`, `iptables-`, `ip6tables-`, `nftables-`), which have no magic
//! at all. `criu/protobuf.c` `do_pb_read_one()` then reads entries: a native-endian `u32`
//! size followed by that many bytes of protobuf payload, until end of file.
//!
//! Bounds: an image is read only when it is a regular file (not a symlink, device or FIFO) of
//! at most [`IMAGE_READ_CAP`] bytes with at most [`MAX_ENTRIES`] entries, and an entry of a message with proto2 `required` fields
//! must carry every one of them ([`decode_all_required`]): a zero-length entry (zero padding,
//! 4 bytes each) is refused, not decoded as a device with every field 0.

use std::path::{Path, PathBuf};

use crate::evidence::fsio::{BoundedReadError, Symlinks, read_bounded};

/// The largest image file `netprobe images` reads: 16 MiB. CRIU's network images are metadata
/// (a netdev entry is ~2 KiB with its sysctls, a route ~100 bytes: a thousand devices or tens
/// of thousands of routes are a few MiB), so a larger file is not a real image and is refused
/// instead of filling memory (decoded, an image takes at most some 30 times its size).
pub const IMAGE_READ_CAP: u64 = 16 << 20;

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

/// Reads the image `file` whole: a regular file (a symlink is not followed) of at most
/// [`IMAGE_READ_CAP`] bytes.
///
/// Errors: [`ImageError`] at offset 0 for an I/O error or a file that is not regular (a device,
/// FIFO, folder or symlink: CRIU writes regular files), at offset [`IMAGE_READ_CAP`] for a
/// larger file.
pub fn read_file(file: &Path) -> Result<Vec<u8>, ImageError> {
    read_bounded(file, IMAGE_READ_CAP, Symlinks::Refuse).map_err(|e| match e {
        BoundedReadError::TooLarge { .. } => ImageError::new(
            file,
            IMAGE_READ_CAP as usize,
            format!(
                "{e} (16 MiB, far above any real CRIU network image): not an image CRIU wrote; \
                 give the folder of an unmodified dump"
            ),
        ),
        BoundedReadError::NotRegular { .. } => ImageError::new(
            file,
            0,
            format!("{e}: CRIU writes its images as regular files; give the folder of an unmodified dump"),
        ),
        BoundedReadError::Io(_) => ImageError::new(file, 0, e.to_string()),
    })
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

/// The most entries [`decode_entries`] takes from one image: 65536 (a network namespace with
/// more devices than that is not a container's). With [`IMAGE_READ_CAP`] this bounds the memory
/// a crafted image can make netprobe use.
pub const MAX_ENTRIES: usize = 65_536;

/// The entry at `off` (after the magics): `(payload offset, payload, next offset)`.
///
/// Errors: [`ImageError`] for a size field cut short or a size larger than the bytes left.
fn entry_at<'a>(
    file: &Path,
    bytes: &'a [u8],
    off: usize,
) -> Result<(usize, &'a [u8], usize), ImageError> {
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
    Ok((start, &bytes[start..start + size], start + size))
}

/// Splits a protobuf image into its entries' payloads (with each payload's offset), after
/// checking its magics (see [`check_magic`]). An image with no entry gives an empty vector.
///
/// Errors: [`ImageError`] for a wrong magic, a size field cut short, a size larger than the
/// bytes left in the file, or more than `max` entries.
pub fn entries<'a>(
    file: &Path,
    bytes: &'a [u8],
    magic: u32,
    max: usize,
) -> Result<Vec<(usize, &'a [u8])>, ImageError> {
    let mut out = Vec::new();
    walk(file, bytes, magic, max, |start, _, payload| {
        out.push((start, payload));
        Ok(())
    })?;
    Ok(out)
}

/// Calls `f(start, size field offset, payload)` for each entry after the magic, in file order,
/// stopping at the first error (framing, more than `max` entries, or `f`'s own).
fn walk<'a>(
    file: &Path,
    bytes: &'a [u8],
    magic: u32,
    max: usize,
    mut f: impl FnMut(usize, usize, &'a [u8]) -> Result<(), ImageError>,
) -> Result<(), ImageError> {
    let mut off = check_magic(file, bytes, magic)?;
    let mut n = 0;
    while off < bytes.len() {
        if n == max {
            return Err(too_many(file, off, max));
        }
        let (start, payload, next) = entry_at(file, bytes, off)?;
        f(start, off, payload)?;
        n += 1;
        off = next;
    }
    Ok(())
}

fn too_many(file: &Path, off: usize, max: usize) -> ImageError {
    let reason = if max == 1 {
        "a second entry: this image holds exactly one (zero padding or a damaged image)".into()
    } else {
        format!("more than {max} entries (not an image CRIU wrote for a container's namespace)")
    };
    ImageError::new(file, off, reason)
}

/// Decodes every entry of a protobuf image as message `M` (at most [`MAX_ENTRIES`]).
///
/// Errors: as [`entries`], plus "protobuf" with prost's reason at the entry's offset.
pub fn decode_all<M: prost::Message + Default>(
    file: &Path,
    bytes: &[u8],
    magic: u32,
) -> Result<Vec<M>, ImageError> {
    decode_entries(file, bytes, magic, &[], MAX_ENTRIES)
}

/// Decodes every entry of a protobuf image as message `M`, like [`decode_all`], after checking
/// that each entry carries every top-level field of `required` (`(field number, name)`: the
/// proto2 `required` fields of `M`'s `.proto`; prost fills a missing one with 0 silently).
///
/// Errors: as [`decode_all`], plus "entry of N bytes lacks the required field NAME" at the
/// entry's size field (a zero-length entry — e.g. zero padding — lacks them all).
pub fn decode_all_required<M: prost::Message + Default>(
    file: &Path,
    bytes: &[u8],
    magic: u32,
    required: &[(u32, &str)],
) -> Result<Vec<M>, ImageError> {
    decode_entries(file, bytes, magic, required, MAX_ENTRIES)
}

/// Decodes the entries of a protobuf image one by one, in file order, so the first problem is
/// the one reported: framing ([`entries`]), more than `max` entries, prost's decoding, a
/// missing `required` field (see [`decode_all_required`]).
///
/// Errors: [`ImageError`] at the offset of the first problem.
pub fn decode_entries<M: prost::Message + Default>(
    file: &Path,
    bytes: &[u8],
    magic: u32,
    required: &[(u32, &str)],
    max: usize,
) -> Result<Vec<M>, ImageError> {
    let mut out = Vec::new();
    walk(file, bytes, magic, max, |start, off, payload| {
        let m = M::decode(payload).map_err(|e| {
            let at = start + bad_key_offset(payload).unwrap_or(0);
            ImageError::new(file, at, format!("protobuf: {e}"))
        })?;
        let tags = top_level_tags(payload);
        if let Some((_, name)) = required.iter().find(|(n, _)| !tags.contains(n)) {
            return Err(ImageError::new(
                file,
                off,
                format!(
                    "entry of {} bytes lacks the required field `{name}` (zero padding or a \
                     damaged image; CRIU always writes it)",
                    payload.len()
                ),
            ));
        }
        out.push(m);
        Ok(())
    })?;
    Ok(out)
}

/// A protobuf varint at `*off` of `b`, advancing `*off`; `None` when cut short or over 10 bytes.
pub(crate) fn varint(b: &[u8], off: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..70).step_by(7) {
        let byte = *b.get(*off)?;
        *off += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The offset in `payload` of the first field key prost cannot read past: a key whose wire
/// type is not one protobuf has (3 and 4, groups CRIU never writes; 6, 7), or a key, varint or
/// length cut short; looked for at the top level, then inside each length-delimited field that
/// itself walks as a message up to such a key (the innermost one wins). `None` when no such key
/// is found (prost's error is then elsewhere: the entry's start is named).
fn bad_key_offset(payload: &[u8]) -> Option<usize> {
    let mut off = 0;
    while off < payload.len() {
        let key_at = off;
        let key = varint(payload, &mut off)?;
        let len = match key & 7 {
            0 => varint(payload, &mut off).map(|_| 0),
            1 => Some(8),
            2 => {
                let l = varint(payload, &mut off).and_then(|l| usize::try_from(l).ok());
                if let Some(inner) = l.and_then(|l| payload.get(off..off.checked_add(l)?))
                    && let Some(i) = bad_key_offset(inner)
                {
                    return Some(off + i);
                }
                l
            }
            5 => Some(4),
            _ => return Some(key_at),
        };
        match len.and_then(|l| off.checked_add(l)) {
            Some(next) if next <= payload.len() => off = next,
            _ => return Some(key_at),
        }
    }
    None
}

/// The field numbers present at the top level of the protobuf `payload` (wire types 0, 1, 2,
/// 5), in order; scanning stops at the first byte it cannot read (prost has already accepted
/// the payload, so that does not happen for a decoded entry).
fn top_level_tags(payload: &[u8]) -> Vec<u32> {
    let mut off = 0;
    let mut out = Vec::new();
    while off < payload.len() {
        let Some(key) = varint(payload, &mut off) else {
            break;
        };
        let skip = match key & 7 {
            0 => varint(payload, &mut off).map(|_| 0),
            1 => Some(8),
            2 => varint(payload, &mut off).and_then(|l| usize::try_from(l).ok()),
            5 => Some(4),
            _ => None,
        };
        let Some(skip) = skip else { break };
        out.push((key >> 3) as u32);
        off = off.saturating_add(skip);
    }
    out
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
    fn a_bad_wire_type_is_named_at_its_byte() {
        // field 1 varint 5; field 2 length 3 holding (field 1 varint 1, then a key of wire type 7).
        let payload: &[u8] = &[0x08, 0x05, 0x12, 0x03, 0x08, 0x01, 0x0f];
        assert_eq!(bad_key_offset(payload), Some(6));
        // A top-level key of wire type 6 at byte 2.
        assert_eq!(bad_key_offset(&[0x08, 0x05, 0x0e, 0x00]), Some(2));
        assert_eq!(bad_key_offset(&[0x08, 0x05]), None);
        let f = Path::new("netdev-9.img");
        let img = image(NETDEV_MAGIC, &[&[0x08, 0x05, 0x0e, 0x00]]);
        let e = decode_all::<crate::images::pb::NetDeviceEntry>(f, &img, NETDEV_MAGIC).unwrap_err();
        // magics (8) + size (4) + 2 bytes into the payload.
        assert_eq!(e.offset, 14, "{e}");
    }

    #[test]
    fn splits_entries_and_checks_magic() {
        let f = Path::new("netdev-9.img");
        let img = image(NETDEV_MAGIC, &[b"ab", b"", b"xyz"]);
        let e = entries(f, &img, NETDEV_MAGIC, MAX_ENTRIES).unwrap();
        assert_eq!(e, vec![(12, &b"ab"[..]), (18, &b""[..]), (22, &b"xyz"[..])]);
        let err = entries(f, &img, NETNS_MAGIC, MAX_ENTRIES).unwrap_err();
        assert_eq!(err.offset, 4);
        assert!(
            err.to_string()
                .starts_with("netdev-9.img: offset 4: wrong image magic")
        );
        let mut bad = img.clone();
        bad[0] ^= 1;
        assert_eq!(
            entries(f, &bad, NETDEV_MAGIC, MAX_ENTRIES)
                .unwrap_err()
                .offset,
            0
        );
        let inv = image(INVENTORY_MAGIC, &[b"q"]);
        assert_eq!(
            entries(f, &inv, INVENTORY_MAGIC, MAX_ENTRIES).unwrap(),
            vec![(8, &b"q"[..])]
        );
    }

    #[test]
    fn size_larger_than_file_names_offset() {
        let f = Path::new("netns-1.img");
        let mut img = image(NETNS_MAGIC, &[b"abc"]);
        img[8..12].copy_from_slice(&4096u32.to_ne_bytes());
        let err = entries(f, &img, NETNS_MAGIC, MAX_ENTRIES).unwrap_err();
        assert_eq!(err.offset, 8);
        assert!(
            err.reason.contains("4096") && err.reason.contains("3 bytes left"),
            "{err}"
        );
    }

    #[test]
    fn a_zero_length_entry_of_a_message_with_required_fields_is_refused() {
        use crate::images::pb::NetDeviceEntry;
        use prost::Message;
        const REQ: &[(u32, &str)] = &[(1, "type"), (2, "ifindex"), (5, "name")];
        let f = Path::new("netdev-9.img");
        let dev = NetDeviceEntry {
            ifindex: 1,
            name: "lo".into(),
            ..Default::default()
        }
        .encode_to_vec();
        let good = image(NETDEV_MAGIC, &[&dev]);
        let d: Vec<NetDeviceEntry> = decode_all_required(f, &good, NETDEV_MAGIC, REQ).unwrap();
        assert_eq!(d[0].name, "lo");
        // `truncate -s` of a real image: zero bytes after the last entry.
        let mut padded = good.clone();
        padded.resize(good.len() + 4096, 0);
        let e = decode_all_required::<NetDeviceEntry>(f, &padded, NETDEV_MAGIC, REQ).unwrap_err();
        assert_eq!(e.offset, good.len() as u64, "{e}");
        assert!(
            e.reason
                .contains("entry of 0 bytes lacks the required field `type`"),
            "{e}"
        );
        // Without the check, the padding decodes as 1024 devices with every field 0.
        assert_eq!(
            decode_all::<NetDeviceEntry>(f, &padded, NETDEV_MAGIC)
                .unwrap()
                .len(),
            1025
        );
        // prost always writes required fields, so this entry is written by hand: ifindex only.
        let no_name = vec![0x10u8, 0x01];
        let e = decode_all_required::<NetDeviceEntry>(
            f,
            &image(NETDEV_MAGIC, &[&dev, &no_name]),
            NETDEV_MAGIC,
            &[(2, "ifindex"), (5, "name")],
        )
        .unwrap_err();
        assert!(e.reason.contains("`name`") && e.offset == 8 + 4 + dev.len() as u64);
    }

    #[test]
    fn read_file_refuses_a_device_a_symlink_and_a_file_over_the_cap() {
        let d = tempfile::tempdir().unwrap();
        let z = d.path().join("netns-9.img");
        std::os::unix::fs::symlink("/dev/zero", &z).unwrap();
        let e = read_file(&z).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("offset 0: it is a symbolic link, not a regular file: CRIU writes its images as regular files; give the folder of an unmodified dump"),
            "{e}"
        );
        let e = read_file(Path::new("/dev/zero")).unwrap_err();
        assert!(e.reason.contains("a character device"), "{e}");
        let big = d.path().join("netdev-9.img");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(IMAGE_READ_CAP + 1)
            .unwrap();
        let e = read_file(&big).unwrap_err();
        assert_eq!(e.offset, IMAGE_READ_CAP);
        assert!(e.reason.contains("cap of 16777216 bytes (16 MiB"), "{e}");
    }

    #[test]
    fn every_truncation_is_an_error_or_a_shorter_image_never_a_panic() {
        let f = Path::new("netdev-1.img");
        let img = image(NETDEV_MAGIC, &[b"0123456789", b"ab"]);
        for cut in 0..img.len() {
            let r = entries(f, &img[..cut], NETDEV_MAGIC, MAX_ENTRIES);
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
