//! The ladder runner: validates the request, refuses an unready host, creates the evidence
//! folder, runs the requested rungs cheapest first, evaluates each rung's assertions
//! (`probes/<rung>.toml`) over what it wrote, computes the verdict and writes
//! `netprobe-result.json` last. Evidence written before a failure is always kept.

use crate::assert;
use crate::evidence::result::{
    Artifact, BinaryFacts, RunResult, RungName, RungResult, SCHEMA_VERSION, Status, VerdictCode,
};
use crate::evidence::{self, EvidenceDir};
use crate::exit::ExitClass;
use crate::host;
pub use crate::probe::ladder_error::LadderError;
use crate::probe::ladder_error::{writing, writing_into};
use crate::probe::rung::{EarlyHolders, RungCtx, RungError, RungOutput, SharedRootfs};
use crate::probe::{criu_rung, external_netns, kernel, oci_rung, verdict};
use crate::report::progress::Progress;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What `netprobe run` was asked to do.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Rungs to run, validated by [`parse_phases`]: known names, ladder order, no repeats.
    pub phases: Vec<RungName>,
    /// Evidence folder; `None` = a new timestamped folder under `./evidence`.
    pub evidence: Option<PathBuf>,
    /// OCI runtime binary (default: `runc` in PATH).
    pub runtime: PathBuf,
    /// CRIU binary (default: [`host::default_criu`]).
    pub criu: PathBuf,
    /// Rootfs for the runtime rungs; `None` = the built-in busybox rootfs.
    pub rootfs: Option<PathBuf>,
    /// Run CRIU (and the runtime, following forks) under `strace -f`.
    pub strace: bool,
    /// The netprobe binary re-executed for holders (`__holder`).
    pub exe: PathBuf,
    /// The argv, recorded in the result.
    pub command: Vec<String>,
    /// What the probe's netns holds before the checkpoint (`--netns`).
    pub netns: crate::probe::netns_content::NetnsContent,
    /// The folder of the `netprobe matrix` that started this run as one of its parts
    /// (`--part-of-matrix`): `evidence` may be directly in it, once proven
    /// ([`crate::evidence::enclosing::refuse_inside_evidence`]). `None` for every other run.
    pub part_of_matrix: Option<PathBuf>,
}

/// Parses `--phases`: a comma-separated list of rung names in ladder order
/// (`kernel,criu,oci,external-netns`), each at most once.
///
/// Errors: `Usage` naming the unknown phase, the repeat, or the order it must follow.
pub fn parse_phases(s: &str) -> Result<Vec<RungName>, LadderError> {
    let all: Vec<&str> = RungName::ALL.iter().map(|r| r.as_str()).collect();
    let mut out: Vec<RungName> = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(LadderError::Usage(format!(
                "--phases {s:?} has an empty entry; use a comma-separated list of {}",
                all.join(",")
            )));
        }
        let Some(r) = RungName::parse(part) else {
            return Err(LadderError::Usage(format!(
                "--phases: unknown phase {part:?}; the phases are {}",
                all.join(",")
            )));
        };
        if out.contains(&r) {
            return Err(LadderError::Usage(format!(
                "--phases: {part} is named twice; name each phase once, in ladder order (kernel,criu,oci,external-netns)"
            )));
        }
        if let Some(last) = out.last()
            && *last > r
        {
            return Err(LadderError::Usage(format!(
                "--phases: {part} comes before {last} in the ladder; list phases cheapest first: {}",
                all.join(",")
            )));
        }
        out.push(r);
    }
    Ok(out)
}

