//! Build-time generator of the man pages and shell completions the packages ship
//! (`scripts/package.sh`): `cargo run --locked --example gen-docs -- OUT_DIR` writes
//! `OUT_DIR/man/oci-coresched-hook.1` plus one `oci-coresched-hook-<command>.1` per command, and
//! `OUT_DIR/completions/` for bash, zsh and fish, from the same clap definitions as the binary.
//!
//! It is an example, not a subcommand, so that the binary the runtime starts at every container
//! start does not carry clap_mangen and clap_complete (about 230 KB of its 4.1 MB).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::CommandFactory;
use clap_complete::Shell;

use oci_coresched_hook::cli::args::Cli;

const NAME: &str = "oci-coresched-hook";

/// The completion files, named as the packages install them.
const COMPLETIONS: [(Shell, &str); 3] = [
    (Shell::Bash, "oci-coresched-hook.bash"),
    (Shell::Zsh, "_oci-coresched-hook"),
    (Shell::Fish, "oci-coresched-hook.fish"),
];

/// Writes `oci-coresched-hook.1` and one `oci-coresched-hook-<sub>.1` per subcommand into `dir`.
fn man_pages(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let cmd = Cli::command();
    let mut written = Vec::new();
    let mut pages = vec![(dir.join(format!("{NAME}.1")), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("{NAME}-{}", sub.get_name());
        pages.push((dir.join(format!("{name}.1")), sub.clone().name(name)));
    }
    for (path, page) in pages {
        let mut buf = Vec::new();
        clap_mangen::Man::new(page).render(&mut buf)?;
        std::fs::write(&path, buf)?;
        written.push(path);
    }
    Ok(written)
}

/// Writes the bash, zsh and fish completion scripts into `dir`.
fn completions(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for (shell, file) in COMPLETIONS {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), NAME, &mut buf);
        let path = dir.join(file);
        std::fs::write(&path, buf)?;
        written.push(path);
    }
    Ok(written)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out] = &args[..] else {
        eprintln!("usage: gen-docs OUT_DIR (writes OUT_DIR/man/*.1 and OUT_DIR/completions/*)");
        return ExitCode::from(2);
    };
    let out = Path::new(out);
    let result = man_pages(&out.join("man"))
        .map_err(|e| format!("failed to write man pages to {}: {e}", out.join("man").display()))
        .and_then(|mut pages| {
            let comp = out.join("completions");
            let more =
                completions(&comp).map_err(|e| format!("failed to write completions to {}: {e}", comp.display()))?;
            pages.extend(more);
            Ok(pages)
        });
    match result {
        Ok(files) => {
            files.iter().for_each(|f| println!("{}", f.display()));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gen-docs: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_name_every_subcommand() {
        let dir = tempfile::tempdir().unwrap();
        let files = completions(dir.path()).unwrap();
        assert_eq!(files.len(), 3);
        let bash = std::fs::read_to_string(dir.path().join("oci-coresched-hook.bash")).unwrap();
        for sub in [
            "hook",
            "explain",
            "inspect",
            "list",
            "gc",
            "reconcile",
            "rebuild",
            "metrics",
            "doctor",
            "status",
            "check-config",
        ] {
            assert!(bash.contains(sub), "bash completion lacks {sub}");
        }
    }

    #[test]
    fn man_pages_are_written_per_command() {
        let dir = tempfile::tempdir().unwrap();
        let pages = man_pages(dir.path()).unwrap();
        assert!(pages.iter().any(|p| p.ends_with("oci-coresched-hook.1")));
        for page in ["hook", "doctor", "status", "check-config"] {
            assert!(
                pages.iter().any(|p| p.ends_with(format!("oci-coresched-hook-{page}.1"))),
                "no man page for {page}"
            );
        }
        let main = std::fs::read_to_string(dir.path().join("oci-coresched-hook.1")).unwrap();
        assert!(main.contains(".TH oci-coresched-hook"), "{}", &main[..200.min(main.len())]);
        assert!(main.contains("Exit codes"));
    }
}
