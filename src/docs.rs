//! Generated documentation: shell completions (clap_complete) and man pages (clap_mangen).

use std::io::Write;
use std::path::Path;

use clap::CommandFactory;

use crate::cli::Cli;

/// Writes the completion script for `shell` to `out`.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn Write) {
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "oci-coresched-hook", out);
}

/// Writes the main man page to `out`.
pub fn man(out: &mut dyn Write) -> std::io::Result<()> {
    clap_mangen::Man::new(Cli::command()).render(out)
}

/// Writes `oci-coresched-hook.1` and one `oci-coresched-hook-<sub>.1` per subcommand into `dir`.
pub fn man_pages(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let cmd = Cli::command();
    let mut written = Vec::new();
    let main = dir.join("oci-coresched-hook.1");
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut buf)?;
    std::fs::write(&main, buf)?;
    written.push(main);
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("oci-coresched-hook-{}", sub.get_name());
        let sub = sub.clone().name(name.clone());
        let mut buf = Vec::new();
        clap_mangen::Man::new(sub).render(&mut buf)?;
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, buf)?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_name_every_subcommand() {
        let mut out = Vec::new();
        completions(clap_complete::Shell::Bash, &mut out);
        let text = String::from_utf8(out).unwrap();
        for sub in ["hook", "explain", "inspect", "list", "completions", "man"] {
            assert!(text.contains(sub), "bash completion lacks {sub}");
        }
    }

    #[test]
    fn man_pages_are_written_per_command() {
        let dir = tempfile::tempdir().unwrap();
        let pages = man_pages(dir.path()).unwrap();
        assert!(pages.iter().any(|p| p.ends_with("oci-coresched-hook.1")));
        assert!(pages.iter().any(|p| p.ends_with("oci-coresched-hook-hook.1")));
        let main = std::fs::read_to_string(dir.path().join("oci-coresched-hook.1")).unwrap();
        assert!(main.contains(".TH oci-coresched-hook"), "{}", &main[..200.min(main.len())]);
        assert!(main.contains("Exit codes"));
    }
}
