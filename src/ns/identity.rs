//! Process identity: pid + start time + netns inode, read from `/proc`.

use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{NsError, StatParseError};

/// Who a process is, beyond its (reusable) pid.
///
/// Shape (JSON, one object): `{"pid": 1234, "start_time": 567890, "netns_inode": 4026532290}`.
/// Two identities are the same process in the same network namespace iff all three fields are
/// equal. Source: `proc(5)` (`/proc/PID/stat` field 22, `/proc/PID/ns/net`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProcessIdentity {
    /// Process id (tgid) in netprobe's pid namespace.
    pub pid: i32,
    /// Field 22 of `/proc/PID/stat` (`starttime`): clock ticks (`_SC_CLK_TCK`, usually 100 Hz)
    /// since boot. Parsed after the last `)` since `comm` may contain spaces and `)`.
    pub start_time: u64,
    /// `st_ino` of `/proc/PID/ns/net`: the network namespace's inode number.
    pub netns_inode: u64,
}

impl fmt::Display for ProcessIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pid {} (start_time {} ticks, netns inode {})",
            self.pid, self.start_time, self.netns_inode
        )
    }
}

/// The fields of `/proc/PID/stat` netprobe needs.
///
/// Shape: `state` is the one-letter state (field 3, e.g. `S`, `Z`), `start_time` is field 22
/// in clock ticks since boot. Source: `proc(5)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFields {
    /// Field 3: `R`, `S`, `D`, `Z`, `T`, `t`, `X`, `I`, ...
    pub state: char,
    /// Field 22: start time in clock ticks since boot.
    pub start_time: u64,
}

/// Parses one `/proc/PID/stat` line. `comm` (field 2) is skipped by splitting after the LAST
/// `)`, so a comm such as `a) (b c` does not shift the fields.
///
/// Errors: [`StatParseError`] when there is no `)`, or fields 3 or 22 are missing or malformed.
pub fn parse_stat(line: &str) -> Result<StatFields, StatParseError> {
    let close = line.rfind(')').ok_or(StatParseError::NoCommEnd)?;
    let rest = &line[close + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // rest starts at field 3 (state); field N is fields[N - 3].
    let state_str = fields.first().ok_or(StatParseError::NoState)?;
    let mut chars = state_str.chars();
    let state = match (chars.next(), chars.next()) {
        (Some(c), None) => c,
        _ => return Err(StatParseError::State(state_str.to_string())),
    };
    let st = fields
        .get(22 - 3)
        .ok_or(StatParseError::TooFewFields(fields.len()))?;
    let start_time = st
        .parse::<u64>()
        .map_err(|source| StatParseError::StartTime {
            field: st.to_string(),
            source,
        })?;
    Ok(StatFields { state, start_time })
}

fn proc_pid_path(pid: i32, tail: &str) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/{tail}"))
}

fn is_gone_errno(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH))
}

/// Reads `/proc/PID/stat`; `Gone` if there is no such process or it is a zombie/dead task.
fn read_stat(pid: i32) -> Result<StatFields, NsError> {
    let path = proc_pid_path(pid, "stat");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if is_gone_errno(&e) => return Err(NsError::Gone { pid }),
        Err(source) => return Err(NsError::ProcRead { path, source }),
    };
    let fields = parse_stat(&text).map_err(|reason| NsError::StatParse {
        path: path.clone(),
        reason,
    })?;
    if matches!(fields.state, 'Z' | 'X' | 'x') {
        return Err(NsError::Gone { pid });
    }
    Ok(fields)
}

/// `st_ino` of a namespace file (`/proc/PID/ns/net`, `/proc/thread-self/ns/net` or a bind
/// mount of one). Errors: `ProcRead` naming the path.
pub(crate) fn ns_inode(path: &Path) -> Result<u64, NsError> {
    std::fs::metadata(path)
        .map(|m| m.ino())
        .map_err(|source| NsError::ProcRead {
            path: path.to_path_buf(),
            source,
        })
}

