//! A desktop guest container for tests: overlay over an image's rootfs, `config.json` from
//! `build_spec` + `apply_profile(profile)`, real runc with a private root and real CRIU 4.2.1.
//! The container, the overlay and the runc root are released on drop.

use std::path::{Path, PathBuf};
use std::process::Command;

use netprobe::oci::{
    BundleSpec, ContainerGuard, NetnsSpec, OciError, Runtime, build_spec, read_pid_file,
    unique_container_id,
};
use netprobe::slot::resources::mounts;
use netprobe::x11::socket_under_root;

/// runc under test.
pub const RUNC: &str = "/usr/bin/runc";
/// CRIU under test.
pub const CRIU: &str = netprobe::host::PRIVATE_CRIU;

/// How the overlay is mounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlay {
    /// As the slot mounts it by default (`[overlay]` absent: `index=off`): overlayfs then cannot
    /// open file handles, so CRIU resolves inotify watches by path (irmap).
    Slot,
    /// `index=on,nfs_export=on`: overlayfs serves file handles, CRIU opens inotify watches by
    /// handle.
    NfsExport,
}

/// One guest container.
pub struct Guest {
    /// Everything lives here.
    pub tmp: tempfile::TempDir,
    /// The runtime (private `--root`).
    pub runtime: Runtime,
    /// Unique container id.
    pub id: String,
    /// Current container init pid (host view).
    pub pid: i32,
    guard: Option<ContainerGuard>,
    mounted: bool,
    overlay: Overlay,
    rootfs: PathBuf,
}

impl Guest {
    /// A path in the guest's temp dir.
    pub fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// Mounts the overlay and writes the bundle for `profile` (a file under profiles/).
    pub fn new(rootfs: &Path, profile: &str, overlay: Overlay) -> Guest {
        super::require_root();
        assert!(
            Path::new(RUNC).exists() && Path::new(CRIU).exists(),
            "missing {RUNC} or {CRIU}: run `bash host/setup.sh` as root"
        );
        nix::sys::prctl::set_child_subreaper(true).unwrap();
        let tmp = tempfile::Builder::new()
            .prefix("netprobe-guest-")
            .tempdir()
            .unwrap();
        let runtime = Runtime::new(RUNC, tmp.path().join("runc-root"), Some(CRIU.into()));
        let mut g = Guest {
            tmp,
            runtime,
            id: unique_container_id("np-guest"),
            pid: 0,
            guard: None,
            mounted: false,
            overlay,
            rootfs: rootfs.to_path_buf(),
        };
        g.mount();
        let lp = netprobe::profile::load(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("profiles")
                .join(profile),
        )
        .unwrap();
        let bundle = g.p("bundle");
        std::fs::create_dir_all(&bundle).unwrap();
        let mut spec = build_spec(
            &bundle,
            &BundleSpec {
                rootfs: g.p("merged"),
                readonly_root: false,
                args: vec!["/bin/false".into()],
                netns: NetnsSpec::Private,
                resources: None,
                hostname: "np-guest".into(),
                cgroups_path: None,
            },
        )
        .unwrap();
        netprobe::profile::apply_profile(&mut spec, &lp.profile).unwrap();
        spec.save(bundle.join("config.json")).unwrap();
        g
    }

    /// Mounts the overlay (fresh `work`, existing `upper`).
    pub fn mount(&mut self) {
        for d in ["upper", "merged"] {
            std::fs::create_dir_all(self.p(d)).unwrap();
        }
        let _ = std::fs::remove_dir_all(self.p("work"));
        std::fs::create_dir_all(self.p("work")).unwrap();
        let (lower, upper, work, merged) = (
            self.rootfs.clone(),
            self.p("upper"),
            self.p("work"),
            self.p("merged"),
        );
        let options: Vec<String> = match self.overlay {
            Overlay::Slot => netprobe::profile::OverlaySpec::default().effective(),
            Overlay::NfsExport => vec!["index=on".into(), "nfs_export=on".into()],
        };
        mounts::mount_overlay(&lower, &upper, &work, &merged, &options)
            .unwrap()
            .disarm();
        self.mounted = true;
    }

    /// Unmounts the overlay.
    pub fn unmount(&mut self) {
        if self.mounted {
            mounts::unmount(&self.p("merged")).unwrap();
            self.mounted = false;
        }
    }

    /// runc create + start.
    pub fn run(&mut self) {
        let mut guard = ContainerGuard::new(&self.runtime, self.id.clone());
        let pidf = self.p("init.pid");
        self.runtime
            .create(&self.id, &self.p("bundle"), &pidf)
            .unwrap();
        self.pid = read_pid_file(&pidf).unwrap();
        guard.set_pid(self.pid);
        self.runtime.start(&self.id).unwrap();
        self.guard = Some(guard);
    }

    /// runc checkpoint into `images` (CRIU log in `ck-work/dump.log`); on success the container
    /// is gone.
    pub fn checkpoint(&mut self) -> Result<(), OciError> {
        self.runtime
            .checkpoint(&self.id, &self.p("images"), &self.p("ck-work"), &[])?;
        if let Some(mut g) = self.guard.take() {
            g.disarm();
        }
        Ok(())
    }

    /// runc restore number `n` from `images` (CRIU log in `rs-work<n>/restore.log`).
    pub fn restore(&mut self, n: u32) {
        let mut guard = ContainerGuard::new(&self.runtime, self.id.clone());
        let pidf = self.p(&format!("restore{n}.pid"));
        self.runtime
            .restore(
                &self.id,
                &self.p("bundle"),
                &self.p("images"),
                &self.p(&format!("rs-work{n}")),
                &pidf,
                &[],
            )
            .unwrap();
        self.pid = read_pid_file(&pidf).unwrap();
        guard.set_pid(self.pid);
        self.guard = Some(guard);
    }

    /// Kills and deletes the container now, proving it gone.
    pub fn release(&mut self) {
        if let Some(mut g) = self.guard.take() {
            g.release().unwrap();
        }
    }

    /// The X socket of display :0 through the container's root.
    pub fn socket(&self) -> PathBuf {
        socket_under_root(Path::new(&format!("/proc/{}/root", self.pid)), 0)
    }

    /// A file the guest wrote under its /tmp (a tmpfs in the profiles), read through its root.
    pub fn guest_tmp(&self, name: &str) -> String {
        std::fs::read_to_string(format!("/proc/{}/root/tmp/{name}", self.pid)).unwrap_or_default()
    }

    /// Saves the overlay upper as the snapshot's (`upper.snap`), the overlay unmounted meanwhile.
    pub fn save_upper(&mut self) {
        self.unmount();
        cp_a(&self.p("upper"), &self.p("upper.snap"));
        self.mount();
    }

    /// Container gone, upper put back to the snapshot's, overlay remounted (before a reset).
    pub fn reset_upper(&mut self) {
        self.release();
        self.unmount();
        std::fs::remove_dir_all(self.p("upper")).unwrap();
        cp_a(&self.p("upper.snap"), &self.p("upper"));
        self.mount();
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        if let Some(mut g) = self.guard.take() {
            let _ = g.release();
        }
        if self.mounted {
            let _ = mounts::unmount(&self.p("merged"));
        }
    }
}

/// `cp -a from to`.
pub fn cp_a(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a {} {}", from.display(), to.display());
}
