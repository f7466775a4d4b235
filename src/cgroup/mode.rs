//! The host's cgroup layout from mountinfo: which hierarchies are mounted where, and the mode
//! (`v1`, `hybrid`, `unified`) that follows.
//!
//! Source: proc(5) `/proc/PID/mountinfo` (fields: id, parent, major:minor, root, mount point,
//! options, optional fields, `-`, fstype, source, super options); a v1 hierarchy's controllers
//! are its super options (`rw,cpu,cpuacct`; `name=systemd` is a named hierarchy without a
//! controller); cgroup v2 is fstype `cgroup2` and lists its controllers in `cgroup.controllers`.

use std::fs;
use std::path::{Path, PathBuf};

use super::error::{CgroupError, Result, io_err};

/// How the host mounts cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupMode {
    /// Only cgroup v1 hierarchies.
    V1,
    /// v1 hierarchies with controllers plus a cgroup2 mount (systemd's hybrid layout,
    /// `/sys/fs/cgroup/unified`): the controllers, and so the limits, are on v1.
    Hybrid,
    /// cgroup v2 only (v1 mounts without controllers, e.g. a named hierarchy, are ignored).
    Unified,
}

impl CgroupMode {
    /// `v1`, `hybrid` or `unified`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1 => "v1",
            Self::Hybrid => "hybrid",
            Self::Unified => "unified",
        }
    }
}

impl std::fmt::Display for CgroupMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// cgroup file system version of one mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    /// fstype `cgroup`.
    V1,
    /// fstype `cgroup2`.
    V2,
}

/// One cgroup mount from mountinfo.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CgroupMount {
    /// Mount point as mountinfo prints it (absolute in the mount namespace read), unescaped.
    pub mount_point: PathBuf,
    /// The mount's root inside its hierarchy (mountinfo field 4), `/` unless bind-mounted.
    pub mount_root: String,
    /// v1 or v2.
    pub version: CgroupVersion,
    /// v1: the controllers of the hierarchy (super options without `rw`/`ro`/`name=`…); v2: empty
    /// (read `cgroup.controllers`).
    pub controllers: Vec<String>,
    /// v1: the hierarchy's `name=` super option (`systemd` for `name=systemd`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The host's cgroup layout, read under a file-system root (`/` on a live host, a fixture tree
/// in tests): every path it hands out is under that root.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CgroupHost {
    /// The file-system root all paths are read under (`/` on a live host).
    pub root: PathBuf,
    /// The mountinfo file read (under `root`).
    pub mountinfo: PathBuf,
    /// The mode.
    pub mode: CgroupMode,
    /// Every cgroup and cgroup2 mount, in mountinfo order.
    pub mounts: Vec<CgroupMount>,
}

/// mountinfo's octal escapes (`\040` space, `\011` tab, `\012` newline, `\134` backslash).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            let oct = &b[i + 1..i + 4];
            if oct.iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = oct.iter().fold(0u32, |a, c| a * 8 + u32::from(c - b'0'));
                out.push(v as u8);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup mounts in mountinfo `text` (other lines are skipped; malformed lines too).
pub fn parse_mountinfo(text: &str) -> Vec<CgroupMount> {
    let mut v = Vec::new();
    for line in text.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let pre: Vec<&str> = pre.split(' ').collect();
        let post: Vec<&str> = post.split(' ').collect();
        if pre.len() < 5 || post.len() < 3 {
            continue;
        }
        let version = match post[0] {
            "cgroup" => CgroupVersion::V1,
            "cgroup2" => CgroupVersion::V2,
            _ => continue,
        };
        let controllers = match version {
            CgroupVersion::V2 => Vec::new(),
            CgroupVersion::V1 => post[2]
                .split(',')
                .filter(|o| !is_generic_option(o))
                .map(str::to_string)
                .collect(),
        };
        let name = match version {
            CgroupVersion::V2 => None,
            CgroupVersion::V1 => post[2]
                .split(',')
                .find_map(|o| o.strip_prefix("name="))
                .map(str::to_string),
        };
        v.push(CgroupMount {
            mount_point: PathBuf::from(unescape(pre[4])),
            mount_root: unescape(pre[3]),
            version,
            controllers,
            name,
        });
    }
    v
}

/// Super options of a v1 cgroup mount that are not controllers.
fn is_generic_option(o: &str) -> bool {
    matches!(
        o,
        "rw" | "ro" | "noprefix" | "clone_children" | "xattr" | "cpuset_v2_mode" | "favordynmods"
    ) || o.starts_with("name=")
        || o.starts_with("release_agent=")
        || o.is_empty()
}

