//! `oci-coresched-hook`: hands the process to the library and exits with what it returns, the
//! one exit point. The codes are `exit_codes.rs`'s (in `--help` and the README): 0 done (or failed
//! open), 1 failed, 2 usage or unreadable input.
//!
//! First thing, before any thread and any use of SQLite, it turns off SQLite's memory statistics
//! (`store::skip_memory_statistics`, one of the crate's few `unsafe` calls).

fn main() -> std::process::ExitCode {
    // SAFETY: the process's main thread, first thing: no other thread exists yet.
    unsafe { oci_coresched_hook::store::skip_memory_statistics() };
    oci_coresched_hook::cli::main().into()
}
