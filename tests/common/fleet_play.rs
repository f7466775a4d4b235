//! The fleet test (issue 34) inside a VM boot that tests/vm/vm.rs already pays for: Ansible
//! (deploy/ansible/) against this machine (`connection: local`) and the Debian 12 VM of host/vm/
//! over SSH (the boot's command ends with host/vm/fleet-guest.sh: sshd, a key made here), then
//! `netprobe fleet` over what it fetched. See [`prove`] for what is proven. The play against
//! this machine alone ([`local`]: `--check`, a matrix, the refused re-run) is tests/fleet.rs's.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Asserts `o` succeeded, showing its output when not.
pub fn ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what} failed ({}):\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// run.sh in the background; killed (TERM: run.sh then stops qemu and removes its files) if the
/// test ends before the VM powered off.
struct Vm(Option<Child>);

impl Drop for Vm {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take()
            && c.try_wait().ok().flatten().is_none()
        {
            // SAFETY: kill(2) with integer arguments, no memory passed; `c` is our unreaped child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The play's files: its work folder, inventory, the binary it copies, the fleet folder.
pub struct Fleet {
    /// The work folder (inventory, binary, the play's temporary files, `remote/`).
    pub tmp: PathBuf,
    inventory: PathBuf,
    binary: PathBuf,
    /// The fleet folder (`fleet_dir`).
    pub fleet: PathBuf,
    key: PathBuf,
    port: u16,
}

/// The binary the fleet runs, at `to`: this build without its debug info (236 MB → a few MB
/// over SSH into an emulated guest).
fn stripped(to: &Path) {
    ok(
        &Command::new("strip")
            .args(["--strip-debug", "-o"])
            .arg(to)
            .arg(crate::common::EXE)
            .output()
            .unwrap(),
        "strip",
    );
}

/// A fleet of this machine alone (`this-host`, `connection: local`), its files under `work`.
#[allow(dead_code)] // tests/fleet.rs's; tests/vm.rs includes this file too
pub fn local(work: &Path) -> Fleet {
    let binary = work.join("netprobe");
    stripped(&binary);
    let inventory = work.join("inventory.ini");
    fs::write(
        &inventory,
        "[netprobe]\nthis-host ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n",
    )
    .unwrap();
    Fleet {
        tmp: work.to_path_buf(),
        inventory,
        binary,
        fleet: work.join("fleet"),
        key: work.join("no-key"),
        port: 0,
    }
}

impl Fleet {
    /// The work folder on both hosts (the same path in the guest and here).
    pub fn remote(&self) -> PathBuf {
        self.tmp.join("remote")
    }

    fn ssh(&self, cmd: &str) -> Output {
        Command::new("ssh")
            .args([
                "-i",
                self.key.to_str().unwrap(),
                "-p",
                &self.port.to_string(),
            ])
            .args([
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
            ])
            .args([
                "-o",
                "ConnectTimeout=10",
                "-o",
                "BatchMode=yes",
                "-o",
                "LogLevel=ERROR",
            ])
            .arg("root@127.0.0.1")
            .arg(cmd)
            .output()
            .unwrap()
    }

    /// `ansible-playbook` of deploy/ansible/fleet.yml over the inventory, `--expect
    /// runtime-empty-ns`, then `extra`.
    pub fn play(&self, extra: &[&str]) -> Output {
        Command::new("ansible-playbook")
            .arg("-i")
            .arg(&self.inventory)
            .arg(repo().join("deploy/ansible/fleet.yml"))
            .arg("-e")
            .arg(format!("netprobe_binary={}", self.binary.display()))
            .arg("-e")
            .arg(format!("fleet_dir={}", self.fleet.display()))
            .args([
                "-e",
                r#"{"netprobe_run_args": ["--expect", "runtime-empty-ns"]}"#,
            ])
            .arg("-e")
            .arg(format!("netprobe_remote_dir={}", self.remote().display()))
            .args(extra)
            .env("ANSIBLE_NOCOLOR", "1")
            .env("ANSIBLE_HOST_KEY_CHECKING", "False")
            .env("ANSIBLE_SSH_CONTROL_PATH_DIR", self.tmp.join("cp"))
            .env("ANSIBLE_LOCAL_TEMP", self.tmp.join("ansible-local"))
            .env("ANSIBLE_TIMEOUT", "30")
            .output()
            .unwrap()
    }

    /// `netprobe fleet FLEET --expect runtime-empty-ns`: exit code, fleet.json, stdout + stderr.
    pub fn fleet(&self) -> (i32, serde_json::Value, String) {
        let o = Command::new(crate::common::EXE)
            .arg("fleet")
            .arg(&self.fleet)
            .args(["--expect", "runtime-empty-ns"])
            .output()
            .unwrap();
        let j: serde_json::Value =
            serde_json::from_slice(&fs::read(self.fleet.join("fleet.json")).unwrap()).unwrap();
        let text =
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        (o.status.code().unwrap(), j, text)
    }
}

/// The host named `name` in `fleet.json`.
pub fn host<'a>(j: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    j["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == name)
        .unwrap_or_else(|| panic!("no host {name} in {j}"))
}

/// Every file under `dir` with its bytes (the fleet folder before and after a play that must
/// change nothing).
#[allow(dead_code)] // tests/fleet.rs's; tests/vm.rs includes this file too
pub fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v = Vec::new();
    if !dir.exists() {
        return v;
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p.clone());
                v.push((p, Vec::new()));
            } else {
                v.push((p.clone(), fs::read(&p).unwrap()));
            }
        }
    }
    v.sort();
    v
}