impl CgroupHost {
    /// Read `<root>/proc/self/mountinfo` and classify the host.
    ///
    /// Errors: [`CgroupError::Io`] when mountinfo cannot be read; [`CgroupError::NoCgroupMounts`]
    /// when it lists no cgroup mount at all.
    pub fn detect(root: &Path) -> Result<Self> {
        let mountinfo = root.join("proc/self/mountinfo");
        let text = fs::read_to_string(&mountinfo).map_err(io_err(&mountinfo))?;
        Self::from_mountinfo(root, &mountinfo, &text)
    }

    /// Classify the host from mountinfo `text` (read from `mountinfo`, for messages), with paths
    /// under `root`. Pure apart from nothing: no file is read.
    ///
    /// Errors: [`CgroupError::NoCgroupMounts`].
    pub fn from_mountinfo(root: &Path, mountinfo: &Path, text: &str) -> Result<Self> {
        let mounts = parse_mountinfo(text);
        let has_v2 = mounts.iter().any(|m| m.version == CgroupVersion::V2);
        let v1_ctrl = mounts
            .iter()
            .any(|m| m.version == CgroupVersion::V1 && !m.controllers.is_empty());
        let any_v1 = mounts.iter().any(|m| m.version == CgroupVersion::V1);
        let mode = match (has_v2, v1_ctrl, any_v1) {
            (true, true, _) => CgroupMode::Hybrid,
            (true, false, _) => CgroupMode::Unified,
            (false, _, true) => CgroupMode::V1,
            (false, _, false) => {
                return Err(CgroupError::NoCgroupMounts {
                    mountinfo: mountinfo.to_path_buf(),
                });
            }
        };
        Ok(Self {
            root: root.to_path_buf(),
            mountinfo: mountinfo.to_path_buf(),
            mode,
            mounts,
        })
    }

    /// The v1 hierarchy that carries `controller` (e.g. `cpu`, `memory`), if mounted.
    pub fn v1_mount(&self, controller: &str) -> Option<&CgroupMount> {
        self.mounts.iter().find(|m| {
            m.version == CgroupVersion::V1 && m.controllers.iter().any(|c| c == controller)
        })
    }

    /// The named v1 hierarchy `name` (`systemd` for a `name=systemd` mount), if mounted.
    pub fn v1_named_mount(&self, name: &str) -> Option<&CgroupMount> {
        self.mounts
            .iter()
            .find(|m| m.version == CgroupVersion::V1 && m.name.as_deref() == Some(name))
    }

    /// The mount of one `/proc/PID/cgroup` line's hierarchy: `0::` → the cgroup2 mount;
    /// `N:name=X:` → the named v1 hierarchy; `N:a,b:` → the v1 hierarchy of its first
    /// mounted controller. `None` when that hierarchy is not mounted here.
    pub fn mount_of_line(&self, hierarchy: &str, controllers: &str) -> Option<&CgroupMount> {
        if hierarchy == "0" && controllers.is_empty() {
            return self.v2_mount();
        }
        if let Some(name) = controllers.strip_prefix("name=") {
            return self.v1_named_mount(name);
        }
        controllers.split(',').find_map(|c| self.v1_mount(c))
    }

    /// The cgroup2 mount, preferring `/sys/fs/cgroup` when there are several.
    pub fn v2_mount(&self) -> Option<&CgroupMount> {
        let v2 = || {
            self.mounts
                .iter()
                .filter(|m| m.version == CgroupVersion::V2)
        };
        v2().find(|m| m.mount_point == Path::new("/sys/fs/cgroup"))
            .or_else(|| v2().next())
    }

    /// `p` (absolute in the host's view) under [`CgroupHost::root`].
    pub fn under_root(&self, p: &Path) -> PathBuf {
        self.root.join(p.strip_prefix("/").unwrap_or(p))
    }

    /// The directory of cgroup `path` (as in `/proc/PID/cgroup`) inside `mount`, under the root.
    /// A mount whose root is not `/` (a bind of a sub-cgroup) has that prefix stripped.
    pub fn cgroup_dir(&self, mount: &CgroupMount, path: &str) -> PathBuf {
        let rel = if mount.mount_root != "/" {
            path.strip_prefix(mount.mount_root.as_str()).unwrap_or(path)
        } else {
            path
        };
        self.under_root(&mount.mount_point)
            .join(rel.trim_start_matches('/'))
    }

