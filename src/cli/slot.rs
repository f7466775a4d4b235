//! `netprobe slot VERB`: the slot driver of the OCI reference arm. Each verb is a clap
//! subcommand with only the flags it takes, so clap itself rejects a provision-only flag on
//! another verb, `--no-probe-gate` without a non-blank `--reason`, `--no-probe-gate` with
//! `--probe-evidence`, a malformed `--image-sha256` and `--image-sha256` without `--image`;
//! [`netprobe::slot::gate::pure_checks::image_pin`] adds the one rule clap cannot express (a `.qcow2` image needs the pin,
//! another image must not have one). Every usage error exits 2; with `--json` it is also
//! printed on stdout as the slot error document ([`usage_json`]).

use super::{Execute, fail};
use netprobe::exit::ExitClass;
use netprobe::slot::gate::pure_checks;
use netprobe::slot::{SlotArgs, SlotError, Verb};
use std::path::PathBuf;
use std::process::ExitCode;

const EXAMPLES: &str = "Examples:
  sudo netprobe run --evidence /var/lib/netprobe/probe-1    # the probes first, into a new folder
  sudo netprobe slot provision --slot 0 --state-dir /var/lib/netprobe/slots --probe-evidence /var/lib/netprobe/probe-1
  sudo netprobe slot snapshot  --slot 0 --state-dir /var/lib/netprobe/slots
  sudo netprobe slot restore   --slot 0 --state-dir /var/lib/netprobe/slots
  sudo netprobe slot reset     --slot 0 --state-dir /var/lib/netprobe/slots
  sudo netprobe slot cleanup   --slot 0 --state-dir /var/lib/netprobe/slots
";

/// The slot driver of the OCI reference arm (provision, snapshot, restore, reset, cleanup, status).
#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct SlotCmd {
    /// The verb.
    #[command(subcommand)]
    verb: SlotVerb,
}

/// The six verbs, in lifecycle order.
#[derive(clap::Subcommand)]
enum SlotVerb {
    /// Create a fresh slot: image, overlay, holder, bundle, container, ready gates.
    #[command(after_help = "Examples:
  sudo netprobe run --evidence /var/lib/netprobe/probe-1    # the probes first, into a new folder
  sudo netprobe slot provision --slot 0 --state-dir /var/lib/netprobe/slots --probe-evidence /var/lib/netprobe/probe-1
  sudo netprobe slot provision --slot 2 --state-dir /var/lib/netprobe/slots --profile profiles/desktop.toml --no-probe-gate --reason 'desktop guest'
  sudo netprobe slot provision --slot 1 --state-dir /var/lib/netprobe/slots --image desktop.qcow2 --image-sha256 <64 hex> --no-probe-gate --reason 'probe evidence on the other host'
")]
    Provision(ProvisionCmd),
    /// Record the network state, checkpoint the container, save the overlay upper.
    #[command(
        after_help = "Example:\n  sudo netprobe slot snapshot --slot 0 --state-dir /var/lib/netprobe/slots\n"
    )]
    Snapshot(LaterVerbCmd),
    /// Restore from the complete snapshot (container must be proven gone), with the gates.
    #[command(
        after_help = "Example:\n  sudo netprobe slot restore --slot 0 --state-dir /var/lib/netprobe/slots\n"
    )]
    Restore(LaterVerbCmd),
    /// Container proven gone, upper reset to the snapshot's, restore with the same gates.
    #[command(
        after_help = "Example:\n  sudo netprobe slot reset --slot 0 --state-dir /var/lib/netprobe/slots\n"
    )]
    Reset(LaterVerbCmd),
    /// Release everything (container, mounts, FUSE export, holder); evidence kept.
    #[command(
        after_help = "Example:\n  sudo netprobe slot cleanup --slot 0 --state-dir /var/lib/netprobe/slots\n"
    )]
    Cleanup(LaterVerbCmd),
    /// Print the slot state as JSON (schema `evidence-schema/slot-state.schema.json`).
    #[command(
        after_help = "Example:\n  netprobe slot status --slot 0 --state-dir /var/lib/netprobe/slots --json\n"
    )]
    Status(StatusCmd),
    /// Remove the oldest verb evidence folders beyond --keep (never the provision's, the last
    /// snapshot's, or a failed verb's without --include-failed), each recorded in the journal
    /// with its verb.json sha256.
    #[command(
        after_help = "Example:\n  sudo netprobe slot prune --slot 0 --state-dir /var/lib/netprobe/slots --keep 20\n"
    )]
    Prune(PruneCmd),
}

