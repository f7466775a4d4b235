//! Mount points of this process's mount namespace, from `/proc/self/mountinfo`.

use std::path::{Path, PathBuf};

/// Mount points of this mount namespace (`/proc/self/mountinfo`, field 5, with the kernel's
/// octal escapes such as `\040` for a space decoded), in the kernel's order. Empty when the file
/// cannot be read.
pub fn mount_points() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(unescape(m)))
        .collect()
}

/// Mount points at or below `dir` (absolute and canonical), deepest first (most path
/// components first), each once: the order in which everything under a folder is unmounted.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = mount_points()
        .into_iter()
        .filter(|m| m.starts_with(dir))
        .collect();
    out.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    out.dedup();
    out
}

/// Unmounts everything at or below `dir`, deepest first ([`mounts_under`]), each mount point
/// with `unmount` (the caller's policy: a lazy detach, or an unmount that retries `EBUSY`).
/// Returns the mount points `unmount` released and the errors it returned, in that order.
pub fn unmount_under<E>(
    dir: &Path,
    mut unmount: impl FnMut(&Path) -> Result<(), E>,
) -> (Vec<PathBuf>, Vec<E>) {
    let (mut done, mut errors) = (Vec::new(), Vec::new());
    for m in mounts_under(dir) {
        match unmount(&m) {
            Ok(()) => done.push(m),
            Err(e) => errors.push(e),
        }
    }
    (done, errors)
}

/// The `upperdir` of the overlay mounted on top at `mount_point` (the last mountinfo line with
/// that mount point, of filesystem type `overlay`), from `/proc/self/mountinfo`. `None` when
/// nothing, or something other than an overlay, is mounted there, or the file cannot be read.
pub fn overlay_upper(mount_point: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    overlay_upper_in(&text, mount_point)
}

/// [`overlay_upper`] over a mountinfo text (`ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS
/// [OPTIONAL…] - FSTYPE SOURCE SUPER_OPTIONS`, proc(5)).
fn overlay_upper_in(text: &str, mount_point: &Path) -> Option<PathBuf> {
    overlay_options_in(text, mount_point)?
        .split(',')
        .find_map(|o| o.strip_prefix("upperdir="))
        .map(|u| PathBuf::from(unescape(u)))
}

/// Whether the overlay mounted on top at `mount_point` has overlayfs' `volatile` option (no
/// `syncfs` of the upper's filesystem at unmount; shown as `volatile` before Linux 6.6 and as
/// `fsync=volatile` since), from `/proc/self/mountinfo`. `None` when
/// nothing, or something other than an overlay, is mounted there, or the file cannot be read.
pub fn overlay_is_volatile(mount_point: &Path) -> Option<bool> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    overlay_is_volatile_in(&text, mount_point)
}

/// [`overlay_is_volatile`] over a mountinfo text.
fn overlay_is_volatile_in(text: &str, mount_point: &Path) -> Option<bool> {
    Some(
        overlay_options_in(text, mount_point)?
            .split(',')
            .any(|o| o == "volatile" || o == "fsync=volatile"),
    )
}

/// The super options (still escaped) of the overlay mounted on top at `mount_point` (the last
/// mountinfo line with that mount point, of filesystem type `overlay`).
fn overlay_options_in<'a>(text: &'a str, mount_point: &Path) -> Option<&'a str> {
    let line = text
        .lines()
        .rfind(|l| l.split(' ').nth(4).map(unescape).as_deref() == mount_point.to_str())?;
    let (_, tail) = line.split_once(" - ")?;
    let mut f = tail.split(' ');
    if f.next()? != "overlay" {
        return None;
    }
    f.nth(1)
}

/// The filesystem a path lives on, as the mount table shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountedFs {
    /// Where it is mounted (the deepest mount point at or above the path; the last mounted
    /// there when several are stacked).
    pub mount_point: PathBuf,
    /// Its type, e.g. `tmpfs`, `ext4`.
    pub fstype: String,
    /// Its source, e.g. `/dev/vda`, `tmpfs`.
    pub source: String,
}

/// The filesystem `path` lives on ([`MountedFs`]): `path` is made absolute and resolved
/// (symlinks, `..`) as far as it exists, then matched against `/proc/self/mountinfo`. `None`
/// when the mount table cannot be read or names no mount above it.
pub fn filesystem_of(path: &Path) -> Option<MountedFs> {
    let real = path
        .ancestors()
        .find_map(|a| std::fs::canonicalize(a).ok().map(|r| (a, r)))
        .map(|(a, r)| r.join(path.strip_prefix(a).unwrap_or(Path::new(""))))?;
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    filesystem_of_in(&text, &real)
}

