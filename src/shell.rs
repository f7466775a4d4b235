//! Words of the command lines netprobe prints for the user to paste (`report:` after a run, a
//! slot's `advice`, the "run `netprobe …`" hints of errors): each path or other argument goes
//! through [`arg`], so that the printed line is one a POSIX shell runs as shown — a path with a
//! space or a quote stays one argument. The quoting is the `shlex` crate's (tested against bash,
//! dash, zsh, ash and mksh); a word that needs none prints unchanged, so plain paths read as
//! before.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// `word` (a path, a runtime id, any argument) as one POSIX shell word: unchanged when every
/// byte is one a shell takes literally (ASCII `A-Za-z0-9` and `+-./:@]_`), else quoted (`'/tmp/with space'`; a `'` inside goes in double quotes) by
/// [`shlex::bytes::try_quote`]. Bytes that are not UTF-8 print as U+FFFD (the path cannot be
/// pasted then, as with `Path::display`). A NUL byte (no path or argv word holds one) cannot be
/// quoted: the word prints Rust-escaped in double quotes instead. Pure.
pub fn arg(word: impl AsRef<OsStr>) -> String {
    let bytes = word.as_ref().as_bytes();
    match shlex::bytes::try_quote(bytes) {
        Ok(q) => String::from_utf8_lossy(&q).into_owned(),
        Err(_) => format!("{:?}", String::from_utf8_lossy(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::arg;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    #[test]
    fn plain_paths_and_words_print_unchanged() {
        for w in [
            "/var/lib/netprobe/slots",
            "evidence/20261130T013419Z-4242",
            "target/release/netprobe",
            "/opt/runc-1.4.3/sbin/runc",
            "netprobe-slot-61",
            "ev/matrix-2",
            "/tmp/x@y:z+1",
        ] {
            assert_eq!(arg(Path::new(w)), w);
        }
    }

    #[test]
    fn a_space_or_shell_character_is_quoted_so_a_shell_reads_one_word() {
        assert_eq!(arg("/tmp/x/with space"), "'/tmp/x/with space'");
        assert_eq!(arg(Path::new("a b/s")), "'a b/s'");
        assert_eq!(arg("/tmp/$HOME"), "'/tmp/$HOME'");
        assert_eq!(arg("/tmp/a;rm"), "'/tmp/a;rm'");
        assert_eq!(arg("/tmp/*"), "'/tmp/*'");
        assert_eq!(arg("~/x"), "'~/x'");
        assert_eq!(arg(""), "''");
        assert_eq!(arg("/tmp/ünïcode"), "'/tmp/ünïcode'");
        // A single quote cannot be inside single quotes: shlex switches to double quotes.
        assert_eq!(arg("/tmp/it's"), "\"/tmp/it's\"");
    }

    #[test]
    fn quoted_words_split_back_into_the_same_words() {
        for w in [
            "/tmp/x/with space",
            "/tmp/it's here",
            "/tmp/a\"b\\c`d$e!f",
            "/tmp/new\nline",
            "/tmp/tab\there",
        ] {
            let line = format!("netprobe report {} --format html", arg(w));
            assert_eq!(
                shlex::split(&line).unwrap(),
                ["netprobe", "report", w, "--format", "html"],
                "{line}"
            );
        }
    }

    #[test]
    fn a_word_no_shell_can_take_still_prints_visibly() {
        assert_eq!(arg("a\0b"), "\"a\\0b\"");
        assert_eq!(arg(OsStr::from_bytes(b"/tmp/\xff")), "'/tmp/\u{fffd}'");
    }
}
