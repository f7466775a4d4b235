//! [`HostFacts`]: kernel (uname), OS (`/etc/os-release`), cgroup mode, and the binaries used.

use crate::evidence::result::{BinaryFacts, HostFacts};
use std::ffi::CStr;
use std::path::Path;

/// Facts about this host: `uname` release/version/machine (libc `uname(2)`; empty strings if it
/// fails, which Linux never does), `PRETTY_NAME` from `/etc/os-release`, the cgroup mode
/// ([`cgroup_mode`]) and the given CRIU and runtime facts, stored as-is.
pub fn host_facts(criu: Option<BinaryFacts>, runtime: Option<BinaryFacts>) -> HostFacts {
    let (kernel_release, kernel_version, machine) = uname();
    HostFacts {
        kernel_release,
        kernel_version,
        machine,
        os: std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|s| pretty_name(&s)),
        cgroup: cgroup_mode().to_string(),
        criu,
        runtime,
    }
}

/// The cgroup mode of this host: `v2` when `/sys/fs/cgroup/cgroup.controllers` exists (unified
/// hierarchy), `hybrid` when v1 controllers are mounted together with a `cgroup2` mount (e.g.
/// `/sys/fs/cgroup/unified`), else `v1`. Reads `/proc/self/mounts`.
pub fn cgroup_mode() -> &'static str {
    let unified = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    cgroup_mode_from(unified, &mounts)
}

/// Pure part of [`cgroup_mode`]: `unified_root` = `/sys/fs/cgroup/cgroup.controllers` exists;
/// `mounts` = the text of `/proc/self/mounts` (fields: source, target, fstype, …).
pub fn cgroup_mode_from(unified_root: bool, mounts: &str) -> &'static str {
    if unified_root {
        return "v2";
    }
    let fstypes: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let v1 = fstypes.contains(&"cgroup");
    let v2 = fstypes.contains(&"cgroup2");
    match (v1, v2) {
        (true, true) => "hybrid",
        (false, true) => "v2",
        _ => "v1",
    }
}

/// `PRETTY_NAME` from the text of an os-release file, quotes removed (e.g.
/// `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"` → `Debian GNU/Linux 12 (bookworm)`).
pub fn pretty_name(os_release: &str) -> Option<String> {
    os_release.lines().find_map(|l| {
        let v = l.trim().strip_prefix("PRETTY_NAME=")?;
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(v);
        Some(v.to_string())
    })
}

fn uname() -> (String, String, String) {
    // SAFETY: `utsname` is plain old data; uname(2) fills it with NUL-terminated strings.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable `utsname` for uname(2) to fill.
    if unsafe { libc::uname(&mut u) } != 0 {
        return (String::new(), String::new(), String::new());
    }
    let field = |f: &[libc::c_char]| {
        // SAFETY: the kernel NUL-terminates every field within its fixed size.
        unsafe { CStr::from_ptr(f.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    (field(&u.release), field(&u.version), field(&u.machine))
}
