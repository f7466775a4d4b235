//! What a dump's `inventory.img` says of CRIU's network lock: the method (`network_lock_method`,
//! field 11 of `inventory_entry`, CRIU's `opts.network_lock_method`: 0 iptables, 1 nftables,
//! 2 skip). CRIU's logs do not name the method (dump.log says only "net: Lock
//! network"; measured with CRIU 4.3, both methods), and its restore takes the method from this
//! image ("Network lock method from dump will be used in restore"), so this is the record.

use super::format::{self, INVENTORY_MAGIC, ImageError};
use std::path::Path;

/// CRIU's network lock method as the dump recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockMethod {
    /// `iptables` (CRIU's default): chain `CRIU` in table `filter`, jumps from INPUT/OUTPUT.
    Iptables,
    /// `nftables`: table `inet CRIU-<run id>`.
    Nftables,
    /// `skip`: CRIU did not lock the network.
    Skip,
    /// Field 11 absent: a CRIU older than the lock methods (3.15 and before), iptables.
    NotRecorded,
    /// A value CRIU 4.x does not write.
    Other(u64),
}

impl LockMethod {
    /// The fact's text, e.g. `nftables (inventory.img network_lock_method 1)`.
    pub fn describe(&self) -> String {
        match self {
            LockMethod::Iptables => "iptables (inventory.img network_lock_method 0)".into(),
            LockMethod::Nftables => "nftables (inventory.img network_lock_method 1)".into(),
            LockMethod::Skip => {
                "skip: the network was not locked (inventory.img network_lock_method 2)".into()
            }
            LockMethod::NotRecorded => {
                "not recorded in inventory.img (a CRIU before --network-lock: iptables)".into()
            }
            LockMethod::Other(v) => format!("unknown: inventory.img network_lock_method {v}"),
        }
    }
}

/// The fact `criu_network_lock_method` of a rung or slot verb: [`LockMethod::describe`] of
/// [`lock_method`] of `dir`, or `not read: …` with the image error.
pub fn lock_method_fact(dir: &Path) -> String {
    match lock_method(dir) {
        Ok(m) => m.describe(),
        Err(e) => format!("not read: {e}"),
    }
}

/// Reads `dir/inventory.img` (one entry after `INVENTORY_MAGIC`) and returns the lock method.
///
/// Errors: [`ImageError`] when the file cannot be read, its magic or framing is wrong, or it
/// does not hold exactly one entry.
pub fn lock_method(dir: &Path) -> Result<LockMethod, ImageError> {
    let file = dir.join("inventory.img");
    let bytes = format::read_file(&file)?;
    let entries = format::entries(&file, &bytes, INVENTORY_MAGIC, 1)?;
    let Some((_, payload)) = entries.first() else {
        return Err(ImageError::new(&file, bytes.len(), "no inventory entry"));
    };
    Ok(match top_level_varint(payload, 11) {
        None => LockMethod::NotRecorded,
        Some(0) => LockMethod::Iptables,
        Some(1) => LockMethod::Nftables,
        Some(2) => LockMethod::Skip,
        Some(v) => LockMethod::Other(v),
    })
}

/// The value of the last top-level varint field `field` of a protobuf payload; `None` when
/// absent or the payload cannot be walked to it.
fn top_level_varint(payload: &[u8], field: u64) -> Option<u64> {
    let mut off = 0;
    let mut found = None;
    while off < payload.len() {
        let key = format::varint(payload, &mut off)?;
        match key & 7 {
            0 => {
                let v = format::varint(payload, &mut off)?;
                if key >> 3 == field {
                    found = Some(v);
                }
            }
            1 => off += 8,
            2 => off += usize::try_from(format::varint(payload, &mut off)?).ok()?,
            5 => off += 4,
            _ => return None,
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inventory CRIU 4.3 wrote for `dump --network-lock nftables` (measured), method byte
    /// at 0x2c.
    const NFT: &[u8] = &[
        0x16, 0x31, 0x31, 0x58, 0x50, 0, 0, 0, 0x08, 0x02, 0x10, 0x01, 0x1a, 0x18, 0x08, 0x01,
        0x10, 0x01, 0x18, 0x01, 0x20, 0x01, 0x28, 0x01, 0x30, 0x02, 0x38, 0x03, 0x40, 0x04, 0x48,
        0x06, 0x50, 0x07, 0x58, 0x08, 0x60, 0x05, 0x20, 0x01, 0x28, 0x01, 0x30, 0x00, 0x58, 0x01,
        0x62, 0x00, 0x6a, 0x24, b'd', b'0', b'4', b'1', b'3', b'e', b'2', b'e', b'-', b'1', b'5',
        b'6', b'c', b'-', b'4', b'2', b'4', b'8', b'-', b'9', b'f', b'3', b'd', b'-', b'4', b'd',
        b'd', b'e', b'5', b'4', b'e', b'd', b'f', b'd', b'2', b'6', 0x78, 0x00,
    ];

    #[test]
    fn reads_the_method_criu_recorded() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("inventory.img"), NFT).unwrap();
        assert_eq!(lock_method(d.path()).unwrap(), LockMethod::Nftables);
        let mut ipt = NFT.to_vec();
        ipt[0x2d] = 0;
        std::fs::write(d.path().join("inventory.img"), &ipt).unwrap();
        assert_eq!(lock_method(d.path()).unwrap(), LockMethod::Iptables);
        assert!(lock_method(&d.path().join("none")).is_err());
    }
}
