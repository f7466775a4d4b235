//! `netprobe images DIR [--json]`: the clap arguments and the handler, kept in one file so
//! the command line can be moved without touching the decoder.

use crate::exit::ExitClass;
use std::path::PathBuf;
use std::process::ExitCode;

use super::netimg::{images_dir, read_dir};

/// Arguments of `netprobe images`.
#[derive(Debug, clap::Args)]
pub struct ImagesArgs {
    /// A CRIU images folder, a rung folder of an evidence folder (its `images/` is read), or a
    /// checkpoint archive (Podman export, CRI-O/kubelet checkpoint: tar, tar.gz or tar.zst,
    /// told by its content), read as a stream.
    pub dir: PathBuf,
    /// Print the decoded images as JSON (a folder: dir, inventory, namespaces[]; an archive:
    /// evidence-schema/checkpoint-archive.schema.json).
    #[arg(long)]
    pub json: bool,
    /// In the tree, list every saved sysctl (default: only their count).
    #[arg(long)]
    pub sysctls: bool,
}

/// Help text with examples for `netprobe images`.
pub const IMAGES_EXAMPLES: &str = "Examples:
  netprobe images evidence/20261201T021500Z-4242/criu          # a rung folder: reads its images/
  netprobe images /tmp/dump --json | jq '.namespaces[0].devices'
  netprobe images ck.tar.zst                                    # podman container checkpoint --export
  netprobe images checkpoint-web_default-app-2026.tar --json | jq .finding
Exit codes: 0 decoded, 2 the folder is unreadable or holds no CRIU image, an image is malformed (file, offset, reason), or the archive is refused (entry, offset, reason).";

/// The fix named by every "wrong folder" error of `netprobe images`.
const WHAT_TO_GIVE: &str = "give the folder CRIU wrote (runc checkpoint --image-path, criu dump --images-dir) or a rung folder of an evidence folder";

/// Runs `netprobe images`: decodes every network image of the folder and prints the tree or
/// the JSON on stdout. Exit 0 ([`ExitClass::Ok`]) on success, 2 ([`ExitClass::Usage`]; error on stderr naming file, offset, reason) when
/// the folder cannot be read or holds no CRIU image at all (neither `inventory.img` nor a network
/// image: not a CRIU images folder), or an image is malformed.
pub fn run(args: &ImagesArgs) -> ExitCode {
    if args.dir.is_file() {
        return run_archive(args);
    }
    let dir = images_dir(&args.dir);
    if let Err(e) = std::fs::read_dir(&dir) {
        eprintln!(
            "netprobe images: {}: cannot list it as a folder: {e}; {WHAT_TO_GIVE}",
            dir.display()
        );
        return ExitClass::Usage.into();
    }
    match read_dir(&dir) {
        Ok(imgs) if !imgs.inventory && imgs.namespaces.is_empty() => {
            eprintln!(
                "netprobe images: {} holds no CRIU image (no inventory.img, no netns-/netdev-/ifaddr-/route-… file); {WHAT_TO_GIVE}",
                dir.display()
            );
            ExitClass::Usage.into()
        }
        Ok(imgs) => {
            if args.json {
                match serde_json::to_string_pretty(&imgs) {
                    Ok(j) => crate::out::line(j),
                    Err(e) => {
                        eprintln!("netprobe images: {e}");
                        return ExitClass::Usage.into();
                    }
                }
            } else {
                crate::out::raw(super::tree::render(&imgs, args.sysctls));
            }
            ExitClass::Ok.into()
        }
        Err(e) => {
            eprintln!("netprobe images: {e}");
            ExitClass::Usage.into()
        }
    }
}

/// `netprobe images ARCHIVE`: the archive's engine metadata, finding and images tree (or the
/// JSON of [`super::checkpoint::Checkpoint`]). Exit 0, or 2 with the error on stderr.
fn run_archive(args: &ImagesArgs) -> ExitCode {
    use super::checkpoint::{read_checkpoint, render_head};
    let c = match read_checkpoint(&args.dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("netprobe images: {e}");
            return ExitClass::Usage.into();
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&c) {
            Ok(j) => crate::out::line(j),
            Err(e) => {
                eprintln!("netprobe images: {e}");
                return ExitClass::Usage.into();
            }
        }
    } else {
        crate::out::raw(render_head(&c) + &super::tree::render(&c.images, args.sysctls));
    }
    ExitClass::Ok.into()
}
