//! `blindspot`: the command-line shell over the Blindspot core.
//!
//! Bad input ends with a one-line `error: ...` on stderr and exit code 2.

mod cli;

/// mimalloc keeps freed memory for reuse: glibc's malloc maps the large
/// activations of a model pass fresh and returns them after every op, and a
/// MiniLM pass of 32 texts ran 1.24x faster without that (BENCHMARKS.md).
/// The browser build has its own allocator.
#[cfg(not(target_arch = "wasm32"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // Freed pages stay mapped: a model pass otherwise faults them back in.
    #[cfg(not(target_arch = "wasm32"))]
    blindspot::allocator::keep_freed_pages();
    // Rust ignores SIGPIPE, so printing to a pipe whose reader has gone
    // (`blindspot embed ... | head -1`) panicked with a backtrace. Unix
    // tools end quietly there: restore the default action.
    #[cfg(unix)]
    // SAFETY: called before any thread starts; SIG_DFL is a valid
    // action for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    cli::run()
}
