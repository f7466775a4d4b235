//! The processes a slot container may have left behind: in its cgroup directories, or in the
//! slot's network namespace. The proof that no process of the container runs when the runtime
//! says it has no container (its root entry was removed, or it lost track), checked before a
//! restore brings a second one up. A process moved out of the container's cgroups still shares
//! the holder's network namespace (and its port), so both are checked.

use crate::cgroup::procs::ProcsError;
use crate::slot::gate::Observed;
use crate::slot::state::SlotState;
use std::path::{Path, PathBuf};

/// Why the processes in the slot's network namespace could not be told from `/proc` (fail
/// closed).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ScanError {
    /// A file or folder under `/proc` could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The path read (`/proc`, `/proc/PID/ns/net`, `/proc/PID/net/dev`).
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A process's `ns/net` was refused and its `net/dev` could not be read either.
    #[error(
        "cannot tell the network namespace of pid {pid}: {}: {ns_error}; {}: {source}",
        ns.display(),
        dev.display()
    )]
    Undecidable {
        /// The process.
        pid: i32,
        /// Its `ns/net`.
        ns: PathBuf,
        /// Why `ns/net` could not be read.
        ns_error: std::io::Error,
        /// Its `net/dev`.
        dev: PathBuf,
        /// Why `net/dev` could not be read.
        #[source]
        source: std::io::Error,
    },
    /// A living member's namespace cookie could not be read.
    #[error(
        "cannot tell whether pid {pid} ({comm}) is in the slot's network namespace or in a later one that reuses its inode: {source}"
    )]
    Cookie {
        /// The process.
        pid: i32,
        /// Its `comm`.
        comm: String,
        /// Why the cookie could not be read.
        #[source]
        source: crate::ns::NsError,
    },
}

