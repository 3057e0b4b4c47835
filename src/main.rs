//! `oci-coresched-hook`: parse the command line and hand it to the library. Exit codes are in
//! `--help` and the README: 0 done (or failed open), 1 failed, 2 usage or unreadable input.

use std::process::ExitCode;

fn main() -> ExitCode {
    oci_coresched_hook::app::run(oci_coresched_hook::cli::Cli::from_env())
}
