//! `runc state` answered without running runc: the container's `state.json` under runc's
//! `--root` is read, and the init process and the freezer are checked the way runc decides the
//! status. Mirrors `refreshState()`, `hasInit()` and `isPaused()` in
//! libcontainer/container_linux.go and the `state` command in state.go (runc 1.1–1.4):
//!
//! - paused when the container's freezer cgroup says so (cgroup v1 `freezer.state` `FROZEN`; v2
//!   `cgroup.freeze` `1`);
//! - stopped when the init (`init_process_pid`, `init_process_start`: clock ticks since boot,
//!   field 22 of `/proc/<pid>/stat`) is gone, has another start time, is a zombie or dead;
//!   `runc state` then prints pid 0;
//! - created while `<root>/<id>/exec.fifo` exists;
//! - running otherwise.
//!
//! Only what it can decide as runc would is answered: a missing or unreadable `state.json`, a
//! freezer state other than thawed or frozen, or no freezer path at all is [`Undecided`], and
//! the caller runs `runc state` instead. A runc process costs ~10 ms of CPU (Go runtime start,
//! the same file read) on the cores a restore's gates share.

use super::runtime::ContainerState;
use std::path::{Path, PathBuf};

/// Why the state could not be decided in-process (a sentence naming the file or value); the
/// caller then asks `runc state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecided(pub String);

/// The fields of runc's `state.json` read here (libcontainer `State`/`BaseState`, runc 1.1–1.4;
/// every other field is ignored).
#[derive(Debug, serde::Deserialize)]
struct StateFile {
    id: String,
    init_process_pid: i32,
    init_process_start: u64,
    #[serde(default)]
    cgroup_paths: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    config: ConfigLabels,
}

/// `config.labels` of runc's `state.json`: `bundle=<dir>` among them (`utils.Annotations`).
#[derive(Debug, Default, serde::Deserialize)]
struct ConfigLabels {
    #[serde(default)]
    labels: Vec<String>,
}

/// The answer and the sentence saying how it was decided (for the gate's detail and evidence).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// What `runc state` would print (id, pid, status, bundle).
    pub state: ContainerState,
    /// E.g. "read <root>/<id>/state.json: init pid 123 start 456 == /proc/123/stat (S), freezer
    /// THAWED, no exec.fifo".
    pub how: String,
}

/// The freezer's answer: paused or not, and what was read.
fn paused(paths: &std::collections::BTreeMap<String, String>) -> Result<(bool, String), Undecided> {
    let read = |p: PathBuf| {
        std::fs::read_to_string(&p)
            .map(|s| (s.trim().to_string(), p.clone()))
            .map_err(|e| Undecided(format!("{}: {e}", p.display())))
    };
    if let Some(dir) = paths.get("freezer") {
        let (v, p) = read(Path::new(dir).join("freezer.state"))?;
        return match v.as_str() {
            "THAWED" => Ok((false, format!("{} THAWED", p.display()))),
            "FROZEN" => Ok((true, format!("{} FROZEN", p.display()))),
            other => Err(Undecided(format!("{}: {other:?}", p.display()))),
        };
    }
    match paths.get("") {
        Some(dir) => {
            let (v, p) = read(Path::new(dir).join("cgroup.freeze"))?;
            match v.as_str() {
                "0" => Ok((false, format!("{} 0", p.display()))),
                "1" => Ok((true, format!("{} 1", p.display()))),
                other => Err(Undecided(format!("{}: {other:?}", p.display()))),
            }
        }
        None => Err(Undecided("state.json names no freezer cgroup".into())),
    }
}

/// Whether the init named by `state.json` still exists (runc's `hasInit`), and what was read.
fn has_init(pid: i32, start: u64) -> (bool, String) {
    let p = format!("/proc/{pid}/stat");
    match std::fs::read_to_string(&p) {
        Err(e) => (false, format!("{p}: {e}")),
        Ok(line) => match crate::ns::identity::parse_stat(&line) {
            Err(e) => (false, format!("{p}: {e}")),
            Ok(f) if f.start_time != start => (
                false,
                format!("{p}: start time {} != {start} recorded", f.start_time),
            ),
            Ok(f) if matches!(f.state, 'Z' | 'X' | 'x') => {
                (false, format!("{p}: state {}", f.state))
            }
            Ok(f) => (
                true,
                format!("{p}: start time {start} as recorded, state {}", f.state),
            ),
        },
    }
}