/// Every directory of the container's cgroup, in each hierarchy of the last `cgroup-limits`
/// read-back ([`crate::cgroup::LimitReadback::container_dirs`]), holds no process: `Ok` with
/// the detail (a directory that does not exist holds none). `Err` names each directory that
/// holds processes, with their pids and the way on, or says why it cannot be told (no read-back
/// recorded, a `cgroup.procs` unreadable): fail closed.
pub(crate) fn no_container_procs(st: &SlotState) -> Observed {
    let rb = st
        .cgroup
        .as_ref()
        .and_then(|c| c.last_readback.as_ref())
        .ok_or("state.json records no cgroup read-back: the container's cgroup is unknown")?;
    let dirs = rb.container_dirs().map_err(|e| e.to_string())?;
    let mut busy: Vec<(PathBuf, Vec<i32>)> = Vec::new();
    for d in &dirs {
        let pids = procs(d).map_err(|e| e.to_string())?;
        if !pids.is_empty() {
            busy.push((d.clone(), pids));
        }
    }
    if busy.is_empty() {
        let list = |v: &[&PathBuf]| {
            v.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (here, gone): (Vec<&PathBuf>, Vec<&PathBuf>) = dirs.iter().partition(|d| d.exists());
        return Ok(match (here.is_empty(), gone.is_empty()) {
            (true, _) => format!(
                "no process: the container's cgroup directories are gone ({}: {})",
                gone.len(),
                list(&gone)
            ),
            (false, true) => format!(
                "no process in the container's cgroup ({} directories: {})",
                here.len(),
                list(&here)
            ),
            (false, false) => format!(
                "no process in the container's cgroup ({} directories: {}; gone: {})",
                here.len(),
                list(&here),
                list(&gone)
            ),
        });
    }
    let mut all: Vec<i32> = busy.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    all.sort_unstable();
    all.dedup();
    let pids = all.iter().map(i32::to_string).collect::<Vec<_>>().join(" ");
    let cleanup = crate::slot::next_step::bare("cleanup");
    Err(format!(
        "processes {pids} still run in the container's cgroup ({}) though the runtime has no container {}: a container the runtime lost track of (e.g. its state under the runtime root was removed) would run beside the restored one; stop them (`kill -9 {pids}`), then run the verb again ({cleanup} refuses too while they run: it stops only what the runtime knows)",
        busy.iter()
            .map(|(d, _)| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        st.container_id
    ))
}

/// No process but the holder is in the slot's network namespace (the holder's recorded netns
/// inode), read from every `<proc_root>/PID/ns/net` (`/proc`): `Ok` with the detail; `Err` names
/// the pids and their `comm` with the way on, or says why it cannot be told (no holder
/// recorded, `/proc` unreadable): fail closed. A process that ends during the scan is not
/// counted. When the holder is gone (its pid no longer in the recorded namespace: `cleanup`
/// after the holder died), the namespace may live on in its other members: any process still
/// in the recorded inode is named; processes whose `ns/net` is refused cannot then be compared
/// (no member is left to read `net/dev` from) and are listed as such in the detail.
pub(crate) fn no_netns_strangers(st: &SlotState, proc_root: &Path) -> Observed {
    let holder = st
        .holder
        .as_ref()
        .ok_or("state.json records no holder: the slot's network namespace is unknown")?;
    let me = std::process::id() as i32;
    let live = netns_mark(proc_root, holder.pid)
        .ok()
        .filter(|m| m.ns_inode == holder.netns_inode);
    let (mark, beside) = match live {
        Some(m) => (m, format!("beside the holder (pid {})", holder.pid)),
        None => (
            NetnsMark {
                ns_inode: holder.netns_inode,
                net_dev_inode: None,
            },
            format!("whose holder (pid {}) is gone,", holder.pid),
        ),
    };
    let m = netns_members(proc_root, mark, &[holder.pid, me]).map_err(|e| e.to_string())?;
    let (others, later) = match live {
        Some(_) => (m.found, Vec::new()),
        None => {
            same_namespace(proc_root, m.found, st.holder_netns_cookie).map_err(|e| e.to_string())?
        }
    };
    if others.is_empty() {
        let mut d = match live {
            Some(_) => format!(
                "no process but the holder (pid {}) in the slot's network namespace (inode {})",
                holder.pid, holder.netns_inode
            ),
            None => format!(
                "the holder (pid {}) is gone and no process is left in its network namespace (inode {})",
                holder.pid, holder.netns_inode
            ),
        };
        if !later.is_empty() {
            d.push_str(&format!(
                "; pids {} are in a later namespace that reuses inode {} (its cookie is not the slot's {}): not the slot's",
                later.iter().map(i32::to_string).collect::<Vec<_>>().join(" "),
                holder.netns_inode,
                st.holder_netns_cookie.unwrap_or_default()
            ));
        }
        if !m.uncompared.is_empty() {
            d.push_str(&format!(
                "; not compared: pids {} (their ns/net is refused by ptrace access rules, and no member is left to read the namespace's net/dev from)",
                m.uncompared.iter().map(i32::to_string).collect::<Vec<_>>().join(" ")
            ));
        }
        return Ok(d);
    }
    // At most 20 named (a wrong namespace could hold every process of the host).
    const SHOWN: usize = 20;
    let more = match others.len().saturating_sub(SHOWN) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let shown = &others[..others.len().min(SHOWN)];
    let pids = shown
        .iter()
        .map(|(p, _)| p.to_string())
        .collect::<Vec<_>>()
        .join(" ");
    let named = shown
        .iter()
        .map(|(p, c)| format!("{p} ({c})"))
        .collect::<Vec<_>>()
        .join(", ");
    // With the holder gone and no cookie recorded (a slot provisioned before it was), the inode
    // number alone names the namespace, and a later namespace may reuse it.
    let unproven = match (live, st.holder_netns_cookie) {
        (None, None) => format!(
            "; this slot's state records no namespace cookie, so these may instead be in a later namespace that reuses inode {} (another slot's holder or container: compare with {} of the other slots before killing anything)",
            holder.netns_inode,
            crate::slot::next_step::bare("status")
        ),
        _ => String::new(),
    };
    let cleanup = crate::slot::next_step::bare("cleanup");
    Err(format!(
        "processes {named}{more} run in the slot's network namespace (inode {}) {beside} though the runtime has no container {}: a container the runtime lost track of (its processes moved out of its cgroup, or its state removed) would share the restored one's network and port; stop them (`kill -9 {pids}`{more}), then run the verb again ({cleanup} refuses too while they run: it stops only what the runtime knows){unproven}",
        holder.netns_inode, st.container_id
    ))
}

/// With the holder gone, which of `found` (processes in a namespace of the recorded inode
/// number) are in the slot's namespace: those whose namespace cookie
/// ([`crate::ns::netns_cookie_of`] of `<proc_root>/PID/ns/net`) is `cookie`. Returns (the
/// slot's, those in a later namespace that reuses the inode). Without a recorded cookie every
/// one is kept (the caller says the inode alone cannot prove it). A process gone meanwhile is
/// dropped.
///
/// Errors: a member's cookie cannot be read while the process lives (fail closed).
fn same_namespace(
    proc_root: &Path,
    found: Vec<Named>,
    cookie: Option<u64>,
) -> Result<(Vec<Named>, Vec<i32>), ScanError> {
    let Some(want) = cookie else {
        return Ok((found, Vec::new()));
    };
    let (mut ours, mut later) = (Vec::new(), Vec::new());
    for (pid, comm) in found {
        let ns = proc_root.join(pid.to_string()).join("ns/net");
        match crate::ns::netns_cookie_of(&ns) {
            Ok(c) if c == want => ours.push((pid, comm)),
            Ok(_) => later.push(pid),
            Err(_) if !proc_root.join(pid.to_string()).exists() => {}
            Err(source) => return Err(ScanError::Cookie { pid, comm, source }),
        }
    }
    Ok((ours, later))
}

/// A process named in a message: (pid, `comm`).
type Named = (i32, String);

/// What [`netns_members`] found.
#[derive(Debug)]
struct Members {
    /// (pid, comm) of each process in the namespace, in pid order.
    found: Vec<(i32, String)>,
    /// Pids whose `ns/net` was refused and whose `net/dev` could not be compared (the mark has
    /// no `net/dev` inode).
    uncompared: Vec<i32>,
}

/// One network namespace, as `/proc` shows it: the `st_ino` of a member's `ns/net` and of its
/// `net/dev` (procfs allocates the `net/` entries once per namespace, from the same inode
/// space: two processes see the same `net/dev` inode iff they share the namespace).
#[derive(Debug, Clone, Copy)]
struct NetnsMark {
    ns_inode: u64,
    /// None when no member is left to read it from (the holder is gone): a process whose
    /// `ns/net` is refused is then listed as not compared.
    net_dev_inode: Option<u64>,
}

/// The processes under `proc_root` (`/proc`) in the namespace `mark`, except `except`, as
/// (pid, comm), in pid order. `ns/net` is read first; where reading it is refused (`EACCES`:
/// a process such as this machine's pid 1 that `ptrace` access rules hide), `net/dev`'s inode
/// decides. A process that is gone (or a zombie, whose namespace links are gone) is skipped.
///
/// Errors: `proc_root` unreadable, or a process whose namespace cannot be told either way.
fn netns_members(proc_root: &Path, mark: NetnsMark, except: &[i32]) -> Result<Members, ScanError> {
    use std::os::unix::fs::MetadataExt;
    let rd = std::fs::read_dir(proc_root).map_err(|source| ScanError::Read {
        path: proc_root.to_path_buf(),
        source,
    })?;
    let gone =
        |e: &std::io::Error| matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH));
    let mut out = Vec::new();
    let mut uncompared = Vec::new();
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if except.contains(&pid) {
            continue;
        }
        let ns = e.path().join("ns/net");
        let member = match std::fs::metadata(&ns) {
            Ok(m) => m.ino() == mark.ns_inode,
            Err(err) if gone(&err) => continue,
            Err(err) if err.raw_os_error() == Some(libc::EACCES) => {
                let Some(want) = mark.net_dev_inode else {
                    uncompared.push(pid);
                    continue;
                };
                let dev = e.path().join("net/dev");
                match std::fs::metadata(&dev) {
                    Ok(m) => m.ino() == want,
                    Err(err) if gone(&err) => continue,
                    Err(source) => {
                        return Err(ScanError::Undecidable {
                            pid,
                            ns,
                            ns_error: err,
                            dev,
                            source,
                        });
                    }
                }
            }
            Err(source) => return Err(ScanError::Read { path: ns, source }),
        };
        if member {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            out.push((pid, comm.trim().to_string()));
        }
    }
    out.sort_unstable();
    uncompared.sort_unstable();
    Ok(Members {
        found: out,
        uncompared,
    })
}

