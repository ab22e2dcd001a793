//! `blindspot`: the command-line shell over the Blindspot core.
//!
//! Bad input ends with a one-line `error: ...` on stderr and exit code 2.

mod cli;

fn main() -> std::process::ExitCode {
    cli::run()
}