/// Decides `runc state <id>` for the container under runc's state root `root`.
///
/// Errors: [`Undecided`] when `<root>/<id>/state.json` cannot be read or parsed, names another
/// id, or the freezer cannot be read or says neither thawed nor frozen.
pub fn read(root: &Path, id: &str) -> Result<Decided, Undecided> {
    let dir = root.join(id);
    let file = dir.join("state.json");
    let bytes = crate::evidence::read_recorded(&file)
        .map_err(|e| Undecided(format!("{}: {e}", file.display())))?;
    let s: StateFile = serde_json::from_slice(&bytes)
        .map_err(|e| Undecided(format!("{}: {e}", file.display())))?;
    if s.id != id {
        return Err(Undecided(format!(
            "{} names container {:?}, not {id:?}",
            file.display(),
            s.id
        )));
    }
    let bundle = s
        .config
        .labels
        .iter()
        .find_map(|l| l.strip_prefix("bundle="))
        .unwrap_or_default();
    let (frozen, freezer) = paused(&s.cgroup_paths)?;
    let fifo = dir.join("exec.fifo");
    let (status, pid, seen) = if frozen {
        ("paused", s.init_process_pid, freezer)
    } else {
        match has_init(s.init_process_pid, s.init_process_start) {
            (false, why) => ("stopped", 0, format!("{freezer}; {why}")),
            (true, init) if fifo.exists() => (
                "created",
                s.init_process_pid,
                format!("{freezer}; {init}; {} exists", fifo.display()),
            ),
            (true, init) => (
                "running",
                s.init_process_pid,
                format!("{freezer}; {init}; no {}", fifo.display()),
            ),
        }
    };
    Ok(Decided {
        state: ContainerState {
            id: s.id,
            pid,
            status: status.into(),
            bundle: PathBuf::from(bundle),
        },
        how: format!(
            "read {} as runc's refreshState does: init pid {}; {seen}",
            file.display(),
            s.init_process_pid
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runc root with `state.json` for `id` naming `pid`/`start` and a v1 freezer folder
    /// holding `freezer` (none when `None`).
    fn fixture(pid: i32, start: u64, freezer: Option<&str>) -> (tempfile::TempDir, String) {
        let d = tempfile::tempdir().unwrap();
        let id = "c1".to_string();
        let fz = d.path().join("freezer");
        std::fs::create_dir_all(&fz).unwrap();
        let mut paths = serde_json::Map::new();
        if let Some(f) = freezer {
            std::fs::write(fz.join("freezer.state"), format!("{f}\n")).unwrap();
            paths.insert("freezer".into(), fz.to_string_lossy().into());
        }
        let state = serde_json::json!({
            "id": id, "init_process_pid": pid, "init_process_start": start,
            "created": "2026-12-04T12:07:36.977905735Z",
            "config": {"labels": ["bundle=/b/u/n/d/l/e", "x=y"], "rootfs": "/r"},
            "cgroup_paths": paths, "namespace_paths": {}
        });
        std::fs::create_dir_all(d.path().join(&id)).unwrap();
        std::fs::write(d.path().join(&id).join("state.json"), state.to_string()).unwrap();
        (d, id)
    }

    fn own_start() -> u64 {
        let line = std::fs::read_to_string("/proc/self/stat").unwrap();
        crate::ns::identity::parse_stat(&line).unwrap().start_time
    }

    #[test]
    fn a_live_init_with_its_start_time_is_running_with_the_bundle_label() {
        let me = std::process::id() as i32;
        let (d, id) = fixture(me, own_start(), Some("THAWED"));
        let r = read(d.path(), &id).unwrap();
        assert_eq!(r.state.status, "running");
        assert_eq!(r.state.pid, me);
        assert_eq!(r.state.bundle, PathBuf::from("/b/u/n/d/l/e"));
        assert!(
            r.how.contains("THAWED") && r.how.contains("no "),
            "{}",
            r.how
        );
    }

    #[test]
    fn another_start_time_is_stopped_with_pid_0_as_runc_prints() {
        let me = std::process::id() as i32;
        let (d, id) = fixture(me, own_start() + 1, Some("THAWED"));
        let r = read(d.path(), &id).unwrap();
        assert_eq!((r.state.status.as_str(), r.state.pid), ("stopped", 0));
        assert!(r.how.contains("recorded"), "{}", r.how);
    }

    #[test]
    fn frozen_is_paused_and_an_exec_fifo_is_created() {
        let me = std::process::id() as i32;
        let (d, id) = fixture(me, own_start(), Some("FROZEN"));
        assert_eq!(read(d.path(), &id).unwrap().state.status, "paused");
        let (d, id) = fixture(me, own_start(), Some("THAWED"));
        std::fs::write(d.path().join(&id).join("exec.fifo"), "").unwrap();
        assert_eq!(read(d.path(), &id).unwrap().state.status, "created");
    }

    #[test]
    fn what_runc_would_decide_otherwise_is_left_to_runc() {
        let me = std::process::id() as i32;
        // FREEZING, no freezer path, a missing state.json, another id: undecided.
        let (d, id) = fixture(me, own_start(), Some("FREEZING"));
        assert!(read(d.path(), &id).unwrap_err().0.contains("FREEZING"));
        let (d, id) = fixture(me, own_start(), None);
        assert!(read(d.path(), &id).unwrap_err().0.contains("no freezer"));
        assert!(read(d.path(), "c2").unwrap_err().0.contains("state.json"));
        std::fs::create_dir_all(d.path().join("c3")).unwrap();
        std::fs::copy(
            d.path().join(&id).join("state.json"),
            d.path().join("c3/state.json"),
        )
        .unwrap();
        assert!(read(d.path(), "c3").unwrap_err().0.contains("not \"c3\""));
    }
}
