//! netprobe's command line: parse (clap derive, [`cli`]), dispatch, map usage errors to
//! [`ExitClass::Usage`]. No logic lives here; the exit-code table is documented on
//! [`ExitClass`].

mod cli;

use clap::Parser;
use cli::Execute;
use netprobe::exit::ExitClass;
use std::process::ExitCode;

fn main() -> ExitCode {
    let parsed = cli::Cli::try_parse().and_then(|c| match &c.cmd {
        cli::Cmd::Slot(s) => s.validate().map(|()| c),
        _ => Ok(c),
    });
    match parsed {
        Ok(c) => match netprobe::proc::check_step_timeout_env() {
            Ok(()) => {
                let code = c.cmd.execute();
                // A signal seen before this point is being handled (exit 128 + signal).
                netprobe::ns::cleanup::command_finished();
                code
            }
            Err(m) => {
                eprintln!("netprobe: {m}");
                ExitClass::Usage.into()
            }
        },
        Err(mut e) => {
            let argv: Vec<String> = std::env::args().skip(1).collect();
            if let Some(doc) = cli::slot::usage_json(&argv, &mut e) {
                cli::out::line(serde_json::to_string_pretty(&doc).unwrap_or_default());
            }
            // Help and version output go to stdout and are not errors.
            let class = if e.use_stderr() {
                ExitClass::Usage
            } else {
                ExitClass::Ok
            };
            let _ = e.print();
            class.into()
        }
    }
}
