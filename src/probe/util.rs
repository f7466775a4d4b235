//! Small helpers shared by the rungs.

use std::process::{Command, Stdio};

/// iproute2's view of the netns of `pid` (`nsenter -t PID -n ip -j addr show` and
/// `… route show table all`), for people to read beside the in-process capture.
/// Best effort: the in-process capture is the evidence assertions read.
///
/// Errors: the spawn error when `nsenter`/`ip` cannot run.
pub fn ip_view(pid: i32) -> std::io::Result<String> {
    let mut text = String::new();
    for args in [
        vec!["addr", "show"],
        vec!["route", "show", "table", "all"],
        vec!["-6", "route", "show", "table", "all"],
    ] {
        let o = Command::new("nsenter")
            .arg("-t")
            .arg(pid.to_string())
            .arg("-n")
            .arg("ip")
            .arg("-j")
            .args(&args)
            .stdin(Stdio::null())
            .output()?;
        text.push_str(&format!("$ nsenter -t {pid} -n ip -j {}\n", args.join(" ")));
        text.push_str(&String::from_utf8_lossy(&o.stdout));
        text.push_str(&String::from_utf8_lossy(&o.stderr));
        text.push('\n');
    }
    Ok(text)
}