/// Declared differences that hold for every run of the given phases, beside the pin ones.
/// `rootfs` is the `--rootfs` given (None: the busybox rootfs netprobe builds) and `netns` what
/// the probe's namespace holds; each sentence describes what the run does (the container's args
/// and read-only root are in its `config.json`; "no TCP connection kept" holds because the
/// runtime checkpoints without `--tcp-established`, so CRIU refuses any established connection).
pub fn standing_differences(
    phases: &[RungName],
    rootfs: Option<&Path>,
    netns: crate::probe::netns_content::NetnsContent,
) -> Vec<String> {
    let mut d = Vec::new();
    if phases.contains(&RungName::ExternalNetns) {
        d.push("external-netns: the network namespace is HARNESS-OWNED and is not part of the CRIU image: the runtime passes it to CRIU as an external (extRootNetNS), CRIU records only the key, and the same namespace (the holder's) must exist at restore".to_string());
        d.push("external-netns: the holder process's memory and CPU are costs of the harness and are NOT inside the container's cgroup".to_string());
    }
    if phases.contains(&RungName::Oci) || phases.contains(&RungName::ExternalNetns) {
        let what = match rootfs {
            None => {
                "/bin/sleep (busybox) on a read-only busybox rootfs built by netprobe".to_string()
            }
            Some(r) => format!(
                "`sleep 86400` on the read-only rootfs {} given with --rootfs",
                r.display()
            ),
        };
        d.push(format!("runtime rungs run {what}, not the production image; no TCP connection is kept across checkpoint/restore (the runtime checkpoints without --tcp-established: CRIU refuses an established connection)"));
    }
    let lo_only = netns == crate::probe::netns_content::NetnsContent::Lo;
    if phases.contains(&RungName::Kernel) || phases.contains(&RungName::Criu) {
        d.push(if lo_only {
            "kernel and criu rungs probe a netns holding only lo (--netns lo); containers with more links are not covered by these rungs".to_string()
        } else {
            "the kernel rung probes a fresh netns holding only lo; the criu and runtime rungs probe the --netns rich content (veth pair, IPv4/IPv6 addresses, routes in main and table 100, a policy rule, sysctls, iptables and nftables rules), not a production container's".to_string()
        });
    }
    d
}

/// The evidence file listing what the run's start released of runs killed with SIGKILL
/// ([`crate::probe::stale::Swept`]); written only when something was found.
pub const STALE_SWEPT_FILE: &str = "stale-swept.json";

/// Runs the ladder and writes the evidence; returns the result (also written to
/// `DIR/netprobe-result.json`) and the evidence folder.
///
/// Errors: `Usage` for bad input (evidence folder exists, rootfs without sleep), `HostRefused`
/// for an unready host (exit 3), `CouldNotRun` when no result could be written. A rung that
/// fails or errors is not an error here: it is recorded in the result.
pub fn run(
    opts: &RunOptions,
    progress: &mut Progress,
) -> Result<(RunResult, PathBuf), LadderError> {
    let started_at = crate::evidence::now_rfc3339();
    let t0 = Instant::now();
    // First of all: from here on a signal releases whatever has been started (see below).
    let handler_error = crate::ns::cleanup::install_signal_handler().err();
    // This thread starts holders, containers and restored processes (see cleanup::worker).
    let _worker = crate::ns::cleanup::worker();
    if opts.phases.is_empty() {
        return Err(LadderError::Usage("--phases names no phase".into()));
    }
    // Every runtime and CRIU this run starts carries its pid: what a SIGKILL leaves running is
    // found by the next run (`probe::stale`).
    crate::proc::mark_children_with_run_pid();
    let (criu_facts, runtime_facts, early_holders, shared_rootfs) = host_gates(opts)?;

    let dir_path = opts
        .evidence
        .clone()
        .unwrap_or_else(|| evidence::default_path(Path::new("evidence")));
    let ev = EvidenceDir::create_part(&dir_path, opts.part_of_matrix.as_deref())
        .map_err(LadderError::EvidenceFolder)?;
    let dir_path = ev.root().to_path_buf();
    // The first file: says "not finished" until the result is written (a full disk may refuse
    // every later write, even the reason).
    ev.mark_incomplete(&started_at)
        .map_err(writing_into(&ev, "writing the first evidence file"))?;
    let noted = |e: LadderError| {
        ev.note_incomplete(&e.to_string());
        e
    };
    sweep_stale(&ev, progress).map_err(noted)?;

    let host_facts = host::host_facts(Some(criu_facts.clone()), runtime_facts.clone());
    ev.write_json("host.json", &host_facts)
        .map_err(writing_into(&ev, "writing host.json"))
        .map_err(noted)?;
    let pins = host::check_pins(&criu_facts, runtime_facts.as_ref());
    let runtime_kind = runtime_facts
        .as_ref()
        .and_then(|f| crate::oci::RuntimeKind::from_version_output(&f.version_output));
    let mut declared = declared_differences(opts, &pins, &host_facts, runtime_kind);

    let ctx_base = RungCtx {
        evidence: &ev,
        criu: opts.criu.clone(),
        runtime: opts.runtime.clone(),
        runtime_kind,
        criu_version: criu_facts.version.clone(),
        rootfs: opts.rootfs.clone(),
        strace: opts.strace,
        exe: opts.exe.clone(),
        early_holders: Some(&early_holders),
        netns: opts.netns,
        shared_rootfs: shared_rootfs.as_ref(),
    };

    // A signal does not unwind: release what the rungs started, and leave a note beside the
    // evidence gathered so far (no netprobe-result.json is written for an interrupted run).
    if let Some(e) = &handler_error {
        declared.push(format!(
            "netprobe could not install its signal handler ({e}): an interrupted run may leave processes behind"
        ));
    }
    let _note_on_signal = interruption_note(&ev);
    // Restored processes re-parent to us, so we can reap them after killing them.
    if let Err(e) = crate::probe::util::become_subreaper() {
        declared.push(format!(
            "netprobe could not become child subreaper ({e}): processes restored detached may stay as zombies of pid 1"
        ));
    }
    let rungs = run_rungs(opts, &ctx_base, progress);
    // The shared rootfs's work area is gone before the result says the run is over.
    drop(shared_rootfs);
    let mut result = RunResult {
        schema_version: SCHEMA_VERSION,
        tool: "netprobe".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        command: opts.command.clone(),
        started_at,
        finished_at: String::new(),
        duration_ms: 0,
        phases: opts.phases.clone(),
        host: host_facts,
        pins,
        declared_differences: declared,
        verdict: verdict::compute(&rungs),
        rungs,
        artifacts: Vec::new(),
    };
    write_result(&ev, &mut result, t0).map_err(noted)?;
    ev.clear_incomplete().map_err(writing(
        "the result is written, but removing the incomplete marker",
    ))?;
    Ok((result, dir_path))
}