/// Processes whose command line mentions `needle`.
pub fn procs_mentioning(needle: &str) -> Vec<String> {
    let mut v = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(c) = fs::read(e.path().join("cmdline")) {
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            if c.contains(needle) {
                v.push(c);
            }
        }
    }
    v
}

/// A VM booted by host/vm/run.sh with `--ssh-port`, its command ending in fleet-guest.sh.
pub struct Booted {
    vm: Vm,
    fleet: Fleet,
    /// run.sh's stderr once it ended.
    pub run_stderr: String,
}

/// The key pair (made here) and the free port for [`boot`]: `(private key, port)`. The public
/// key is `<key>.pub`; put it into the guest and pass `/io/in/fleet_key.pub` to fleet-guest.sh.
pub fn key_and_port(work: &Path) -> (PathBuf, u16) {
    let key = work.join("fleet_key");
    ok(
        &Command::new("ssh-keygen")
            .args([
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "netprobe-fleet-test",
                "-f",
            ])
            .arg(&key)
            .output()
            .unwrap(),
        "ssh-keygen",
    );
    (key, free_port())
}

/// The guest command's tail that makes the VM a fleet host until the controller stops it.
pub const GUEST_TAIL: &str = "sh /io/in/fleet-guest.sh /io/in/fleet_key.pub 1800";