/// The [`NetnsMark`] of process `pid` under `proc_root`.
///
/// Errors: `ns/net` or `net/dev` of `pid` unreadable (the process is gone).
fn netns_mark(proc_root: &Path, pid: i32) -> Result<NetnsMark, ScanError> {
    use std::os::unix::fs::MetadataExt;
    let ino = |rel: &str| {
        let p = proc_root.join(pid.to_string()).join(rel);
        std::fs::metadata(&p)
            .map(|m| m.ino())
            .map_err(|source| ScanError::Read { path: p, source })
    };
    Ok(NetnsMark {
        ns_inode: ino("ns/net")?,
        net_dev_inode: Some(ino("net/dev")?),
    })
}

/// Every pid in the container's cgroup directories (each hierarchy of the last read-back),
/// sorted, deduplicated; `None` when they cannot be listed or read.
pub(crate) fn container_pids(st: &SlotState) -> Option<Vec<i32>> {
    let rb = st.cgroup.as_ref()?.last_readback.as_ref()?;
    let mut all = Vec::new();
    for d in rb.container_dirs().ok()? {
        all.extend(procs(&d).ok()?);
    }
    all.sort_unstable();
    all.dedup();
    Some(all)
}

/// The pids in `dir/cgroup.procs`; none when `dir` does not exist.
fn procs(dir: &Path) -> Result<Vec<i32>, ProcsError> {
    crate::cgroup::procs::read_or_none_if_gone(dir)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cgroup::{CgroupDriver, CgroupMode, DriverChoice, ManageCgroupsMode};

    /// A cgroup v2 host under `root/fakehost` whose container cgroup holds `procs`, and the
    /// slot's cgroup record read back from it (as provision records it).
    pub(crate) fn fake_cgroup(root: &Path, procs: &str) -> super::super::cgroups::SlotCgroup {
        let r = root.join("fakehost");
        let scope = "/netprobe/slot-1-1a2b3c4d";
        let write = |rel: &str, text: &str| {
            let p = r.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write(
            "proc/self/mountinfo",
            "25 22 0:23 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n",
        );
        write("proc/4242/cgroup", &format!("0::{scope}\n"));
        write("sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n");
        let dir = format!("sys/fs/cgroup{scope}");
        write(&format!("{dir}/cpu.max"), "400000 100000\n");
        write(&format!("{dir}/memory.max"), "4294967296\n");
        write(&format!("{dir}/memory.swap.max"), "0\n");
        write(&format!("{dir}/cgroup.procs"), procs);
        let rb = crate::cgroup::read_limits_at(&r, 4242).unwrap();
        super::super::cgroups::SlotCgroup {
            mode: CgroupMode::Unified,
            driver: DriverChoice {
                driver: CgroupDriver::Cgroupfs,
                source: "test".into(),
                systemd_pid1: false,
                pid1: "init".into(),
            },
            unit: None,
            manage_cgroups_mode: ManageCgroupsMode::Soft,
            manage_cgroups_reason: "test".into(),
            last_readback: Some(rb),
        }
    }

    #[test]
    fn a_left_process_is_named_with_the_way_on() {
        let (d, mut st) = crate::slot::gate::pure_checks::tests::fixture();
        st.cgroup = Some(fake_cgroup(d.path(), ""));
        let ok = no_container_procs(&st).unwrap();
        assert!(
            ok.contains("no process in the container's cgroup (1 directories"),
            "{ok}"
        );
        // Directories that are gone (after cleanup) are said to be gone, not listed as empty.
        let gone = fake_cgroup(d.path(), "");
        let dirs = gone
            .last_readback
            .as_ref()
            .unwrap()
            .container_dirs()
            .unwrap();
        for dir in &dirs {
            std::fs::remove_dir_all(dir).unwrap();
        }
        st.cgroup = Some(gone);
        let ok = no_container_procs(&st).unwrap();
        assert!(
            ok.starts_with("no process: the container's cgroup directories are gone (1: "),
            "{ok}"
        );
        st.cgroup = Some(fake_cgroup(d.path(), "31493\n31764\n"));
        let e = no_container_procs(&st).unwrap_err();
        assert!(e.contains("processes 31493 31764 still run"), "{e}");
        assert!(
            e.contains("kill -9 31493 31764") && e.contains("netprobe slot cleanup"),
            "{e}"
        );
    }

    #[test]
    fn procs_reads_pids_and_a_missing_dir_holds_none() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(procs(&d.path().join("gone")).unwrap(), Vec::<i32>::new());
        std::fs::write(d.path().join("cgroup.procs"), "").unwrap();
        assert!(procs(d.path()).unwrap().is_empty());
        std::fs::write(d.path().join("cgroup.procs"), "31493\n31764\n").unwrap();
        assert_eq!(procs(d.path()).unwrap(), vec![31493, 31764]);
        std::fs::write(d.path().join("cgroup.procs"), "x\n").unwrap();
        assert!(procs(d.path()).is_err());
        // A directory without cgroup.procs is not a cgroup: it cannot be told.
        let plain = d.path().join("plain");
        std::fs::create_dir(&plain).unwrap();
        assert!(
            procs(&plain)
                .unwrap_err()
                .to_string()
                .contains("cannot read")
        );
    }

    #[test]
    fn netns_members_finds_the_processes_in_one_namespace() {
        // This test process and a child in its netns (the host's, with pid 1 in it too, whose
        // ns/net is refused here: net/dev decides); a namespace nobody is in.
        let me = std::process::id() as i32;
        let proc_root = Path::new("/proc");
        let mark = netns_mark(proc_root, me).unwrap();
        assert_eq!(mark.ns_inode, crate::ns::own_netns_inode().unwrap());
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let found = netns_members(proc_root, mark, &[me]).unwrap().found;
        assert!(
            found
                .iter()
                .any(|(p, c)| *p == child.id() as i32 && c == "sleep"),
            "{found:?}"
        );
        assert!(!found.iter().any(|(p, _)| *p == me), "{found:?}");
        let elsewhere = NetnsMark {
            ns_inode: 1,
            net_dev_inode: Some(1),
        };
        let none = netns_members(proc_root, elsewhere, &[]).unwrap().found;
        assert!(none.is_empty(), "{none:?}");
        child.kill().unwrap();
        child.wait().unwrap();
        let e = netns_members(Path::new("/nonexistent-proc"), mark, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read"), "{e}");
    }

    #[test]
    fn a_stranger_in_the_holders_netns_is_named() {
        let (_d, mut st) = crate::slot::gate::pure_checks::tests::fixture();
        st.holder = None;
        assert!(
            no_netns_strangers(&st, Path::new("/proc"))
                .unwrap_err()
                .contains("no holder")
        );
        // A /proc with the holder (pid 100) and processes in its namespace (links to this
        // process's own namespace files: no root needed).
        let d = tempfile::tempdir().unwrap();
        let add = |pid: i32, comm: &str| {
            let p = d.path().join(pid.to_string());
            std::fs::create_dir_all(p.join("ns")).unwrap();
            std::fs::create_dir_all(p.join("net")).unwrap();
            std::os::unix::fs::symlink("/proc/self/ns/net", p.join("ns/net")).unwrap();
            std::os::unix::fs::symlink("/proc/self/net/dev", p.join("net/dev")).unwrap();
            std::fs::write(p.join("comm"), format!("{comm}\n")).unwrap();
        };
        add(100, "netprobe");
        let holder = crate::ns::ProcessIdentity {
            pid: 100,
            start_time: 0,
            netns_inode: crate::ns::own_netns_inode().unwrap(),
        };
        st.holder = Some(holder);
        let ok = no_netns_strangers(&st, d.path()).unwrap();
        assert!(ok.contains("no process but the holder (pid 100)"), "{ok}");
        add(200, "sleep");
        let e = no_netns_strangers(&st, d.path()).unwrap_err();
        assert!(e.contains("processes 200 (sleep) run"), "{e}");
        assert!(
            e.contains("`kill -9 200`") && e.contains("netprobe slot cleanup"),
            "{e}"
        );
        // Many: 20 named, the rest counted.
        for pid in 201..225 {
            add(pid, "x");
        }
        let e = no_netns_strangers(&st, d.path()).unwrap_err();
        assert!(e.contains("219 (x) and 5 more run"), "{e}");
        assert!(!e.contains("220 (x)"), "{e}");
        // The holder gone (cleanup after it died): whoever is still in its namespace is named.
        st.holder = Some(crate::ns::ProcessIdentity { pid: 999, ..holder });
        let e = no_netns_strangers(&st, d.path()).unwrap_err();
        assert!(e.contains("processes 100 (netprobe), 200 (sleep)"), "{e}");
        assert!(
            e.contains("whose holder (pid 999) is gone, though the runtime"),
            "{e}"
        );
        // No namespace cookie recorded: the inode alone cannot prove the namespace is the
        // slot's (a later one may reuse it), and the message says so.
        assert!(e.contains("records no namespace cookie"), "{e}");
        // The slot's cookie recorded and equal: named, with no such doubt.
        let own = crate::ns::netns_cookie_of(Path::new("/proc/self/ns/net")).unwrap();
        st.holder_netns_cookie = Some(own);
        let e = no_netns_strangers(&st, d.path()).unwrap_err();
        assert!(e.contains("processes 100 (netprobe), 200 (sleep)"), "{e}");
        assert!(!e.contains("records no namespace cookie"), "{e}");
        // Another cookie recorded: these processes are in a later namespace that reuses the
        // inode (another slot's holder and container), not the slot's: nobody is named.
        st.holder_netns_cookie = Some(own + 1);
        let ok = no_netns_strangers(&st, d.path()).unwrap();
        assert!(ok.contains("is gone and no process is left"), "{ok}");
        assert!(
            ok.contains("pids 100 200 201") && ok.contains("later namespace that reuses inode"),
            "{ok}"
        );
        st.holder_netns_cookie = None;
        // The holder's pid now in another namespace (reused): gone too; nobody is left in the
        // recorded one.
        st.holder = Some(crate::ns::ProcessIdentity {
            netns_inode: 1,
            ..holder
        });
        let ok = no_netns_strangers(&st, d.path()).unwrap();
        assert!(ok.contains("is gone and no process is left"), "{ok}");
        let empty = tempfile::tempdir().unwrap();
        st.holder = Some(holder);
        let ok = no_netns_strangers(&st, empty.path()).unwrap();
        assert!(ok.contains("the holder (pid 100) is gone"), "{ok}");
    }

    #[test]
    fn no_read_back_proves_nothing() {
        let (_d, mut st) = crate::slot::gate::pure_checks::tests::fixture();
        st.cgroup = None;
        let e = no_container_procs(&st).unwrap_err();
        assert!(e.contains("no cgroup read-back"), "{e}");
    }
}
