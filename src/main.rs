fn main() {
    // Hidden holder mode (`netprobe __holder --report-fd N [--lo-up]`, src/ns/holder.rs),
    // checked before anything else; the lead folds it into the clap CLI later.
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(netprobe::ns::holder::HOLDER_ARG) {
        let (mut report_fd, mut lo_up, mut bad, mut rest) = (None, false, false, args[2..].iter());
        while let Some(a) = rest.next() {
            match a.as_str() {
                "--lo-up" => lo_up = true,
                "--report-fd" => report_fd = rest.next().and_then(|v| v.parse().ok()),
                _ => bad = true,
            }
        }
        let (Some(fd), false) = (report_fd, bad) else {
            eprintln!("usage: netprobe __holder --report-fd N [--lo-up]");
            std::process::exit(2);
        };
        netprobe::ns::holder_main(fd, lo_up);
    }
    println!("netprobe: under construction");
}
