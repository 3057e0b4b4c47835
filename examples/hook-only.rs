//! The hook alone, for the A/B of one binary against two (`make bench-split`): the same library
//! and the same command line for the runtime's `hook` invocation, with nothing else reachable, so
//! that the linker leaves out the NRI plugin, the follower, the endpoint, the operator commands and
//! clap's command tree. Not shipped: BENCHMARKS.md ("One binary or two") says what the A/B found.

fn main() -> std::process::ExitCode {
    // SAFETY: the process's main thread, first thing: no other thread exists yet.
    unsafe { oci_coresched_hook::store::skip_memory_statistics() };
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match oci_coresched_hook::cli::args::Cli::parse_hook_fast(&args) {
        Some(cli) => oci_coresched_hook::cli::run_hook_only(cli).into(),
        None => {
            eprintln!("hook-only: error: only the runtime's hook command line is accepted here");
            oci_coresched_hook::exit_codes::ExitCode::Usage.into()
        }
    }
}