impl ProcessIdentity {
    /// Reads the identity of live process `pid` from `/proc`: stat, then the netns inode, then
    /// stat again to prove the pid was not reused in between.
    ///
    /// Errors: `Gone { pid }` if the process does not exist or is a zombie; `ProcRead` /
    /// `StatParse` naming the file if anything is unreadable; `IdentityChanged` if the start
    /// time changed during the read (pid reuse race). Source: `proc(5)`.
    pub fn read(pid: i32) -> Result<ProcessIdentity, NsError> {
        if pid <= 0 {
            return Err(NsError::Gone { pid });
        }
        let first = read_stat(pid)?;
        let ns_path = proc_pid_path(pid, "ns/net");
        let netns_inode = match std::fs::metadata(&ns_path) {
            Ok(m) => m.ino(),
            // The task exited between the two reads (its nsproxy is released at exit).
            Err(e) if is_gone_errno(&e) => return Err(NsError::Gone { pid }),
            Err(source) => {
                return Err(NsError::ProcRead {
                    path: ns_path,
                    source,
                });
            }
        };
        let second = read_stat(pid)?;
        let id = ProcessIdentity {
            pid,
            start_time: first.start_time,
            netns_inode,
        };
        if second.start_time != first.start_time {
            return Err(NsError::IdentityChanged {
                expected: id,
                found: ProcessIdentity {
                    start_time: second.start_time,
                    ..id
                },
            });
        }
        Ok(id)
    }

    /// Proves that the process recorded in `self` is still alive, with the same start time and
    /// in the same network namespace.
    ///
    /// Errors (fail closed): `Gone { pid }` if it exited; `IdentityChanged { expected, found }`
    /// if the pid now belongs to another process or the netns differs; `ProcRead`/`StatParse`
    /// if `/proc` could not be read.
    pub fn verify(&self) -> Result<(), NsError> {
        let found = ProcessIdentity::read(self.pid)?;
        if found != *self {
            return Err(NsError::IdentityChanged {
                expected: *self,
                found,
            });
        }
        Ok(())
    }

    /// `/proc/<pid>/ns/net` of this process.
    pub fn netns_path(&self) -> PathBuf {
        proc_pid_path(self.pid, "ns/net")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(comm: &str, start: u64) -> String {
        // 52 fields as on Linux 6.x; field 22 = start.
        let mut f: Vec<String> = vec!["4242".into(), format!("({comm})"), "S".into()];
        for n in 4..=52 {
            f.push(if n == 22 {
                start.to_string()
            } else {
                n.to_string()
            });
        }
        f.join(" ") + "\n"
    }

    #[test]
    fn parses_plain_comm() {
        let s = parse_stat(&line("sleep", 123456)).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.start_time, 123456);
    }

    #[test]
    fn parses_comm_with_parens_and_spaces() {
        let s = parse_stat(&line("a) (b c ) x", 987)).unwrap();
        assert_eq!(
            s,
            StatFields {
                state: 'S',
                start_time: 987
            }
        );
        let s = parse_stat(&line(") (", 5)).unwrap();
        assert_eq!(s.start_time, 5);
        let s = parse_stat(&line("))", 6)).unwrap();
        assert_eq!(s.start_time, 6);
    }

    #[test]
    fn rejects_malformed() {
        assert!(parse_stat("4242 no paren S 1 2").is_err());
        assert!(parse_stat("4242 (x) S 1 2 3").is_err());
        assert!(
            parse_stat("4242 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 notnum").is_err()
        );
        assert!(parse_stat("4242 (x) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19").is_err());
    }

    #[test]
    fn reads_and_verifies_self() {
        let pid = std::process::id() as i32;
        let id = ProcessIdentity::read(pid).unwrap();
        assert_eq!(id.pid, pid);
        assert!(id.start_time > 0);
        id.verify().unwrap();
        let other = ProcessIdentity {
            start_time: id.start_time + 1,
            ..id
        };
        assert!(matches!(
            other.verify(),
            Err(NsError::IdentityChanged { .. })
        ));
    }

    #[test]
    fn identity_json_shape() {
        let id = ProcessIdentity {
            pid: 1,
            start_time: 2,
            netns_inode: 3,
        };
        let j = serde_json::to_string(&id).unwrap();
        assert_eq!(j, r#"{"pid":1,"start_time":2,"netns_inode":3}"#);
    }
}