/// `slot prune`.
#[derive(clap::Args)]
struct PruneCmd {
    #[command(flatten)]
    target: Target,
    /// How many verb folders to keep (the newest; at least 1). Protected folders are kept in
    /// addition.
    #[arg(long, allow_hyphen_values = true, value_parser = netprobe::slot::verb::prune::parse_keep)]
    keep: std::num::NonZeroU32,
    /// Let failed and interrupted verbs' folders go too.
    #[arg(long)]
    include_failed: bool,
    #[command(flatten)]
    json: Json,
}

impl PruneCmd {
    fn execute(self) -> ExitCode {
        let r = netprobe::slot::verb::prune::prune(
            &self.target.state_dir,
            &self.target.slot,
            self.keep,
            self.include_failed,
        );
        match r {
            Ok(o) => {
                if self.json.json {
                    super::out::line(serde_json::to_string_pretty(&o).unwrap_or_default());
                } else {
                    let mut t = format!(
                        "slot {}: pruned {} verb folder(s), {} remain",
                        self.target.slot,
                        o.removed.len(),
                        o.remaining
                    );
                    for r in &o.removed {
                        t.push_str(&format!(
                            "\n  removed {} (verb.json sha256 {}, recorded in journal.jsonl)",
                            r.folder,
                            r.verb_sha256.as_deref().unwrap_or("none")
                        ));
                    }
                    for k in &o.kept_beyond {
                        t.push_str(&format!("\n  kept {}: {}", k.folder, k.why));
                    }
                    super::out::line(t);
                }
                ExitClass::Ok.into()
            }
            Err(e) => fail(e.exit_class(), e),
        }
    }
}

/// The slot every verb names.
#[derive(clap::Args)]
struct Target {
    /// Slot number (digits only, 0 to 999).
    #[arg(long, allow_hyphen_values = true)]
    slot: String,
    /// State directory holding the slots (provision creates it if missing; never a symlink).
    #[arg(long)]
    state_dir: PathBuf,
}

/// `--json`, which every verb takes (listed last, as before the verbs were subcommands).
#[derive(clap::Args)]
struct Json {
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

/// `slot provision`.
#[derive(clap::Args)]
struct ProvisionCmd {
    #[command(flatten)]
    target: Target,
    /// Image: a directory or a .qcow2 file. Default: the embedded busybox rootfs serving HTTP on :5000.
    /// An image declares its guest server's TCP port in /etc/netprobe-guest-port (one number);
    /// without that file the guest-http gate is "not applicable". A directory is used in place as
    /// the overlay's lower: it must not change while the slot lives (snapshot, restore and reset
    /// refuse at gate image-unchanged, naming what changed).
    #[arg(long, conflicts_with = "profile")]
    image: Option<PathBuf>,
    /// Slot profile (TOML; evidence-schema/slot-profile.schema.json, examples in profiles/):
    /// image, process, capabilities, resources, mounts, display and readiness checks. Default:
    /// the built-in profile (the embedded busybox image).
    #[arg(long)]
    profile: Option<PathBuf>,
    /// sha256 pin of a .qcow2 --image.
    #[arg(long, requires = "image", value_parser = parse_sha256)]
    image_sha256: Option<String>,
    /// Evidence folder of a passing probe run for the same runtime and CRIU (provision gate):
    /// the folder `netprobe run --evidence DIR` wrote (without --evidence, the DIR of the
    /// `evidence: DIR/netprobe-result.json` line the run printed).
    #[arg(long, conflicts_with = "no_probe_gate")]
    probe_evidence: Option<PathBuf>,
    /// Skip the probe gate (recorded in the slot with --reason).
    #[arg(long, requires = "reason")]
    no_probe_gate: bool,
    /// Why the probe gate is skipped (only with --no-probe-gate).
    // Not `requires = "no_probe_gate"`: a flag's default (false) satisfies clap's `requires`;
    // [`SlotCmd::validate`] checks it.
    #[arg(long, value_parser = parse_reason)]
    reason: Option<String>,
    /// OCI runtime binary. Default: the one the --probe-evidence run used, else runc in PATH.
    #[arg(long)]
    runtime: Option<PathBuf>,
    /// CRIU binary. Default: the one the --probe-evidence run used, else /opt/criu-4.2.1 (set-up's build), else criu in PATH.
    #[arg(long)]
    criu: Option<PathBuf>,
    /// Accept a runtime or CRIU that is a #! script (refused otherwise, exit 3: the slot would
    /// seal and prove the script, not the program it runs); REASON is recorded in state.json.
    #[arg(long, value_name = "REASON", value_parser = parse_reason)]
    allow_script_binaries: Option<String>,
    /// cgroup driver: systemd (runc --systemd-cgroup, a scope unit; only where systemd is pid 1,
    /// else exit 3) or cgroupfs. Default: systemd where systemd is pid 1, else cgroupfs.
    #[arg(long, value_name = "systemd|cgroupfs", value_parser = parse_driver)]
    cgroup_driver: Option<netprobe::cgroup::CgroupDriver>,
    /// Publish a guest port on the host (repeatable; added to the profile's
    /// [[network.publish]]): the holder listens on HOST_ADDR:HOST_PORT (default address
    /// 127.0.0.1) in the host's namespace and forwards each connection to 127.0.0.1:GUEST_PORT
    /// in the slot's. GUEST_PORT must be one the profile serves (network.guest_port or a tcp/http
    /// readiness check). A taken host port is refused (exit 3) naming who holds it.
    #[arg(long, value_name = "[HOST_ADDR:]HOST_PORT:GUEST_PORT", value_parser = netprobe::slot::resources::published_ports::parse_publish)]
    publish: Vec<netprobe::profile::Publish>,
    #[command(flatten)]
    json: Json,
}

/// `--cgroup-driver`: `systemd` or `cgroupfs` (a bad name is a usage error, exit 2).
fn parse_driver(s: &str) -> Result<netprobe::cgroup::CgroupDriver, netprobe::cgroup::CgroupError> {
    s.parse()
}

/// `slot snapshot|restore|reset|cleanup`: the binaries default to those recorded at provision.
#[derive(clap::Args)]
struct LaterVerbCmd {
    #[command(flatten)]
    target: Target,
    /// OCI runtime binary. Default: the sealed copy the holder keeps (state.json runtime.sealed), else the one recorded at provision; a path given is hashed whole and must have the recorded sha256.
    #[arg(long)]
    runtime: Option<PathBuf>,
    /// CRIU binary. Default: the sealed copy the holder keeps (state.json criu.sealed), else the one recorded at provision; a path given is hashed whole and must have the recorded sha256.
    #[arg(long)]
    criu: Option<PathBuf>,
    #[command(flatten)]
    json: Json,
}

/// `slot status`.
#[derive(clap::Args)]
struct StatusCmd {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    json: Json,
}

/// `--image-sha256`: 64 lower-case hex digits.
fn parse_sha256(s: &str) -> Result<String, NotSha256> {
    if s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(s.to_string())
    } else {
        Err(NotSha256)
    }
}

