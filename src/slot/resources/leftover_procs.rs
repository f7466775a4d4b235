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
#[path = "leftover_procs_tests.rs"]
pub(crate) mod tests;