    /// Check that the controllers the limit read-back needs (`cpu`, `memory`) are there: on v1
    /// and hybrid as mounted hierarchies, on unified in the v2 root's `cgroup.controllers`.
    ///
    /// Errors: [`CgroupError::ControllersMissing`]; [`CgroupError::Io`] when `cgroup.controllers`
    /// cannot be read.
    pub fn require_limit_controllers(&self) -> Result<()> {
        let need = ["cpu", "memory"];
        let (missing, detail): (Vec<String>, String) = match self.mode {
            CgroupMode::V1 | CgroupMode::Hybrid => (
                need.iter()
                    .filter(|c| self.v1_mount(c).is_none())
                    .map(|c| c.to_string())
                    .collect(),
                format!("no v1 hierarchy with it in {}", self.mountinfo.display()),
            ),
            CgroupMode::Unified => {
                let m = self.v2_mount().expect("unified mode has a cgroup2 mount");
                let f = self.under_root(&m.mount_point).join("cgroup.controllers");
                let text = fs::read_to_string(&f).map_err(io_err(&f))?;
                let have: Vec<&str> = text.split_whitespace().collect();
                (
                    need.iter()
                        .filter(|c| !have.contains(c))
                        .map(|c| c.to_string())
                        .collect(),
                    format!("{} lists {:?}", f.display(), text.trim()),
                )
            }
        };
        if missing.is_empty() {
            Ok(())
        } else {
            Err(CgroupError::ControllersMissing {
                mode: self.mode.to_string(),
                missing,
                detail,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's layout (2026-12-01): v1 controllers, name=systemd, cgroup2 at unified.
    pub(crate) const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    /// Debian 12 with systemd (the VM): cgroup2 only.
    pub(crate) const UNIFIED: &str = "\
22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
25 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";
    const V1: &str = "\
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
";

    fn host(text: &str) -> Result<CgroupHost> {
        CgroupHost::from_mountinfo(Path::new("/r"), Path::new("/r/proc/self/mountinfo"), text)
    }

    #[test]
    fn modes() {
        assert_eq!(host(HYBRID).unwrap().mode, CgroupMode::Hybrid);
        assert_eq!(host(UNIFIED).unwrap().mode, CgroupMode::Unified);
        assert_eq!(host(V1).unwrap().mode, CgroupMode::V1);
        // A named v1 hierarchy beside cgroup2 carries no controller: still unified.
        let named = format!(
            "{UNIFIED}40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n"
        );
        assert_eq!(host(&named).unwrap().mode, CgroupMode::Unified);
    }

    #[test]
    fn no_cgroup_is_a_clear_error() {
        let e = host("22 1 0:21 / /sys rw - sysfs sysfs rw\n").unwrap_err();
        assert!(matches!(e, CgroupError::NoCgroupMounts { .. }));
        assert_eq!(e.exit_code(), 3);
        assert!(
            e.to_string()
                .contains("neither a cgroup v1 nor a cgroup v2"),
            "{e}"
        );
    }

    #[test]
    fn v1_controllers_and_dirs() {
        let h = host(V1).unwrap();
        let cpu = h.v1_mount("cpu").unwrap();
        assert_eq!(cpu.controllers, ["cpu", "cpuacct"]);
        assert_eq!(
            h.cgroup_dir(cpu, "/netprobe/slot-0"),
            Path::new("/r/sys/fs/cgroup/cpu,cpuacct/netprobe/slot-0")
        );
        assert!(h.v1_mount("pids").is_none());
        assert!(h.v2_mount().is_none());
        let hy = host(HYBRID).unwrap();
        assert_eq!(
            hy.v2_mount().unwrap().mount_point,
            Path::new("/sys/fs/cgroup/unified")
        );
        assert_eq!(hy.v1_mount("memory").unwrap().controllers, ["memory"]);
    }

    #[test]
    fn bind_mounted_sub_cgroup_and_escapes() {
        let h = host("9 1 0:5 /a/b /mnt/c\\040g rw - cgroup2 none rw\n").unwrap();
        let m = h.v2_mount().unwrap();
        assert_eq!(m.mount_point, Path::new("/mnt/c g"));
        assert_eq!(
            h.cgroup_dir(m, "/a/b/x.scope"),
            Path::new("/r/mnt/c g/x.scope")
        );
    }

    #[test]
    fn v1_without_memory_is_refused() {
        let h = host("32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n").unwrap();
        let e = h.require_limit_controllers().unwrap_err();
        assert!(
            matches!(&e, CgroupError::ControllersMissing { missing, .. } if missing == &["memory"])
        );
        assert_eq!(e.exit_code(), 3);
    }
}
