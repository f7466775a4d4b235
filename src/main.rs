//! netprobe's command line: parse (clap derive, [`cli`]), dispatch, map usage errors to exit
//! code 2. No logic lives here. Exit codes (README): 0 ran and matched, 1 verdict differs from
//! `--expect` / a gate failed / verify did not reproduce, 2 usage, 3 host refused, 4 a phase
//! could not run.

mod cli;

use clap::Parser;
use cli::Execute;
use std::process::ExitCode;

fn main() -> ExitCode {
    let parsed = cli::Cli::try_parse().and_then(|c| match &c.cmd {
        cli::Cmd::Slot(s) => s.validate().map(|()| c),
        _ => Ok(c),
    });
    match parsed {
        Ok(c) => c.cmd.execute(),
        Err(mut e) => {
            let argv: Vec<String> = std::env::args().skip(1).collect();
            if let Some(doc) = cli::slot::usage_json(&argv, &mut e) {
                cli::out::line(serde_json::to_string_pretty(&doc).unwrap_or_default());
            }
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            ExitCode::from(code)
        }
    }
}