/// Starts `run` (a run.sh command with `--ssh-port port` and fleet-guest.sh put in) and waits
/// for the guest's sshd (it starts once the command before [`GUEST_TAIL`] has ended).
/// `work` holds the fleet's files (not run.sh's TMPDIR).
pub fn boot(mut run: Command, work: &Path, key: PathBuf, port: u16, bound: Duration) -> Booted {
    let child = run
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut vm = Vm(Some(child));
    let binary = work.join("netprobe");
    stripped(&binary);
    let inventory = work.join("inventory.ini");
    fs::write(
        &inventory,
        format!(
            "[netprobe]\nthis-host ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n\
             vm ansible_host=127.0.0.1 ansible_port={port} ansible_user=root \
             ansible_ssh_private_key_file={} ansible_python_interpreter=/usr/bin/python3 \
             ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'\n",
            key.display()
        ),
    )
    .unwrap();
    let fleet = Fleet {
        fleet: work.join("fleet"),
        tmp: work.to_path_buf(),
        inventory,
        binary,
        key,
        port,
    };
    let t = Instant::now();
    loop {
        if let Some(st) = vm.0.as_mut().unwrap().try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            let _ =
                vm.0.as_mut()
                    .unwrap()
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err);
            panic!("the VM ended before its sshd came up ({st}): {err}");
        }
        if fleet.ssh("true").status.success() {
            break;
        }
        assert!(t.elapsed() < bound, "no sshd in the VM after {bound:?}");
        std::thread::sleep(Duration::from_secs(3));
    }
    eprintln!("fleet: the VM's sshd answered after {:?}", t.elapsed());
    Booted {
        vm,
        fleet,
        run_stderr: String::new(),
    }
}
/// Proves, with the VM of `b` up: the play fetches both hosts' evidence with their exit codes;
/// the table shows both kernels and cgroup modes, `runtime-empty-ns` on both, both verified
/// (exit 0); a line removed from the VM's `oci/dump.log` makes that host alone NOT VERIFIED
/// (exit 1); then the VM is shut down (its command ends, run.sh powers it off) and the play
/// reports it unreachable, the table lists it with Ansible's reason, this machine's new result
/// stands (exit 4). (`--check` and the refused re-run are proven against this machine alone,
/// tests/fleet.rs: they need no second host.) Returns run.sh's exit status (the caller checks
/// it and what the boot's earlier command left).
pub fn prove(b: &mut Booted) -> std::process::ExitStatus {
    let f = &b.fleet;
    let vm = &mut b.vm;
    let run_stderr = &mut b.run_stderr;
    let remote = f.remote().display().to_string();

    // The play: both hosts run and are fetched.
    let p0 = Instant::now();
    let o = f.play(&[]);
    ok(&o, "ansible-playbook");
    eprintln!("play over both hosts: {:?}", p0.elapsed());
    let (rc, j, text) = f.fleet();
    eprintln!("fleet: the table after the play:\n{text}");
    assert_eq!(rc, 0, "{text}");
    let (me, guest) = (host(&j, "this-host"), host(&j, "vm"));
    let uname =
        String::from_utf8(Command::new("uname").arg("-r").output().unwrap().stdout).unwrap();
    assert_eq!(me["kernel"], uname.trim(), "{text}");
    assert!(
        guest["kernel"].as_str().unwrap().starts_with("6.1."),
        "{text}"
    );
    assert_eq!(guest["cgroup"], "v2", "{text}");
    assert_ne!(me["cgroup"], guest["cgroup"], "{text}");
    for h in [me, guest] {
        assert_eq!(h["state"], "verified", "{text}");
        assert_eq!(h["verdict"], "runtime-empty-ns", "{text}");
        assert_eq!(h["run_exit"], 0, "{text}");
        assert_eq!(h["doctor_exit"], 0, "{text}");
    }
    assert!(text.contains("| vm | 6.1."), "{text}");
    // The work folder of the run is gone on both hosts.
    let left = f.ssh(&format!("ls -A {remote}"));
    assert_eq!(String::from_utf8_lossy(&left.stdout), "", "left in the VM");
    assert_eq!(fs::read_dir(f.remote()).unwrap().count(), 0, "left here");

    // One host's evidence tampered: that host alone is NOT VERIFIED, exit 1.
    let dump = f
        .fleet
        .join(guest["evidence"].as_str().unwrap())
        .join("oci/dump.log");
    let log = fs::read_to_string(&dump).unwrap();
    let mut lines: Vec<&str> = log.lines().collect();
    lines.remove(lines.len() / 2);
    fs::write(&dump, lines.join("\n") + "\n").unwrap();
    let (rc, j, text) = f.fleet();
    assert_eq!(rc, 1, "{text}");
    assert_eq!(host(&j, "vm")["state"], "not-verified", "{text}");
    assert!(
        host(&j, "vm")["reason"]
            .as_str()
            .unwrap()
            .contains("oci/dump.log"),
        "{text}"
    );
    assert_eq!(host(&j, "this-host")["state"], "verified", "{text}");
    assert!(text.contains("**NOT VERIFIED**"), "{text}");

    // The VM shut down: the play reports it unreachable, the table names it with Ansible's
    // reason, this machine's new result stands.
    let o = f.ssh("touch /run/netprobe-fleet-done");
    ok(&o, "ssh touch");
    let st = vm.0.as_mut().unwrap().wait().unwrap();
    let mut err = String::new();
    use std::io::Read;
    vm.0.as_mut()
        .unwrap()
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    run_stderr.push_str(&err);
    let vm_status = st;
    vm.0 = None;
    let o = f.play(&[]);
    let so = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(so.contains("UNREACHABLE!"), "{so}");
    let (rc, j, text) = f.fleet();
    eprintln!("fleet: the table with the VM shut down:\n{text}");
    assert_eq!(rc, 4, "{text}");
    let g = host(&j, "vm");
    assert_eq!(g["state"], "unreachable", "{text}");
    let reason = g["reason"].as_str().unwrap();
    assert!(
        reason.contains("ssh") || reason.contains("Connection refused"),
        "{reason}"
    );
    assert!(
        text.contains(reason.split_whitespace().next().unwrap()),
        "{text}"
    );
    let me = host(&j, "this-host");
    assert_eq!(me["state"], "verified", "{text}");
    assert_eq!(me["verdict"], "runtime-empty-ns", "{text}");
    // Two play runs of this machine kept side by side, the newest used.
    assert_eq!(fs::read_dir(f.fleet.join("this-host")).unwrap().count(), 2);

    // Nothing of the fleet left running (Ansible's SSH masters end with the VM).
    assert!(
        procs_mentioning(f.tmp.to_str().unwrap()).is_empty(),
        "processes left"
    );
    assert_eq!(fs::read_dir(f.remote()).unwrap().count(), 0, "left here");
    vm_status
}