/// What runs killed with SIGKILL left (holders, containers, work areas), released once this run
/// is past its refusals and has a folder to record it in (`stale-swept.json`, named on the
/// progress lines): a refused run touches nothing. This run's own holders carry a live pid.
///
/// Errors: `stale-swept.json` cannot be written.
fn sweep_stale(ev: &EvidenceDir, progress: &mut Progress) -> Result<(), LadderError> {
    let swept = crate::probe::stale::sweep(
        Path::new("/proc"),
        Path::new("/var/tmp"),
        &std::env::temp_dir(),
    );
    if swept.is_empty() {
        return Ok(());
    }
    ev.write_json(STALE_SWEPT_FILE, &swept)
        .map_err(writing_into(ev, "writing stale-swept.json"))?;
    progress.note(&format!(
        "released what runs killed with SIGKILL left: {} ({})",
        swept.summary(),
        ev.root().join(STALE_SWEPT_FILE).display()
    ));
    Ok(())
}

/// Every declared difference of the run: binaries vs the pins (with paths), what the phases
/// run instead of production (`standing_differences`), crun's quirks, and the set-up's record
/// of pins the archive no longer served.
fn declared_differences(
    opts: &RunOptions,
    pins: &[crate::evidence::result::PinCheck],
    host_facts: &crate::evidence::result::HostFacts,
    runtime_kind: Option<crate::oci::RuntimeKind>,
) -> Vec<String> {
    let mut declared = host::pin_differences_with_paths(pins, host_facts);
    declared.extend(standing_differences(
        &opts.phases,
        opts.rootfs.as_deref(),
        opts.netns,
    ));
    if let Some(kind) = runtime_kind {
        declared.extend(crate::oci::crun_quirks(kind, crate::oci::host_is_hybrid()));
    }
    declared.extend(host::install_record_differences(host_facts));
    declared.extend(host::script_differences(host_facts));
    declared
}

/// The release list an interruption note carries ([`crate::ns::cleanup::released_list`]).
pub fn released_list() -> String {
    crate::ns::cleanup::released_list()
}

/// Registers the note an interrupted run leaves (`interrupted.txt`, no result): a signal does
/// not unwind, so the release writes it beside the evidence gathered so far.
fn interruption_note(ev: &EvidenceDir) -> crate::ns::cleanup::Registration {
    let note_dir = ev.clone();
    crate::ns::cleanup::register_note("interruption note", move || {
        let by = crate::ns::cleanup::interrupted_by().unwrap_or("a signal");
        let path = note_dir.root().join(evidence::dir::INTERRUPTED_FILE);
        let wrote = note_dir.write(
            evidence::dir::INTERRUPTED_FILE,
            format!(
                "netprobe run was interrupted by {by} at {}; what it had started was released \
                 (listed below); no netprobe-result.json was written; run `netprobe run` again \
                 with a new --evidence folder\n{}",
                crate::evidence::now_rfc3339(),
                released_list()
            )
            .as_bytes(),
        );
        crate::ns::cleanup::wrote_note(&path, wrote)
    })
}