/// An `--image-sha256` value that is not 64 lower-case hex digits.
#[derive(Debug, thiserror::Error)]
#[error("expected 64 lower-case hex digits")]
struct NotSha256;

/// `--reason`: not blank (it is recorded in the slot; [`pure_checks::probe_gate_reason`]).
fn parse_reason(s: &str) -> Result<String, pure_checks::UsageError> {
    pure_checks::probe_gate_reason(Some(s)).map(|()| s.to_string())
}

impl SlotVerb {
    /// The library's arguments for this verb (flags a verb does not take stay unset).
    fn into_args(self) -> SlotArgs {
        match self {
            SlotVerb::Provision(p) => {
                let mut a = args(Verb::Provision, p.target, p.json, p.runtime, p.criu);
                a.image = p.image;
                a.image_sha256 = p.image_sha256;
                a.profile = p.profile;
                a.probe_evidence = p.probe_evidence;
                a.no_probe_gate = p.no_probe_gate;
                a.reason = p.reason;
                a.cgroup_driver = p.cgroup_driver;
                a.publish = p.publish;
                a.allow_script_binaries = p.allow_script_binaries;
                a
            }
            SlotVerb::Snapshot(c) => c.into_args(Verb::Snapshot),
            SlotVerb::Restore(c) => c.into_args(Verb::Restore),
            SlotVerb::Reset(c) => c.into_args(Verb::Reset),
            SlotVerb::Cleanup(c) => c.into_args(Verb::Cleanup),
            SlotVerb::Status(c) => args(Verb::Status, c.target, c.json, None, None),
            // `slot prune` runs no verb: [`SlotCmd::execute`] hands it to `PruneCmd` first.
            SlotVerb::Prune(_) => unreachable!("slot prune is not a verb run"),
        }
    }
}

impl LaterVerbCmd {
    fn into_args(self, verb: Verb) -> SlotArgs {
        args(verb, self.target, self.json, self.runtime, self.criu)
    }
}

fn args(
    verb: Verb,
    target: Target,
    json: Json,
    runtime: Option<PathBuf>,
    criu: Option<PathBuf>,
) -> SlotArgs {
    let mut a = SlotArgs::new(verb, target.slot, target.state_dir);
    a.json = json.json;
    a.runtime = runtime;
    a.criu = criu;
    a
}