/// [`filesystem_of`] over a mountinfo text and an absolute, resolved `path`: the line of the
/// deepest mount point at or above `path`, the last such line when several are stacked there.
fn filesystem_of_in(text: &str, path: &Path) -> Option<MountedFs> {
    let mut best: Option<MountedFs> = None;
    for line in text.lines() {
        let Some(mp) = line.split(' ').nth(4).map(unescape).map(PathBuf::from) else {
            continue;
        };
        let Some((_, tail)) = line.split_once(" - ") else {
            continue;
        };
        let mut f = tail.split(' ');
        let (Some(fstype), Some(source)) = (f.next(), f.next()) else {
            continue;
        };
        let deeper = best
            .as_ref()
            .is_none_or(|b| mp.components().count() >= b.mount_point.components().count());
        if path.starts_with(&mp) && deeper {
            best = Some(MountedFs {
                mount_point: mp,
                fstype: fstype.to_string(),
                source: unescape(source),
            });
        }
    }
    best
}

/// Decodes mountinfo's `\ooo` octal escapes.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_top_overlay_names_its_upper() {
        use std::path::{Path, PathBuf};
        let text = "36 25 0:31 / /s/rootfs rw - overlay overlay rw,lowerdir=/i,upperdir=/s/overlay/upper-1,workdir=/s/overlay/work-1\n\
                    37 36 0:32 / /s/rootfs rw - overlay overlay rw,lowerdir=/i,upperdir=/s/overlay/upper\\0402,workdir=/s/w\n\
                    38 25 0:33 / /s/other rw - tmpfs tmpfs rw\n";
        assert_eq!(
            super::overlay_upper_in(text, Path::new("/s/rootfs")),
            Some(PathBuf::from("/s/overlay/upper 2"))
        );
        assert_eq!(super::overlay_upper_in(text, Path::new("/s/other")), None);
        assert_eq!(super::overlay_upper_in(text, Path::new("/s/none")), None);
    }

    #[test]
    fn the_top_overlay_says_whether_it_is_volatile() {
        use std::path::Path;
        let text = "36 25 0:31 / /s/rootfs rw - overlay overlay rw,lowerdir=/i,upperdir=/u,workdir=/w\n\
                    37 36 0:32 / /s/rootfs rw - overlay overlay rw,lowerdir=/i,upperdir=/u2,workdir=/w2,volatile\n\
                    38 25 0:33 / /s/plain rw - overlay overlay rw,lowerdir=/i,upperdir=/u3,workdir=/w3,fsync=auto\n\
                    40 25 0:35 / /s/new rw - overlay overlay rw,lowerdir=/i,upperdir=/u4,workdir=/w4,uuid=on,fsync=volatile\n\
                    39 25 0:34 / /s/other rw - tmpfs tmpfs rw,volatile\n";
        let v = |p: &str| super::overlay_is_volatile_in(text, Path::new(p));
        assert_eq!(v("/s/rootfs"), Some(true));
        assert_eq!(v("/s/plain"), Some(false));
        assert_eq!(v("/s/new"), Some(true));
        assert_eq!(v("/s/other"), None);
        assert_eq!(v("/s/none"), None);
    }

    #[test]
    fn a_path_lives_on_the_deepest_mount_above_it_the_last_stacked_one() {
        use std::path::{Path, PathBuf};
        let text = "22 1 0:21 / / rw - ext4 /dev/vda rw\n\
                    30 22 0:40 / /tmp/s rw - tmpfs netprobe-test rw,size=3072k\n\
                    31 30 0:41 / /tmp/s rw - tmpfs second rw\n\
                    32 22 0:42 / /tmp/s\\040x rw - tmpfs spaced rw\n\
                    33 22 0:43 / /tmp/sx rw - tmpfs sibling rw\n";
        let of = |p: &str| super::filesystem_of_in(text, Path::new(p)).unwrap();
        let s = of("/tmp/s/slot-61/evidence");
        assert_eq!(
            (s.mount_point, s.fstype.as_str(), s.source.as_str()),
            (PathBuf::from("/tmp/s"), "tmpfs", "second")
        );
        assert_eq!(of("/tmp/sx/a").source, "sibling");
        assert_eq!(of("/tmp/s x/a").source, "spaced");
        assert_eq!(of("/var/lib").mount_point, PathBuf::from("/"));
        assert_eq!(super::filesystem_of_in("", Path::new("/x")), None);
        // The real table names some mount for an existing path and for one not made yet.
        assert!(super::filesystem_of(Path::new("/proc/self")).is_some());
        assert!(super::filesystem_of(Path::new("/tmp/no/such/folder")).is_some());
    }

    #[test]
    fn octal_escapes_are_decoded() {
        assert_eq!(super::unescape(r"/tmp/a\040b\011c"), "/tmp/a b\tc");
        assert_eq!(super::unescape(r"/plain"), "/plain");
        assert_eq!(super::unescape(r"/trail\04"), r"/trail\04");
    }
}