/// Host gates: root, no CRIU config file, CRIU present and `criu check` passes, the runtime
/// recognised (for the runtime rungs), the `--rootfs` usable. Starts the rungs' holders and,
/// for runtime rungs without `--rootfs`, the build of the busybox rootfs they share.
#[allow(clippy::type_complexity)]
fn host_gates(
    opts: &RunOptions,
) -> Result<
    (
        BinaryFacts,
        Option<BinaryFacts>,
        EarlyHolders,
        Option<SharedRootfs>,
    ),
    LadderError,
> {
    let needs_runtime = opts
        .phases
        .iter()
        .any(|p| matches!(p, RungName::Oci | RungName::ExternalNetns));
    host::check_root()?;
    host::refuse_criu_config()?;
    // The rungs' holders start now, on their own threads (see EarlyHolders).
    let early_holders = EarlyHolders::start(&opts.phases, &opts.exe);
    // The runtime rungs' rootfs is built beside `criu check` too (see SharedRootfs).
    let shared_rootfs = (needs_runtime && opts.rootfs.is_none()).then(SharedRootfs::start);
    // The runtime's facts (`--version`, sha256) are gathered on a second thread while CRIU's
    // readiness (`--version`, sha256, `criu check`) is proven; CRIU's refusal is reported first.
    let (criu_ready, runtime_ready) = std::thread::scope(|s| {
        let runtime = needs_runtime
            .then(|| s.spawn(|| host::binary_facts(&opts.runtime, host::BinaryKind::Runtime)));
        let criu = host::refuse_unless_ready(&opts.criu);
        let runtime = runtime.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        (criu, runtime)
    });
    // A signal that arrived during these checks killed `criu check` or `--version` too: that is
    // an interruption (released, exit 128+N), not a refusal of the host.
    crate::ns::cleanup::checkpoint();
    let criu_facts = criu_ready?;
    let runtime_facts: Option<BinaryFacts> = runtime_ready.transpose()?;
    if let Some(rootfs) = &opts.rootfs
        && needs_runtime
    {
        crate::oci::check_rootfs(rootfs).map_err(LadderError::Rootfs)?;
    }
    Ok((criu_facts, runtime_facts, early_holders, shared_rootfs))
}

/// Runs the requested rungs cheapest first (the others recorded as skipped), flushing each
/// rung's files while the next one runs.
fn run_rungs(opts: &RunOptions, ctx: &RungCtx, progress: &mut Progress) -> Vec<RungResult> {
    let mut rungs = Vec::new();
    let mut early_syncs = Vec::new();
    for name in RungName::ALL {
        if !opts.phases.contains(&name) {
            rungs.push(skipped(name));
            continue;
        }
        crate::ns::cleanup::checkpoint();
        progress.rung_started(name);
        let r = run_one(name, ctx);

        crate::probe::util::reap_exited_children();
        progress.rung_finished(&r);
        rungs.push(r);
        // What the rung wrote is flushed while the next rung runs (the final syncfs proves it);
        // after the last one, the syncfs before the result does it.
        if opts.phases.last() != Some(&name) {
            early_syncs.push(ctx.evidence.sync_in_background());
        }
    }
    // A signal during the last rung may have killed its runtime or CRIU, which the rung then
    // recorded as an error: it is an interruption, and no result is written for it.
    crate::ns::cleanup::checkpoint();
    for s in early_syncs {
        let _ = s.join();
    }
    rungs
}

/// Makes the evidence readable, hashes every file once (each rung gets the files under its
/// folder), stamps the end time and writes `netprobe-result.json` last.
fn write_result(ev: &EvidenceDir, result: &mut RunResult, t0: Instant) -> Result<(), LadderError> {
    ev.make_readable()
        .map_err(writing_into(ev, "making the evidence readable"))?;
    let artifacts: Vec<Artifact> = ev
        .inventory()
        .map_err(writing_into(ev, "listing the evidence folder"))?;
    for r in result.rungs.iter_mut() {
        let prefix = format!("{}/", r.name.as_str());
        r.artifacts = artifacts
            .iter()
            .filter(|a| a.path.starts_with(&prefix))
            .cloned()
            .collect();
    }
    result.artifacts = artifacts;
    result.finished_at = crate::evidence::now_rfc3339();
    result.duration_ms = t0.elapsed().as_millis() as u64;
    ev.write_result(result).map_err(writing_into(
        ev,
        format!("writing {}", evidence::result::RESULT_FILE),
    ))?;
    Ok(())
}

fn skipped(name: RungName) -> RungResult {
    RungResult {
        name,
        status: Status::Skipped,
        summary: "not requested with --phases".into(),
        started_at: crate::evidence::now_rfc3339(),
        duration_ms: 0,
        timings_ms: BTreeMap::new(),
        facts: BTreeMap::new(),
        assertions: vec![],
        artifacts: vec![],
        error: None,
    }
}