impl SlotCmd {
    /// Checks what clap could not (`--reason` only with `--no-probe-gate`;
    /// [`netprobe::slot::gate::pure_checks::image_pin`], which the library
    /// applies again to every provision). Errors: a clap usage error.
    pub fn validate(&self) -> Result<(), clap::Error> {
        let SlotVerb::Provision(p) = &self.verb else {
            return Ok(());
        };
        let reason_alone = match p.no_probe_gate {
            true => None,
            false => pure_checks::reason_without_override(p.reason.as_deref()).err(),
        };
        let pin = pure_checks::image_pin(p.image.as_deref(), p.image_sha256.as_deref()).err();
        if let Some(m) = reason_alone.or(pin) {
            let mut cmd = <super::Cli as clap::CommandFactory>::command();
            let cmd = cmd
                .find_subcommand_mut("slot")
                .and_then(|s| s.find_subcommand_mut("provision"))
                .map(|c| c.clone().bin_name("netprobe slot provision"))
                .unwrap_or_default();
            return Err(cmd
                .clone()
                .error(clap::error::ErrorKind::ArgumentConflict, m));
        }
        Ok(())
    }
}

impl Execute for SlotCmd {
    fn execute(self) -> ExitCode {
        // A signal kills the step's process tree (the runtime, CRIU), releases what the step had
        // registered (a half-made container, CRIU's leftover mounts, the CRIU PATH folder, the
        // runtime's log; CRIU's network lock after a restore or reset; a provision's holder,
        // overlay, image mount, loop device and FUSE export), writes `interrupted.txt` and the
        // journal's end, and ends the verb (128+N). The slot's recorded state is kept: the verb
        // can be run again (a provision: `slot cleanup`, then another slot number).
        if let Err(e) = netprobe::ns::cleanup::install_signal_handler() {
            eprintln!(
                "netprobe: could not install the signal handler ({e}); a signal may leave the current step's processes running"
            );
        }
        if let SlotVerb::Prune(p) = self.verb {
            return p.execute();
        }
        let args = self.verb.into_args();
        match netprobe::slot::run_verb(&args) {
            Ok(o) => {
                if args.json {
                    super::out::line(
                        serde_json::to_string_pretty(&o.to_json()).unwrap_or_default(),
                    );
                } else {
                    super::out::line(o.render());
                }
                ExitClass::Ok.into()
            }
            Err(e) => {
                if args.json {
                    super::out::line(
                        serde_json::to_string_pretty(&e.to_json()).unwrap_or_default(),
                    );
                }
                fail(e.exit_class(), e)
            }
        }
    }
}

/// Flags only `slot provision` takes (named in the hint when another verb is given one).
const PROVISION_ONLY: [&str; 6] = [
    "--image",
    "--image-sha256",
    "--probe-evidence",
    "--no-probe-gate",
    "--reason",
    "--publish",
];

/// For a clap error of a `netprobe slot …` command line `argv` (without the program name):
/// adds a hint when a provision-only flag was given to another verb, and returns the slot
/// error document to print on stdout when `--json` was given (`kind: usage`, `exit_code: 2`,
/// the slot as typed). `None`: help or version output, not a slot command line, or no `--json`.
pub fn usage_json(argv: &[String], err: &mut clap::Error) -> Option<serde_json::Value> {
    if !err.use_stderr() || argv.first().map(String::as_str) != Some("slot") {
        return None;
    }
    let verb = argv.get(1).map(String::as_str).unwrap_or("");
    if verb != "provision"
        && let Some(clap::error::ContextValue::String(arg)) =
            err.get(clap::error::ContextKind::InvalidArg)
        && PROVISION_ONLY.contains(&arg.split('=').next().unwrap_or(""))
    {
        let hint = format!(
            "{} are for `netprobe slot provision` only",
            PROVISION_ONLY.join(", ")
        );
        // Replaces clap's "a similar argument exists" guess, which would name another flag.
        err.remove(clap::error::ContextKind::SuggestedArg);
        err.insert(
            clap::error::ContextKind::Suggested,
            clap::error::ContextValue::StyledStrs(vec![hint.into()]),
        );
    }
    if !argv.iter().any(|a| a == "--json") {
        return None;
    }
    let slot = argv
        .iter()
        .position(|a| a == "--slot")
        .and_then(|i| argv.get(i + 1).cloned())
        .or_else(|| {
            argv.iter()
                .find_map(|a| a.strip_prefix("--slot=").map(str::to_string))
        })
        .unwrap_or_default();
    // The error line and its tips, as one line.
    let rendered = err.render().to_string();
    let message: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(|l| l.trim().trim_start_matches("error: "))
        .filter(|l| !l.is_empty())
        .collect();
    let message = message.join("; ");
    Some(SlotError::usage(&slot, message).to_json())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_and_reason_parsers() {
        assert!(parse_sha256(&"a".repeat(64)).is_ok());
        assert!(parse_sha256(&"A".repeat(64)).is_err());
        assert!(parse_sha256("abc").is_err());
        assert!(parse_reason("  ").is_err());
        assert!(parse_reason("why").is_ok());
    }
}
