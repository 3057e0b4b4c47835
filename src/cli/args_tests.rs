//! The unit tests of `src/cli/args.rs`.

use super::*;

fn argv(words: &[&str]) -> Vec<OsString> {
    std::iter::once("oci-coresched-hook").chain(words.iter().copied()).map(OsString::from).collect()
}

#[test]
fn the_runtime_invocations_take_the_fast_path() {
    for words in [
        &["hook"][..],
        &["hook", "--stage", "createRuntime"],
        &["--config", "/etc/x.toml", "--state-dir", "/run/x", "hook", "--stage", "poststop"],
        &["--log-level=debug", "hook", "--state", "/tmp/s.json"],
    ] {
        let fast = Cli::parse_hook_fast(&argv(words)).unwrap_or_else(|| panic!("{words:?} must be parsed fast"));
        let clap = Cli::try_parse_from(argv(words)).unwrap();
        assert_eq!(format!("{fast:?}"), format!("{clap:?}"), "{words:?}");
    }
}

/// Every command line of up to four words from a vocabulary of valid, repeated, misplaced and
/// odd tokens: whenever the fast parser accepts one, clap accepts it with the same result.
#[test]
fn the_fast_path_agrees_with_clap_wherever_it_answers() {
    let vocab = [
        "hook",
        "explain",
        "list",
        "--config",
        "--config=c.toml",
        "--state-dir",
        "--state-dir=/d",
        "--log-level",
        "--log-level=warn",
        "--stage",
        "--stage=poststart",
        "--stage=bogus",
        "createRuntime",
        "--state",
        "--state=s.json",
        "s.json",
        "-h",
        "--help",
        "--",
        "",
        "-x",
        "--stage=",
        "--version",
    ];
    let (mut accepted, mut total) = (0, 0);
    let mut line = Vec::new();
    fn walk<'a>(vocab: &[&'a str], line: &mut Vec<&'a str>, depth: usize, f: &mut dyn FnMut(&[&'a str])) {
        f(line);
        if depth == 0 {
            return;
        }
        for w in vocab {
            line.push(w);
            walk(vocab, line, depth - 1, f);
            line.pop();
        }
    }
    walk(&vocab, &mut line, 4, &mut |words| {
        total += 1;
        if let Some(fast) = Cli::parse_hook_fast(&argv(words)) {
            accepted += 1;
            let clap = Cli::try_parse_from(argv(words))
                .unwrap_or_else(|e| panic!("fast path accepted {words:?}, clap rejects it: {e}"));
            assert_eq!(format!("{fast:?}"), format!("{clap:?}"), "{words:?}");
        }
    });
    assert!(accepted > 100, "the fast path accepted only {accepted} of {total} lines");
}