/// Runs one rung, evaluates its assertions over what it wrote (its `artifacts` are filled in
/// later by [`run`], from one inventory of the whole folder), and never panics the run:
/// a rung error or panic becomes status `error` with the reason.
fn run_one(name: RungName, ctx: &RungCtx) -> RungResult {
    let started_at = crate::evidence::now_rfc3339();
    let t = Instant::now();
    let rung_dir = ctx.evidence.root().join(name.as_str());
    let out: Result<RungOutput, RungError> =
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match name {
            RungName::Kernel => kernel::run(ctx),
            RungName::Criu => criu_rung::run(ctx),
            RungName::Oci => oci_rung::run(ctx),
            RungName::ExternalNetns => external_netns::run(ctx),
        })) {
            Ok(r) => r,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into());
                Err(RungError::new("panic", msg))
            }
        };
    let duration_ms = t.elapsed().as_millis() as u64;
    let spec = match assert::ProbeSpec::builtin(name) {
        Ok(s) => s,
        Err(e) => {
            return RungResult {
                error: Some(format!("probes/{name}.toml: {e}")),
                status: Status::Error,
                summary: format!("could not load probes/{name}.toml: {e}"),
                ..skipped(name)
            };
        }
    };
    let artifacts = Vec::new(); // filled by `run` from one inventory of the whole folder
    match out {
        Ok(o) => {
            let assertions = assert::evaluate(&spec, &rung_dir);
            let status = verdict::status_from_assertions(&assertions);
            let summary = summarize(status, &o.summary, &assertions);
            RungResult {
                name,
                status,
                summary,
                started_at,
                duration_ms,
                timings_ms: o.timings_ms,
                facts: o.facts,
                assertions,
                artifacts,
                error: None,
            }
        }
        Err(e) => {
            // Evaluate what is there, for people; the status stays `error`.
            let assertions = assert::evaluate(&spec, &rung_dir);
            RungResult {
                name,
                status: Status::Error,
                summary: format!("could not run: {e}"),
                started_at,
                duration_ms,
                timings_ms: e.timings_ms.clone(),
                facts: e.facts.clone(),
                assertions,
                artifacts,
                error: Some(e.to_string()),
            }
        }
    }
}

/// The summary of a rung that ran to the end, one line: the rung's deciding fact (`summary`),
/// followed for a failing rung by `<id> failed` for each failing pass-role assertion. Pure:
/// `verify` rebuilds it from the files.
pub fn summarize(
    status: Status,
    summary: &str,
    assertions: &[crate::evidence::result::AssertionResult],
) -> String {
    match status {
        Status::Pass => summary.to_string(),
        _ => {
            let failed: Vec<String> = assertions
                .iter()
                .filter(|a| a.role == verdict::ROLE_PASS && !a.passed)
                .map(|a| format!("{} failed", a.id))
                .collect();
            if summary.is_empty() {
                failed.join("; ")
            } else {
                format!("{summary}; {}", failed.join("; "))
            }
        }
    }
}

/// The exit class of a finished run: could-not-run when a rung could not run, gate (exit 1)
/// when `expect` is given and differs from the verdict, else ok.
pub fn exit_class(result: &RunResult, expect: Option<VerdictCode>) -> ExitClass {
    if let Some(e) = expect
        && e != result.verdict.code
    {
        return ExitClass::Gate;
    }
    if result.rungs.iter().any(|r| r.status == Status::Error) {
        return ExitClass::CouldNotRun;
    }
    ExitClass::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_parse_in_ladder_order() {
        assert_eq!(
            parse_phases("kernel,criu,oci,external-netns").unwrap(),
            RungName::ALL.to_vec()
        );
        assert_eq!(parse_phases("oci").unwrap(), vec![RungName::Oci]);
        assert_eq!(
            parse_phases(" kernel , oci ").unwrap(),
            vec![RungName::Kernel, RungName::Oci]
        );
    }

    #[test]
    fn bad_phases_name_the_problem() {
        let e = parse_phases("kernel,crui").unwrap_err().to_string();
        assert!(e.contains("unknown phase \"crui\""), "{e}");
        let e = parse_phases("criu,kernel").unwrap_err().to_string();
        assert!(e.contains("kernel comes before criu"), "{e}");
        let e = parse_phases("kernel,kernel").unwrap_err().to_string();
        assert!(e.contains("named twice"), "{e}");
        let e = parse_phases("kernel,,criu").unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }
}
